"""Does onnxruntime's thread count change a model's outputs? One thread against the default.

    python bench/ort_threads.py [--max-bytes 120000000] [--corpus bench/.corpus]

`baseline.runtime.sessions` builds every golden-run session with one intra-op thread
(`INTRA_OP_THREADS`), where onnxruntime's default is a thread per core. This measures what that
default costs a lock's reproducibility: every ONNX file of the corpus up to `--max-bytes` runs
twice on the same seeded inputs (dynamic dimensions set to 2), with the default pool and with
one thread, and every output is compared bit for bit. Files onnxruntime cannot load or run are
counted as skipped. The last line is the result; results: bench/results/ort_threads.json.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "ort_threads.json"
NUMBERS = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


def session(path: Path, threads: int | None) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.use_deterministic_compute = True
    options.log_severity_level = 4
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads is not None:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def feeds(model: ort.InferenceSession) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    made = {}
    for given in model.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 2 for d in given.shape]
        dtype = NUMBERS[given.type]  # KeyError: strings, sequences -> skipped
        floating = np.issubdtype(dtype, np.floating)
        values = rng.standard_normal(shape) if floating else rng.integers(0, 2, shape)
        made[given.name] = np.asarray(values).astype(dtype)
    return made


def as_bytes(outputs: list[Any]) -> bytes:
    """Every output's exact bytes (sequences and maps pickled as they come)."""
    return pickle.dumps([o.tobytes() if isinstance(o, np.ndarray) else o for o in outputs])


def compare(path: Path) -> str:
    """`same`, `differ` or `skipped` (onnxruntime refused the file or the inputs)."""
    try:
        default, single = session(path, None), session(path, 1)
        given = feeds(default)
        first, second = default.run(None, given), single.run(None, given)
    except Exception:
        return "skipped"
    return "same" if as_bytes(first) == as_bytes(second) else "differ"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--max-bytes", type=int, default=120_000_000)
    parser.add_argument("--corpus", type=Path, default=HERE / ".corpus")
    parser.add_argument("--output", type=Path, default=RESULTS)
    arguments = parser.parse_args()
    started = time.perf_counter()
    files = [p for p in sorted(arguments.corpus.rglob("*.onnx")) if p.stat().st_size <= arguments.max_bytes]
    verdicts = {str(path.relative_to(arguments.corpus)): compare(path) for path in files}
    counts = {kind: sum(v == kind for v in verdicts.values()) for kind in ("same", "differ", "skipped")}
    differing = sorted(name for name, verdict in verdicts.items() if verdict == "differ")
    summary = {
        "max_bytes": arguments.max_bytes,
        "onnxruntime": ort.__version__,
        "counts": counts,
        "differ": differing,
        "seconds": time.perf_counter() - started,
    }
    arguments.output.parent.mkdir(parents=True, exist_ok=True)
    arguments.output.write_text(json.dumps(summary, indent=2) + "\n")
    for name in differing:
        print(f"differ: {name}")
    print(
        f"RESULT {len(files)} files up to {arguments.max_bytes} bytes, onnxruntime {ort.__version__}: "
        f"{counts['same']} the same bit for bit with one thread, {counts['differ']} differ, "
        f"{counts['skipped']} not runnable",
        file=sys.stdout,
    )


if __name__ == "__main__":
    main()
