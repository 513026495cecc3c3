"""Performance benchmarks, each measured beside a peer or the machine's limit in the same run.

    python bench/performance.py [--quick]     # writes bench/results/performance.json

1. Comparing a model's outputs with stored references on the same fixtures, vs Polygraphy's
   Comparator (onnxruntime runner + compare_accuracy), in one process, N repetitions.
2. Hashing a 1 GiB artifact, vs `hashlib.file_digest` (the limit here); and the warm path,
   where (size, mtime, inode) say the file is unchanged.
3. A fully cached `baseline verify` of a 20-model lock, vs the same verify cold (`--no-cache`).
4. The compilable + consistency work (convert and simulate every demo model) through baseline's
   worker, vs a bare toolkit script doing the same conversions and simulations in one process.
5. `--jobs 2` vs `--jobs 1` on the cold 20-model verify (2 cores), once jobs have been timed
   (they start longest first), and on a first run when no job has been timed yet.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).parent
REPO = HERE.parent
DEMO = REPO / "fixtures" / "demo"


def best_of(repeat: int, action: Callable[[], object]) -> float:
    """The fastest of `repeat` runs: the least disturbed measurement of the same work."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def row(
    name: str, ours: float, peer: float, peer_name: str, target: str, met: bool | None, **extra: Any
) -> dict:
    """One result; `met` is None for a row without a target (shown for context)."""
    return {
        "benchmark": name,
        "baseline_s": round(ours, 4),
        "peer": peer_name,
        "peer_s": round(peer, 4),
        "ratio": round(ours / peer, 3) if peer else None,
        "target": target,
        "met": met,
        **extra,
    }


def tensors(model: str, stem: str) -> dict[str, np.ndarray]:
    from baseline.tensors import load_tensors

    [path] = (DEMO / "tensors" / model).glob(f"{stem}.[0-9a-f]*.npz")
    return load_tensors(path)


def bench_compare_vs_polygraphy(repeat: int) -> dict:
    from baseline.backends import BackendJob, get_backend
    from baseline.compare import compare_tensors

    model = DEMO / "detector.onnx"
    inputs, golden = tensors("detector", "inputs"), tensors("detector", "outputs.onnxruntime")
    backend = get_backend("onnxruntime")

    def ours() -> None:
        job = BackendJob(model="detector", onnx_path=model, inputs=inputs, output_names=list(golden))
        run = backend.run(job)
        assert run.outputs is not None
        assert all(compare_tensors(n, run.outputs[n], golden[n], 1e-5, 1e-5).mismatches == 0 for n in golden)

    from polygraphy.backend.onnxrt import OnnxrtRunner, SessionFromOnnx
    from polygraphy.logger import G_LOGGER

    G_LOGGER.module_severity = G_LOGGER.ERROR  # its per-iteration report would dominate the timing
    from polygraphy.comparator import Comparator, IterationResult, SimpleCompareFunc

    feeds = [
        {name: array[i] for name, array in inputs.items()} for i in range(len(next(iter(inputs.values()))))
    ]
    reference = (
        "reference",
        [
            IterationResult({n: golden[n][i] for n in golden}, runner_name="reference")
            for i in range(len(feeds))
        ],
    )

    def peer() -> None:
        runner = OnnxrtRunner(SessionFromOnnx(str(model)))
        results = Comparator.run([runner], data_loader=feeds)
        results.append(reference)
        assert Comparator.compare_accuracy(results, compare_func=SimpleCompareFunc(atol=1e-5, rtol=1e-5))

    ours(), peer()  # warm both: imports and first session
    mine, theirs = best_of(repeat, ours), best_of(repeat, peer)
    return row(
        "compare outputs with stored references (detector, 2 samples)",
        mine,
        theirs,
        "Polygraphy Comparator",
        "≤ 0.8×",
        mine <= 0.8 * theirs,
    )


