"""Measure which ONNX operators RKNN-Toolkit2 compiles, per target, with the real toolkit.

    python scripts/measure_op_support.py [--toolkit 2.5.0] [--targets rk3588,rk3566,rv1106]
                                         [--limit N] [--only REGEX] [--out PATH]

Every single-operator model in ONNX's own node tests (skipping the `_expanded` function
variants), plus a few generated models of common NPU ops with constant weights, is loaded,
built and exported for each target through baseline's toolkit worker (no simulation, no
board). The outcome of every build is kept, and aggregated per op type and target into
`baseline/data/op_support/rknn-toolkit2-<version>.json`, which `baseline.static_check` reads:

    ops[op_type][target] = {"status": "supported" | "partial" | "unsupported" | ..., ...}

Test models make every operand a graph input, although in exported models weights, shapes,
axes and sizes are constants. When such a build fails, the model is built again with every
input but the first frozen into an initializer (from the test's own data); an op that only
compiles that way is counted as compiled and marked in `compiled_with_constant_inputs`.
Targets that cannot build without quantization (measured: the toolkit refuses
`do_quantization=False` for rv1106) are built w8a8, calibrated on the test's own inputs.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shlex
import sys
import tempfile
import threading
import time
from pathlib import Path

import onnx

from baseline.toolchain.client import ToolkitWorker
from baseline.toolchain.provision import ensure_toolchain

sys.path.insert(0, str(Path(__file__).resolve().parent))  # op_support/, beside this script
from op_support.build import Build, Builder, Progress, probe_target, run_target
from op_support.cases import collect_node_tests, generated_models
from op_support.common import (
    COMPILES,
    DEFAULT_TARGETS,
    DEFAULT_TOOLKIT,
    MAX_IR,
    MAX_OPSET,
    REPO,
    REQUEST_TIMEOUT,
    SCHEMA,
    OpModel,
    main_opset,
)
from op_support.prepare import prepare
from op_support.table import aggregate, annotate_inputs, findings, model_records, print_summary, write_json

__all__ = ["COMPILES", "MAX_IR", "MAX_OPSET", "REPO", "collect_node_tests", "main", "main_opset", "prepare"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--toolkit", default=DEFAULT_TOOLKIT, help="RKNN-Toolkit2 version (default 2.5.0)")
    parser.add_argument("--targets", default=",".join(DEFAULT_TARGETS), help="comma-separated platforms")
    parser.add_argument("--limit", type=int, default=None, help="measure only the first N models")
    parser.add_argument("--only", default=None, help="measure only models whose name matches this regex")
    parser.add_argument("--out", type=Path, default=None, help="output JSON (default: the data directory)")
    parser.add_argument(
        "--annotate-inputs",
        action="store_true",
        help="only add dynamic input positions to the existing table",
    )
    parser.add_argument("--scratch", type=Path, default=None, help="scratch directory (default: a temp dir)")
    return parser.parse_args(argv)


def select_models(args: argparse.Namespace) -> tuple[list[OpModel], str]:
    models, source = collect_node_tests()
    models = [*models, *generated_models()]
    if args.only:
        models = [m for m in models if re.search(args.only, m.name)]
    return (models[: args.limit] if args.limit else models), source


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.monotonic()
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    out = args.out or REPO / "baseline" / "data" / "op_support" / f"rknn-toolkit2-{args.toolkit}.json"
    if args.annotate_inputs:
        annotate_inputs(out)
        return 0
    models, source = select_models(args)
    print(f"{len(models)} models from {source} and generated; targets {', '.join(targets)}", flush=True)
    scratch_context = (
        contextlib.nullcontext(str(args.scratch)) if args.scratch else tempfile.TemporaryDirectory()
    )
    with scratch_context as scratch_name:
        scratch = Path(scratch_name)
        scratch.mkdir(parents=True, exist_ok=True)
        prepared = [prepare(m, scratch / "models" / f"{i:05d}") for i, m in enumerate(models)]
        toolchain = ensure_toolchain(args.toolkit)
        workers = {t: ToolkitWorker(toolchain) for t in targets}
        try:
            settings = {t: probe_target(workers[t], t, scratch) for t in targets}
            results: dict[str, dict[str, list[Build]]] = {t: {} for t in targets}
            progress = Progress(len(prepared))
            threads = [
                threading.Thread(
                    target=run_target,
                    args=(Builder(workers[t], settings[t], scratch), prepared, results[t], progress),
                )
                for t in targets
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            versions = next(iter(workers.values())).versions
        finally:
            for worker in workers.values():
                worker.close()
    ops = aggregate(prepared, results, targets)
    data = {
        "schema": SCHEMA,
        "generated": {
            "toolkit": args.toolkit,
            "toolkit_commit": versions.get("rknn-toolkit2-commit", ""),
            "toolkit_onnx": versions.get("onnx", ""),
            "onnx": onnx.__version__,
            "node_tests": source,
            "targets": {
                t: {
                    "quantization": s.quantization["dtype"] if s.quantization else "fp16",
                    "note": s.note,
                    "common_warnings": s.common_warnings,
                }
                for t, s in settings.items()
            },
            "request_timeout_seconds": REQUEST_TIMEOUT,
            "command": shlex.join(["python", "scripts/measure_op_support.py", *sys.argv[1:]]),
        },
        "findings": findings(ops, targets),
        "ops": ops,
        "models": model_records(prepared, results, targets),
    }
    write_json(out, data)
    print(f"wrote {out} ({out.stat().st_size // 1024} KiB)")
    print_summary(ops, targets, time.monotonic() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
