"""`baseline lock`: turn the intent into a lock by measuring everything it names.

Each model is one job (`model.lock_model`), run by an executor (threads, or Ray); a job writes
nothing and returns its lock entry with the bytes of its new files (`files.PendingFiles`). Files
are written only once every model succeeded, tensors before the lock (`project`), so a failure
never leaves a lock pointing at tensors it did not produce. `measure` is one backend run;
`calibrate` is `lock --calibrate`. The new baseline is judged by `baseline.locker.selfcheck`, below.
"""

from baseline.locker.calibrate import calibrate_project
from baseline.locker.files import PendingFiles, pin_file, pin_onnx
from baseline.locker.project import (
    LockOutcome,
    build_lock,
    lock_project,
    stale_files,
    write_checked,
    write_new_lock,
)

__all__ = [
    "LockOutcome",
    "PendingFiles",
    "build_lock",
    "calibrate_project",
    "lock_project",
    "pin_file",
    "pin_onnx",
    "stale_files",
    "write_checked",
    "write_new_lock",
]