def bench_hashing(size: int) -> list[dict]:
    from baseline.cache import FileHashes
    from baseline.hashing import sha256_file

    folder = Path(tempfile.mkdtemp(prefix="baseline-hash-"))
    big = folder / "artifact.bin"
    with big.open("wb") as stream:
        chunk = os.urandom(1 << 20)
        for _ in range(size >> 20):
            stream.write(chunk)
    try:
        sha256_file(big)  # warm the page cache for both
        limit = best_of(3, lambda: hashlib.file_digest(big.open("rb"), "sha256"))
        mine = best_of(3, lambda: sha256_file(big))
        hashes = FileHashes(folder / "hashes.json")
        hashes.sha256(big)
        hashes.save()
        warm = best_of(3, lambda: FileHashes(folder / "hashes.json").sha256(big))
    finally:
        shutil.rmtree(folder)
    gib = size / (1 << 30)
    return [
        row(
            f"hash a {gib:g} GiB artifact",
            mine,
            limit,
            "hashlib.file_digest",
            "≥ 0.95× throughput",
            limit / mine >= 0.95,
            throughput_gib_s=round(gib / mine, 2),
        ),
        row(
            f"re-check the unchanged {gib:g} GiB artifact",
            warm,
            limit,
            "hashlib.file_digest",
            "(no target)",
            True,
        ),
    ]


def zoo_project(sources: list[Path]) -> Path:
    """A locked project with one model per source ONNX file (each copied under its own name)."""
    root = Path(tempfile.mkdtemp(prefix="baseline-zoo-"))
    (root / "pyproject.toml").write_text("[project]\nname = 'zoo'\n")
    (root / "models").mkdir()
    entries = []
    for index, source in enumerate(sources):
        name = f"m{index:02d}-{source.stem.replace('_', '-')}"
        shutil.copyfile(source, root / "models" / f"{name}.onnx")
        entries.append(f'[[models]]\nname = "{name}"\nonnx = "models/{name}.onnx"\n')
    (root / "zoo.toml").write_text(
        '[defaults]\ntargets = ["rk3588"]\nbackends = ["onnxruntime", "rknn-sim"]\n'
        "fixtures = { samples = 1 }\n\n" + "\n".join(entries)
    )
    baseline(root, "lock", "--lock", "zoo.lock")
    return root


def tiny_zoo(count: int) -> list[Path]:
    """Retrained variants of the demo classifier: ~0.1 s per conversion, fixed costs dominate."""
    folder = Path(tempfile.mkdtemp(prefix="baseline-tiny-"))
    for index in range(count):
        subprocess.run(
            [
                sys.executable,
                str(REPO / "fixtures" / "make_models.py"),
                "--out",
                str(folder / str(index)),
                "--perturb",
                f"{0.001 * (index + 1):.3f}",
                "classifier",
            ],
            check=True,
            capture_output=True,
        )
    return [folder / str(index) / "classifier.onnx" for index in range(count)]


def real_cnn_zoo(count: int) -> list[Path]:
    """The real CNN architectures shipped in the onnx package (ResNet-50, DenseNet-121, Inception-v2,
    ShuffleNet, ZFNet-512; 2-10 s per conversion and simulation), repeated to `count` models."""
    import onnx

    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    names = [
        "light_resnet50",
        "light_densenet121",
        "light_inception_v2",
        "light_shufflenet",
        "light_zfnet512",
    ]
    return [folder / f"{names[index % len(names)]}.onnx" for index in range(count)]


def baseline(root: Path, *args: str) -> float:
    """Time one CLI run; a failing gate (exit 1) is a result like any other, bad input (2) is not."""
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "baseline", *args], cwd=root, capture_output=True, text=True)
    if run.returncode not in (0, 1):
        raise RuntimeError(f"baseline {' '.join(args)} failed: {run.stderr.strip()}")
    return time.perf_counter() - start


def bench_zoo(label: str, sources: list[Path]) -> list[dict]:
    root = zoo_project(sources)
    lock = ("--lock", "zoo.lock")
    try:
        times = root / ".baseline-cache" / "job-times.json"
        times.unlink(missing_ok=True)  # as in a fresh clone: no job has been timed yet
        first = baseline(root, "verify", *lock, "--no-cache", "--jobs", "2")
        cold = min(baseline(root, "verify", *lock, "--no-cache") for _ in range(2))
        parallel = min(baseline(root, "verify", *lock, "--no-cache", "--jobs", "2") for _ in range(2))
        baseline(root, "verify", *lock)  # fills the cache
        cached = min(baseline(root, "verify", *lock) for _ in range(3))
    finally:
        shutil.rmtree(root)
    count = len(sources)
    return [
        row(
            f"cached verify of a {count}-model lock ({label})",
            cached,
            cold,
            "the same verify, cold",
            "< 1 s and ≥ 20×",
            cached < 1.0 and cold / cached >= 20,
            speedup=round(cold / cached, 1),
        ),
        row(
            f"--jobs 2 vs --jobs 1, cold {count}-model verify ({label})",
            parallel,
            cold,
            "--jobs 1",
            "≥ 1.7× speed-up",
            cold / parallel >= 1.7,
            speedup=round(cold / parallel, 2),
        ),
        row(
            f"--jobs 2 vs --jobs 1, cold {count}-model verify ({label}), first run: no job durations known",
            first,
            cold,
            "--jobs 1",
            "none (context: longest-first needs one timed run)",
            None,
            speedup=round(cold / first, 2),
        ),
    ]


