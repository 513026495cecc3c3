"""One onnxruntime session per model file in this process (the ONNX helper), shared by the
static gate's probe and the golden run.

Building a session is most of either's time and memory: for a 54 MB CNN, two sessions (the
probe's, then the golden's) cost ~0.5 s and ~150 MB more than one (measured). The session
is keyed by the file's bytes (`file_key`), and only the last model's is kept: a model's jobs
run one after the other in a helper, and a session can take as much memory as the model.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from baseline.files.hashing import file_key

if TYPE_CHECKING:  # onnxruntime: imported only in the helper, when a session is made
    import onnxruntime as ort

_guard = threading.Lock()
_last: tuple[tuple[str, str], ort.InferenceSession] | None = None


def shared_session(path: Path) -> ort.InferenceSession:
    """The session for the file at `path`."""
    global _last
    key = (str(path.absolute()), file_key(path))
    with _guard:
        if _last is not None and _last[0] == key:
            return _last[1]
        _last = None  # free the previous model's session before building the next
        session = new_session(str(path))
        _last = (key, session)
        return session


def build_in_background(path: Path) -> None:
    """Start building the session for `path` on another thread. onnxruntime releases the GIL
    for most of a build, so the caller's own work (onnx's parse and shape inference of the same
    file) runs beside it: ~0.1 s off a 54 MB CNN's static check (measured). The next
    `shared_session(path)` waits for this build; if it failed, that call builds again and
    raises the error itself."""
    threading.Thread(target=_build_quietly, args=(path,), name=BUILDER, daemon=True).start()


BUILDER = "baseline-session-build"
"""The name of `build_in_background`'s threads."""


def session_building() -> bool:
    """Whether a session is being built now (by a hint's thread, or a caller)."""
    return _guard.locked()


def _build_quietly(path: Path) -> None:
    with contextlib.suppress(Exception):  # raised again by the caller's own `shared_session`
        shared_session(path)


def new_session(model: str | bytes) -> ort.InferenceSession:
    """A session as the golden run makes it: deterministic kernels, CPU, errors-only logging."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.use_deterministic_compute = True
    options.log_severity_level = 3  # errors only: warnings about unused initializers are noise
    # onnxruntime's threads otherwise spin after each run, waiting for the next: a verify
    # runs a model a few times, and the spinning took the core the caller then computes on
    # (measured: ~0.05 s of CPU less for a 54 MB CNN's probe and golden run, same wall time)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # the same bits on every machine: the thread count splits onnxruntime's reductions, so a
    # golden run otherwise depends on the cores of the machine that ran it (see INTRA_OP_THREADS)
    options.intra_op_num_threads = INTRA_OP_THREADS
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


INTRA_OP_THREADS = 1
"""One onnxruntime thread per session, whatever the machine. onnxruntime's default is a thread
per core, and the thread count changes outputs: of 1,972 corpus models run both ways
(`bench/ort_threads.py`), 4 differ between one thread and two: float models by 1e-6 to 1e-4
(reductions, ConvTranspose), text2tashkeel's dynamically quantized LSTM by 0.07. A lock taken on
an 8-core laptop and verified on a 2-core CI runner compared different arithmetic. It is also
faster where verify spends its time on many small models (a pool per session costs a 1 KB
classifier more than it saves: session build and two runs 0.63-0.66 -> 0.49-0.52 ms; with
`--jobs 2` on two cores a pool's second thread waits behind the other job); a large model's
golden run takes longer on a machine with idle cores (YOLOv8n at 1024x1024: 66-72 -> 114-117 ms
a run on 2 cores), small beside the toolkit's conversion, and `--jobs N` runs N models at once."""
