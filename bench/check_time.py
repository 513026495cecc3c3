"""How long `baseline check` takes on a ~500-node model (issue 17's budget: median under 100 ms).

    python bench/check_time.py [--runs 15]

Models: a generated 500-node CNN (125 blocks of Conv, BatchNormalization, Relu, Add) and the
real RapidOCR models shipped in `rapidocr-onnxruntime` (566 and 672 nodes; fetched by
`bench/corpora.py`). Each is checked once to warm the process up (the op table is parsed once
per process, onnxruntime imported once), then `--runs` times; median and minimum wall time and
median CPU time go to `bench/results/check-time.json`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from baseline.static_check import check_model

sys.path.insert(0, str(Path(__file__).parent))
from corpora import DEV_PYPI, pypi_models

RESULTS = Path(__file__).parent / "results"
BUDGET_SECONDS = 0.1


def cnn_500(path: Path, size: int, blocks: int = 125, channels: int = 16) -> Path:
    """`blocks` × (Conv 3x3, BatchNormalization, Relu, residual Add) on 1×16×size×size: 4 nodes
    each. The check runs the graph once in onnxruntime, so its time grows with the input size."""
    rng = np.random.default_rng(0)
    nodes, weights, x = [], [], "x"
    for i in range(blocks):
        w = (rng.standard_normal((channels, channels, 3, 3)) * 0.05).astype(np.float32)
        stats = [np.ones(channels, np.float32), np.zeros(channels, np.float32)] * 2
        weights += [numpy_helper.from_array(w, f"w{i}")]
        weights += [numpy_helper.from_array(a, f"bn{i}_{k}") for k, a in enumerate(stats)]
        nodes += [
            helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", [f"c{i}", *(f"bn{i}_{k}" for k in range(4))], [f"b{i}"]),
            helper.make_node("Relu", [f"b{i}"], [f"r{i}"]),
            helper.make_node("Add", [f"r{i}", x], [f"a{i}"]),
        ]
        x = f"a{i}"
    shape = [1, channels, size, size]
    graph = helper.make_graph(
        nodes,
        "cnn500",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)],
        weights,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def timed(path: Path, runs: int) -> dict[str, object]:
    report = check_model(path)  # warm-up
    seconds, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        check_model(path)
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return {
        "model": path.name,
        "nodes": report.nodes,
        "verdict": report.verdict,
        "median_ms": round(statistics.median(seconds) * 1000, 1),
        "min_ms": round(min(seconds) * 1000, 1),
        # CPU time of this process (onnxruntime's threads included): on a shared machine, wall
        # time measures the neighbours too
        "median_cpu_ms": round(statistics.median(cpu) * 1000, 1),
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        paths = [cnn_500(Path(scratch) / f"cnn500-{size}px.onnx", size) for size in (16, 64)]
        ocr = {"rapidocr-onnxruntime==1.4.4": DEV_PYPI["rapidocr-onnxruntime==1.4.4"]}
        paths += [i.path for i in pypi_models("dev", ocr) if "rec" not in i.name]
        rows = [timed(path, args.runs) for path in paths]
    for row in rows:
        met = "yes" if float(str(row["median_ms"])) < BUDGET_SECONDS * 1000 else "NO"
        timing = f"median {row['median_ms']} ms, min {row['min_ms']} ms, median CPU {row['median_cpu_ms']} ms"
        print(f"{row['model']}: {row['nodes']} nodes, {timing} ({met})")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "check-time.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