BARE_SCRIPT = """
import sys, json, numpy as np
from rknn.api import RKNN
for onnx_path, inputs_path in json.loads(sys.argv[1]):
    rknn = RKNN(verbose=False)
    rknn.config(target_platform="rk3588")
    assert rknn.load_onnx(model=onnx_path) == 0
    try:
        built = rknn.build(do_quantization=False) == 0
    except ValueError:  # the toolkit raises for graphs it refuses (nms_head)
        built = False
    if not built:
        rknn.release(); continue
    rknn.export_rknn("/tmp/bare.rknn")
    rknn.init_runtime()
    with np.load(inputs_path) as data:
        arrays = [data[k] for k in data.files]
    for i in range(arrays[0].shape[0]):
        rknn.inference(inputs=[a[i] for a in arrays], data_format=["nchw"] * len(arrays))
    rknn.release()
"""


def bench_toolkit_overhead() -> dict:
    from baseline.toolchain.provision import DEFAULT_VERSION, ensure_toolchain

    toolchain = ensure_toolchain(DEFAULT_VERSION)
    models = ["classifier", "detector", "nms_head", "overflow"]
    pairs = [
        [str(DEMO / f"{m}.onnx"), str(next((DEMO / "tensors" / m).glob("inputs.*.npz")))] for m in models
    ]
    env = {**os.environ, "TQDM_DISABLE": "1"}

    def bare() -> None:
        subprocess.run(
            [str(toolchain.python), "-c", BARE_SCRIPT, json.dumps(pairs)],
            check=True,
            capture_output=True,
            env=env,
            cwd=tempfile.gettempdir(),
        )

    def ours() -> None:
        subprocess.run(
            [sys.executable, "-c", OURS_SCRIPT, json.dumps(pairs)], check=True, capture_output=True
        )

    bare(), ours()
    mine, theirs = best_of(3, ours), best_of(3, bare)
    return row(
        "convert + simulate the 4 demo models (rk3588 fp16)",
        mine,
        theirs,
        "bare toolkit script",
        "≤ 1.2×",
        mine <= 1.2 * theirs,
    )


OURS_SCRIPT = """
import sys, json
from pathlib import Path
from baseline.backends import BackendJob, get_backend
from baseline.models.intent import TargetSpec, ToolkitSettings
from baseline.tensors import load_tensors
backend = get_backend("rknn-sim")
for onnx_path, inputs_path in json.loads(sys.argv[1]):
    inputs = load_tensors(Path(inputs_path))
    target = TargetSpec(name="rk3588", platform="rk3588")
    job = BackendJob(model=Path(onnx_path).stem, onnx_path=Path(onnx_path), inputs=inputs,
                     output_names=[], target=target, toolkit=ToolkitSettings())
    backend.run(job)
"""


MET = {True: "yes", False: "**no**", None: "—"}


def markdown(rows: list[dict]) -> str:
    lines = ["| benchmark | baseline | peer / limit | ratio | target | met |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['benchmark']} | {r['baseline_s']:.3f} s | {r['peer']}: {r['peer_s']:.3f} s | "
            f"{r['ratio']}× | {r['target']} | {MET[r['met']]} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller file and zoo, for a smoke run")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "performance.json")
    args = parser.parse_args()
    rows = [bench_compare_vs_polygraphy(repeat=20)]
    rows += bench_hashing(size=(64 if args.quick else 1024) << 20)
    count = 4 if args.quick else 20
    rows += bench_zoo("real CNNs", real_cnn_zoo(count))
    rows += bench_zoo("tiny classifiers", tiny_zoo(count))
    rows.append(bench_toolkit_overhead())
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=2) + "\n")
    print(markdown(rows))


if __name__ == "__main__":
    main()
