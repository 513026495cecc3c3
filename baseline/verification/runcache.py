"""Backend runs by what they read, so that changing how results are judged converts nothing.

A run (a conversion and the simulator, or onnxruntime) is a function of the ONNX file and its
external data, the fixtures, the target's conversion settings and quantization, the calibration
images, the toolkit settings and environment, the host's versions and baseline's code. The key
hashes all of them and nothing else: tolerances, task thresholds, parts and `expect_fail` decide
how a run is judged, not what it measures, so an edit to them finds every run here and `lock`,
`verify`, `lock --check` and `accept` re-judge instead of converting again.

`slot` separates the two measurements `baseline lock` takes of each model (see `remeasure`): the
second is a run of its own, in new toolkit processes, and is kept as the second; a later lock of
the same inputs finds both. Kept: runs with outputs, and conversions the toolkit refused (what a
model marked `expect_fail` on `compilable` gives every time); not kept: a crash or a timeout (not
a result), a board's run (a device is not a file), a build's `.rknn` (a lock that needs those
bytes, with no pinned file of the same fingerprint, runs the conversion again).
The toolkit's per-layer accuracy analysis of a run (what the consistency gate asks when outputs
diverge, `VerifyContext.analyse`) reads the same inputs, so it is kept beside the run: a
tolerance edit on a model whose comparison fails, or is an expected failure, starts no toolkit
either.
Like the result cache, this trusts whoever can write the cache folder; `--no-cache` reads
nothing from it and still stores what it measures.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from baseline.backends import capabilities
from baseline.backends.base import BackendJob, BackendRun, BuildReport
from baseline.errors import BaselineError
from baseline.files.hashing import sha256_bytes
from baseline.models.lock import CalibrationPin, OnnxPin, RknnMetadata
from baseline.models.results import Diagnostic, LayerError
from baseline.project.layout import Project
from baseline.verification.cache import FileHashes, code_stamp, result_key, write_best_effort
from baseline.versions import host_toolchain

if TYPE_CHECKING:  # numpy: only when a run is kept or read, never in a cached verify
    from baseline.files.tensors import TensorSet

RUNS_FOLDER = "runs"
_DIAGNOSTICS = TypeAdapter(list[Diagnostic])
_LAYERS = TypeAdapter(list[LayerError])


@dataclass
class RunCache:
    directory: Path
    hashes: FileHashes
    project: Project
    """Resolves the lock's paths of a model's external data (confined to the project)."""
    read: bool = True
    """False for `--no-cache`: every lookup misses, fresh runs are still stored."""

    def key(
        self,
        backend: str,
        job: BackendJob,
        onnx: OnnxPin,
        slot: int = 1,
        calibration: CalibrationPin | None = None,
    ) -> str | None:
        """The run's key, or None for a run that is never kept (a board's). The files are read as
        they are, but only at the size their pins give (a sparse file can claim terabytes: a
        file of another size gets `size_mismatch(...)`, a miss, unread)."""
        caps = capabilities(backend)
        if caps.needs_board or caps.reads_captures or caps.runs_pinned_artifact:
            return None
        parts: dict[str, Any] = {
            "backend": backend,
            "slot": slot,
            "onnx": self.hashes.sha256(job.onnx_path, onnx.size),  # the file as it is, not as pinned
            "external data": [
                self.hashes.sha256(self.project.pinned(pin, "onnx.external"), pin.size)
                for pin in onnx.external or []
            ],
            "inputs": _arrays_digest(job.inputs),
            "outputs": job.output_names,
            "target": job.target.model_dump(mode="json") if job.target is not None else None,
            "toolkit": job.toolkit.model_dump(mode="json") if caps.uses_toolkit and job.toolkit else None,
            "environment": _environment(job) if caps.uses_toolkit else host_toolchain().model_dump(),
            "fixed_shapes": job.fixed_shapes,
            "feeds": [feed.model_dump(mode="json") for feed in job.feeds or []],
            "calibration": _calibration_digests(self.hashes, job.calibration or [], calibration),
            "cut": job.cut,
            "code": code_stamp(),
        }
        return result_key(parts)

    def kept_or_run(
        self,
        key: str | None,
        start: Callable[[], BackendRun],
        serves: Callable[[BackendRun], bool],
        job: BackendJob | None = None,
    ) -> BackendRun:
        """The run kept under `key` where it `serves`, else `start()`'s, then kept. A fresh
        conversion of `job` is also recorded for `baseline check` (`static_check.conversions`)."""
        kept = self.get(key)
        if kept is not None and serves(kept):
            return kept
        run = start()
        self.put(key, run)
        if job is not None and run.build is not None:
            from baseline.static_check.conversions import record_conversion

            record_conversion(self.directory.parent, job, run)  # the cache folder, as `check` finds it
        return run

    def kept_analysis_or_run(
        self, run_key: str | None, analyse: Callable[[], list[LayerError]]
    ) -> list[LayerError]:
        """The accuracy analysis kept for the run under `run_key`, else `analyse()`'s, then kept.
        An analysis that raises (the toolkit refused it) is not kept: it is not a result."""
        path = (
            None
            if run_key is None
            else self.directory / f"{result_key({'analysis of': run_key})}.layers.json"
        )
        if path is not None and self.read:
            try:
                return _LAYERS.validate_json(path.read_bytes())
            except (OSError, ValidationError):
                pass  # missing, truncated or from another version: a miss
        layers = analyse()
        if path is not None:
            write_best_effort(path, _LAYERS.dump_json(layers))
        return layers

    def holds(self, key: str | None) -> bool:
        """Whether a run is kept under `key`, without reading it: a guess for planning (which
        toolkit workers to start early), not a promise that `get` will answer."""
        return key is not None and self.read and (self.directory / f"{key}.json").is_file()

    def get(self, key: str | None) -> BackendRun | None:
        if key is None or not self.read:
            return None
        try:
            document = json.loads((self.directory / f"{key}.json").read_text())
            stored = document["outputs"]
            outputs = _load_tensors(self.directory / f"{key}.npz") if stored else None
            return _run_from(document, outputs)
        except (OSError, ValueError, KeyError, TypeError, ValidationError, BaselineError):
            return None  # missing, truncated or from another version: a miss

    def put(self, key: str | None, run: BackendRun) -> None:
        if key is None or not _keeps(run):
            return
        from baseline.files.tensors import npz_bytes

        if run.outputs is None or write_best_effort(self.directory / f"{key}.npz", npz_bytes(run.outputs)):
            write_best_effort(self.directory / f"{key}.json", json.dumps(_document(run)).encode())


def _keeps(run: BackendRun) -> bool:
    """Outputs, or a conversion the toolkit refused: results. Not a crash, a timeout, or an
    error around the run (a missing file, a refused feed), which the next run may not repeat."""
    if run.build is not None and run.build.crashed:
        return False
    return run.outputs is not None or (run.build is not None and not run.build.compiled)


def _calibration_digests(hashes: FileHashes, paths: list[Path], pin: CalibrationPin | None) -> list[str]:
    sizes = [file.size for file in pin.files] if pin is not None and len(pin.files) == len(paths) else []
    return [hashes.sha256(path, sizes[i] if sizes else None) for i, path in enumerate(paths)]


def _arrays_digest(arrays: TensorSet) -> str:
    return result_key(
        {name: [str(a.dtype), list(a.shape), sha256_bytes(a.tobytes())] for name, a in arrays.items()}
    )


def _environment(job: BackendJob) -> Any:
    from baseline.toolchain.provision import find_toolchain

    version = job.toolkit.version if job.toolkit is not None else None
    toolchain = find_toolchain(version) if version is not None else None
    return toolchain.packages if toolchain is not None else None


def _document(run: BackendRun) -> dict[str, Any]:
    build = run.build
    return {
        "outputs": run.outputs is not None,
        "error": run.error,
        "versions": run.versions,
        "build": None
        if build is None
        else {
            "compiled": build.compiled,
            "stage": build.stage,
            "error": build.error,
            "diagnostics": [d.model_dump(mode="json") for d in build.diagnostics],
            "log_tail": build.log_tail,
            "seconds": build.seconds,
            "metadata": build.metadata.model_dump(mode="json") if build.metadata is not None else None,
        },
    }


def _run_from(document: dict[str, Any], outputs: TensorSet | None) -> BackendRun:
    build = document["build"]
    report = None
    if build is not None:
        metadata = build["metadata"]
        report = BuildReport(
            compiled=bool(build["compiled"]),
            stage=str(build["stage"]),
            error=build["error"],
            diagnostics=_DIAGNOSTICS.validate_python(build["diagnostics"]),
            log_tail=[str(line) for line in build["log_tail"]],
            seconds={str(k): float(v) for k, v in build["seconds"].items()},
            artifact=None,  # not kept: see the module docstring
            metadata=RknnMetadata.model_validate(metadata) if metadata is not None else None,
        )
    versions = {str(k): str(v) for k, v in document["versions"].items()}
    return BackendRun(outputs=outputs, error=document["error"], build=report, versions=versions)


def _load_tensors(path: Path) -> TensorSet:
    """A kept run's outputs, read as every tensor file is: sizes and members bounded first."""
    from baseline.files.tensors import load_tensors

    return load_tensors(path)
