"""What gates share during one verification: the lock, the project and cached backend runs."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from baseline.backends import BackendJob, BackendRun, capabilities, get_backend
from baseline.backends.base import BoardInputs, backend_job
from baseline.board.capture import capture_dir
from baseline.errors import BaselineError, EnvironmentBroken, InputError
from baseline.models.base import replaced
from baseline.models.intent import TargetSpec
from baseline.models.lock import FilePin, Lock, ModelLock
from baseline.models.results import LayerError
from baseline.project.layout import Project
from baseline.verification.cache import FileHashes
from baseline.verification.runcache import RunCache

if TYPE_CHECKING:  # numpy: only when a job really reads tensors, never on a cached verify
    from baseline.files.tensors import TensorSet
    from baseline.models.tensors import TensorStats

T = TypeVar("T")


class _Memo:
    """Values computed once even when parallel jobs ask for them at the same time."""

    def __init__(self) -> None:
        self.values: dict[Any, Any] = {}
        self._guard = threading.Lock()
        self._locks: dict[Any, threading.Lock] = {}

    def get(self, key: Any, compute: Callable[[], T]) -> T:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:  # a second job needing the same run waits for it instead of repeating it
            if key not in self.values:
                self.values[key] = compute()
        value: T = self.values[key]
        return value


@dataclass
class VerifyContext:
    """Runs each backend at most once per model and target, however many gates and jobs need it.

    Shared by the threads of a local run. Pickled for a Ray task it travels as the project (its
    paths made absolute), the lock and where file hashes are kept; the other side starts fresh
    caches, but reads the run's file hashes once per process (`FileHashes.of_process`).
    """

    project: Project
    lock: Lock
    hashes: FileHashes = field(default_factory=FileHashes)
    """File hashes, remembered across runs when verify gives them a file."""
    locate_divergence: bool = True
    """Whether a failing comparison asks the toolkit where it starts (`analyse`): `lock` measuring
    what varies needs only the numbers, not a toolkit run per failing output."""
    stored_runs: RunCache | None = None
    """Backend runs kept across commands by what they read (`runcache`): a judging edit converts nothing."""
    _runs: _Memo = field(default_factory=_Memo)
    _tensors: _Memo = field(default_factory=_Memo)
    _stats: _Memo = field(default_factory=_Memo)

    def __getstate__(self) -> dict[str, Any]:
        runs = self.stored_runs
        stored = (runs.directory, runs.read) if runs is not None else None
        hashes = (self.hashes.path, self.hashes.read, self.hashes.run)
        return {"project": self.project, "lock": self.lock, "hashes": hashes, "runs": stored}

    def __setstate__(self, state: dict[str, Any]) -> None:
        hashes = FileHashes.of_process(*state["hashes"])
        stored = state.get("runs")
        runs = RunCache(stored[0], hashes, state["project"], stored[1]) if stored is not None else None
        self.__init__(state["project"], state["lock"], hashes, stored_runs=runs)  # type: ignore[misc]

    def for_model(self, name: str) -> VerifyContext:
        """This context with a lock narrowed to one model (what a job ships), sharing the caches."""
        model = self.lock.model(name)
        narrowed = replaced(
            self.lock,
            models=[model] if model is not None else [],
            matrix=[cell for cell in self.lock.matrix if cell.model == name],
        )
        return dataclasses.replace(self, lock=narrowed)

    def tensors(self, pin: FilePin, where: str) -> TensorSet:
        """The arrays of a pinned `.npz`, read once."""
        from baseline.files.tensors import load_tensors

        return self._tensors.get(pin.path, lambda: load_tensors(self.project.pinned(pin, where)))

    def seed(self, model: str, backend: str, target: str | None, run: BackendRun) -> None:
        """Take `run` as this verification's run of `backend` on `target`: `baseline lock` judges
        the baseline it just measured without running (or converting) anything again."""
        self._runs.get((model, backend, target), lambda: run)

    def seed_tensors(self, pin: FilePin, arrays: TensorSet) -> None:
        """Take `arrays` as the content of `pin` (a file `baseline lock` has not written yet)."""
        self._tensors.get(pin.path, lambda: arrays)

    def run(self, model: ModelLock, backend: str, target: str | None) -> BackendRun:
        return self._runs.get(
            (model.name, backend, target), lambda: self._run_backend(model, backend, target)
        )

    def output_stats(self, model: ModelLock, backend: str, target: str | None) -> list[TensorStats]:
        """Statistics of a run's outputs and their parts (parts that no longer fit their output
        left out), as the drift gate compares them with the locked ones."""
        return self._stats_computing(model, backend, target).result()

    def _stats_computing(
        self, model: ModelLock, backend: str, target: str | None, outputs: TensorSet | None = None
    ) -> Future[list[TensorStats]]:
        """The statistics of a run, computed once: on a thread of their own for large outputs,
        here for small ones. `outputs`: the run's, when the run itself is still being stored."""

        def start() -> Future[list[TensorStats]]:
            produced = outputs if outputs is not None else self.run(model, backend, target).outputs
            if produced is not None and _worth_a_thread(produced):
                return _in_background(self._stats_of, model, backend, target)
            return _at_once(self._stats_of, model, backend, target)

        return self._stats.get((model.name, backend, target), start)

    def _stats_of(self, model: ModelLock, backend: str, target: str | None) -> list[TensorStats]:
        from baseline.tasks.parts import stats_with_parts  # numpy: only when outputs are judged

        outputs = self.run(model, backend, target).outputs
        assert outputs is not None, "statistics of a run without outputs"
        return stats_with_parts(model.parts, outputs, skip_unfit=True)

    def job(self, model: ModelLock, target: str | None, backend: str | None = None) -> BackendJob:
        """The backend request for `model` on `target`, with board inputs where `backend` reads them."""
        return self.job_on(model, model.target(target) if target is not None else None, backend)

    def job_on(
        self,
        model: ModelLock,
        target: TargetSpec | None,
        backend: str | None = None,
        *,
        targets: list[TargetSpec] | None = None,
    ) -> BackendJob:
        """The same for a target given whole, which the lock need not hold (`baseline explore`'s
        candidates: the locked model, fixtures and calibration on another setting); `targets`
        replace the model's where a candidate changes what is model-wide (a graph cut)."""
        name = target.name if target is not None else None
        return backend_job(
            model.name,
            self.project.pinned(model.onnx, f"models.{model.name}.onnx"),
            model.onnx,
            self._pinned_fixtures(model),
            target,
            model.toolkit,
            self._board_inputs(model, name) if backend is not None and _reads_board(backend) else None,
            targets=targets if targets is not None else model.targets,
            feeds=model.fixtures.feeds,
            calibration=self._calibration(model),
        )

    def _pinned_fixtures(self, model: ModelLock) -> TensorSet:
        """The fixtures a backend runs on, only if they are the file the lock pins: other inputs
        would be judged against references measured on the locked ones (and arrays of another
        type reached the toolkit as a worker traceback). `integrity` names the difference."""
        pin, where = model.fixtures, f"models.{model.name}.fixtures"
        path = self.project.pinned(pin, where)
        # a file not yet written (`lock` judging the baseline it measured) is `tensors`' to report
        if path.is_file() and self.hashes.sha256(path, pin.size) != pin.sha256:
            raise InputError(
                f"{where}: {pin.path} is not the file the lock pins (see integrity); no backend runs on "
                "it — run `baseline lock` if the new fixtures are intended"
            )
        return self.tensors(pin, where)

    def _calibration(self, model: ModelLock) -> list[Path] | None:
        if model.calibration is None:
            return None
        where = f"models.{model.name}.calibration"
        return [self.project.pinned(pin, where) for pin in model.calibration.files]

    def _board_inputs(self, model: ModelLock, target: str | None) -> BoardInputs | None:
        """What backends that run the shipped model need: the pinned .rknn and the capture folder."""
        conversion = model.conversion(target) if target is not None else None
        if conversion is None:
            return None
        where = f"models.{model.name}.conversions.{target}"
        return BoardInputs(
            artifact=self.project.pinned(conversion.artifact, where),
            fixtures_sha256=model.fixtures.sha256,
            capture_dir=capture_dir(self.project, self.lock, model.name, str(target)),
        )

    def analyse(self, model: ModelLock, backend: str, target: str | None) -> list[LayerError]:
        """Per-layer accuracy analysis, for backends that offer one (else empty)."""
        if not self.locate_divergence:
            return []
        analyse = getattr(get_backend(backend), "analyse", None)
        if analyse is None:
            return []
        job = self.job(model, target, backend)
        stored = self.stored_runs
        if stored is None:
            return list(analyse(job))
        key = stored.key(backend, job, model.onnx, calibration=model.calibration)
        return stored.kept_analysis_or_run(key, lambda: list(analyse(job)))

    def has_kept_run(self, model: ModelLock, backend: str, target: str | None) -> bool:
        """Whether the run of `backend` on `target` is kept for these inputs (`runcache`), so
        that re-judging it starts no backend: verify then starts no toolkit worker ahead."""
        stored = self.stored_runs
        if stored is None:
            return False
        try:
            job = self.job(model, target, backend)
        except BaselineError:
            return False  # the job itself reports it
        return stored.holds(stored.key(backend, job, model.onnx, calibration=model.calibration))

    def _stored_or_new(self, model: ModelLock, backend: str, job: BackendJob) -> BackendRun:
        """The run kept for these inputs (`runcache`), else a new one, then kept."""
        stored = self.stored_runs
        if stored is None:
            return get_backend(backend).run(job)
        key = stored.key(backend, job, model.onnx, calibration=model.calibration)
        return stored.kept_or_run(key, lambda: get_backend(backend).run(job), lambda _: True, job)

    def _run_backend(self, model: ModelLock, backend: str, target: str | None) -> BackendRun:
        try:
            run = self._stored_or_new(model, backend, self.job(model, target, backend))
        except EnvironmentBroken:
            raise  # not this model's fault: the run stops with one line
        except BaselineError as error:
            return BackendRun(outputs=None, error=str(error))
        outputs = run.outputs
        if outputs is not None and model.reference(backend, target) is not None and _worth_a_thread(outputs):
            # a locked reference: the drift gate will compare these outputs' statistics. They
            # are computed on another thread from now, beside the other gates' comparisons
            # (numpy releases the GIL: a 54 MB CNN's cold verify, ~0.01 s less)
            self._stats_computing(model, backend, target, outputs)
        return run


