"""`baseline lock --calibrate`: measure the intent several times, judge every measurement by its
own gates (`baseline.locker.selfcheck`), and write the first as the lock with the calibration the spread
between them proposes."""

from __future__ import annotations

from baseline.executors import ExecutorOptions
from baseline.locker.files import PendingFiles
from baseline.locker.project import LockOutcome, build_lock, write_checked
from baseline.locker.remeasure import pin_what_varies
from baseline.locker.selfcheck import Measurement, against_first, calibrate, self_check
from baseline.models.calibration import Calibration
from baseline.models.lock import Lock, ModelLock
from baseline.project.layout import Project
from baseline.toolchain.provision import Progress


def calibrate_project(
    project: Project,
    runs: int,
    margin: float,
    progress: Progress | None = None,
    options: ExecutorOptions | None = None,
) -> tuple[LockOutcome, Calibration]:
    """Measure the intent `runs` times (each run reconverts every target), write the first
    measurement as the lock with the calibration as its provenance, and return the calibration.

    The intent's rules are left alone: `verify` recomputes them from the intent, so the proposed
    values take effect only once a reviewer puts them there (see
    `baseline.locker.selfcheck.proposed_intent`)."""
    with project.exclusive():
        measured = [_measure(project, progress, options, first=run == 0) for run in range(runs)]
        checks = [self_check(project, lock, pending.files) for lock, pending in measured]
        lock, pending = measured[0]
        first: Measurement = (lock, pending.files)
        spread = [against_first(project, first, (later, files.files)) for later, files in measured[1:]]
        samples = {model.name: model.fixtures.samples for model in lock.models}
        calibration = calibrate(lock, [check.results for check in checks], samples, margin, spread)
        lock = lock.model_copy(update={"calibration": calibration, "models": _pinned(project, measured)})
        outcome = write_checked(project, lock, pending)
    return outcome, calibration


def _measure(
    project: Project, progress: Progress | None, options: ExecutorOptions | None, first: bool
) -> tuple[Lock, PendingFiles]:
    """One measurement; a later one in new toolkit processes (some builds differ only between
    processes, see `rknn_sim.fresh_workers`)."""
    from baseline.backends.rknn_sim import fresh_workers

    if not first:
        fresh_workers()
    return build_lock(project, progress, options)


def _pinned(project: Project, measured: list[tuple[Lock, PendingFiles]]) -> list[ModelLock]:
    """The first measurement's models with what varied between it and the second pinned, as a
    plain `baseline lock` pins it (see `baseline.locker.remeasure`)."""
    (first, first_files), *later = measured
    if not later:
        return first.models
    second, second_files = later[0]
    return pin_what_varies(project, (first, first_files.files), (second, second_files.files))