STATS_THREAD_BYTES = 256 * 1024
"""Outputs from this size get their statistics on a thread of their own (~2 ms of numpy for
256 KB of float32, 28 ms for 4 MB). Below it the statistics take less than starting and joining
a thread: 0.06 ms for a classifier's scores, against a thread per job that, with `--jobs 2` on
two cores, waited behind the other job's process (a 1,000-model zoo's cold verify measured
~10 % faster without it, with one job and with two)."""


def _worth_a_thread(outputs: TensorSet) -> bool:
    return sum(array.nbytes for array in outputs.values()) >= STATS_THREAD_BYTES


def _at_once(work: Callable[..., T], *args: Any) -> Future[T]:
    """`work(*args)` now, in this thread; its value, or its exception, in the future."""
    future: Future[T] = Future()
    try:
        future.set_result(work(*args))
    except Exception as error:  # raised again where the value is asked for, as from a thread
        future.set_exception(error)
    return future


def _in_background(work: Callable[..., T], *args: Any) -> Future[T]:
    """`work(*args)` on a thread of its own; its value, or its exception, in the future."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(work(*args))
        except BaseException as error:  # raised again where the value is asked for
            future.set_exception(error)

    threading.Thread(target=run, name="baseline-stats", daemon=True).start()
    return future


def _reads_board(backend: str) -> bool:
    caps = capabilities(backend)
    return caps.runs_pinned_artifact or caps.reads_captures
