"""The zoo benchmark: what each command costs as a generated zoo grows (bench/zoo.py models).

    python bench/zoo_bench.py [--sizes 10,100,1000] [--toolkit-sizes 10,100] [--repeat 7]
    python bench/zoo_bench.py --sizes 1000 --toolkit-sizes "" --cached-only   # the 1 s rows

For each size N: `lock --jobs 2` from scratch, a cold `verify --jobs 2`, a cached `verify`,
`verify` after changing one model, `lock --check` (after the change, and with nothing changed),
a relock after changing one model and `diff` of the two locks. Every command is a whole-process
run of `measure.py`: its CPU counts every process it waited for (toolkit workers, the ONNX
helper), its memory is the peak of the summed RSS of its process tree (the largest single
process beside it), and a process it left running fails the benchmark. Each run is checked
(exit code and expected output). Cached steps are the median of `--repeat` runs with their
range. Beside them, interleaved with the cached runs: the floor (`python -c "import baseline"`)
and, when `uv` is installed, `uv lock --check --offline` on a workspace of 1,000 local packages.

Zoos of `--sizes` run on onnxruntime only; those of `--toolkit-sizes` also convert and simulate
with the real toolkit (fp16 rk3588). Results: bench/results/zoo.json and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zoo
from measure import measure as measure_run

RESULTS = Path(__file__).resolve().parent / "results" / "zoo.json"
LOCK = "zoo.lock"

Check = Callable[[int, str], bool]


def measure(root: Path, command: list[str], check: Check, what: str) -> dict[str, Any]:
    """One whole-process run (`measure.py`): CPU of the command and every process it waited for,
    memory the peak of the summed RSS of its process tree; a process left running, or an
    unexpected result, fails the benchmark."""
    run = measure_run(command, root, codes=(0, 1, 2))
    if not check(run.code, run.stdout):
        raise RuntimeError(f"{what}: unexpected result (exit {run.code}):\n{run.stdout[-2000:]}")
    return {
        "seconds": run.wall_s,
        "cpu_s": run.cpu_s,
        "peak_mb": run.tree_peak_mb,
        "largest_process_mb": run.largest_mb,
        "processes": run.processes,
    }


def baseline(*args: str) -> list[str]:
    return [sys.executable, "-m", "baseline", *args, "--lock", LOCK]


def exits(code: int, text: str = "") -> Check:
    return lambda got, out: got == code and text in out


def only_model_fails(name: str) -> Check:
    def check(code: int, out: str) -> bool:
        failing = {line.split()[1] for line in out.splitlines() if line.startswith("FAIL ")}
        return code == 1 and failing == {name}

    return check


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each number's median, and the range of the wall times (a wide one: a busy machine)."""
    medians = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    seconds = [run["seconds"] for run in runs]
    return medians | {"runs": len(runs), "seconds_min": min(seconds), "seconds_max": max(seconds)}


def bench_size(
    count: int, toolkit: bool, repeat: int, uv_project: Path | None, cached_only: bool = False
) -> list[dict[str, Any]]:
    root = zoo.make_zoo(Path(tempfile.mkdtemp(prefix="baseline-zoo-")), count, toolkit)
    changed = zoo.model_name(0)
    rows: list[dict[str, Any]] = []

    def row(step: str, measured: dict[str, Any]) -> None:
        backends = "onnxruntime + rknn-sim" if toolkit else "onnxruntime"
        # the floor and the peer do not grow with the zoo: no per-model figure
        per_model_ms = None if step.startswith(("floor", "peer")) else measured["seconds"] / count * 1000
        rows.append(
            {"models": count, "backends": backends, "step": step, **measured, "per_model_ms": per_model_ms}
        )
        print(f"  {count:5d} {backends:24s} {step:44s} {measured['seconds']:8.2f} s", flush=True)

    try:
        row(
            "lock --jobs 2 (no lock yet)",
            measure(root, baseline("lock", "--jobs", "2"), exits(0, "written"), "lock"),
        )
        cold = baseline("verify", "--jobs", "2", "--no-cache")
        row("verify --jobs 2, cold", measure(root, cold, exits(0, "PASSED"), "cold verify"))
        peers: dict[str, list[dict[str, Any]]] = {"floor": [], "verify": [], "uv": []}
        for _ in range(repeat):  # interleaved: the same machine load for all three
            peers["floor"].append(measure(root, [sys.executable, "-c", "import baseline"], exits(0), "floor"))
            peers["verify"].append(measure(root, baseline("verify"), exits(0, "PASSED"), "cached verify"))
            if uv_project is not None:
                uv = ["uv", "lock", "--check", "--offline"]
                peers["uv"].append(measure(uv_project, uv, exits(0), "uv lock --check"))
        row("verify, cached (median)", median_of(peers["verify"]))
        row("floor: python -c 'import baseline' (median)", median_of(peers["floor"]))
        if peers["uv"]:
            row("peer: uv lock --check, 1,000 packages (median)", median_of(peers["uv"]))
        if cached_only:
            checks = [
                measure(root, baseline("lock", "--check"), exits(0, "up to date"), "check")
                for _ in range(repeat)
            ]
            row("lock --check, nothing changed (median)", median_of(checks))
            return rows
        zoo.retrain(root, 0)
        row(
            "verify after changing one model",
            measure(root, baseline("verify"), only_model_fails(changed), "verify"),
        )
        changed_check = exits(1, f"{changed}: onnx.sha256")
        changed_runs = [
            measure(root, baseline("lock", "--check"), changed_check, "check") for _ in range(repeat)
        ]
        row("lock --check, one model changed (median)", median_of(changed_runs))
        zoo.retrain(root, 0, perturb=0.0)  # the original bytes again
        checks = [
            measure(root, baseline("lock", "--check"), exits(0, "up to date"), "check") for _ in range(repeat)
        ]
        row("lock --check, nothing changed (median)", median_of(checks))
        if count <= 100:
            real = baseline("lock", "--check", "--no-cache")
            row(
                "lock --check --no-cache (measures again)",
                measure(root, real, exits(0, "up to date"), "real check"),
            )
        shutil.copyfile(root / LOCK, root / "before.lock")
        zoo.retrain(root, 0)
        row(
            "lock after changing one model",
            measure(root, baseline("lock", "--jobs", "2"), exits(0, "written"), "relock"),
        )
        diff = [sys.executable, "-m", "baseline", "diff", "before.lock", LOCK]
        row("diff", measure(root, diff, exits(0, f"{changed}: onnx.sha256"), "diff"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def uv_workspace(count: int) -> Path | None:
    """A uv workspace of `count` local packages, each depending on the previous, locked offline."""
    if shutil.which("uv") is None:
        return None
    root = Path(tempfile.mkdtemp(prefix="baseline-uv-"))
    members = [f"pkg{index:04d}" for index in range(count)]
    for index, name in enumerate(members):
        folder = root / "packages" / name
        (folder / "src" / name).mkdir(parents=True)
        (folder / "src" / name / "__init__.py").write_text("")
        needs = f'"{members[index - 1]}"' if index else ""
        sources = f"[tool.uv.sources]\n{members[index - 1]} = {{ workspace = true }}\n" if index else ""
        (folder / "pyproject.toml").write_text(
            f'[project]\nname = "{name}"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
            f'dependencies = [{needs}]\n\n[build-system]\nrequires = ["uv_build"]\n'
            f'build-backend = "uv_build"\n\n{sources}'
        )
    (root / "pyproject.toml").write_text(
        '[project]\nname = "workspace"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n\n'
        '[tool.uv.workspace]\nmembers = ["packages/*"]\n'
    )
    subprocess.run(["uv", "lock", "--offline"], cwd=root, check=True, capture_output=True)
    return root


def markdown(rows: list[dict[str, Any]]) -> str:
    """Steps down, zoo sizes across; each cell: total seconds (ms per model) and peak MB."""
    columns = sorted({(row["backends"], row["models"]) for row in rows}, key=lambda c: (c[0], c[1]))
    steps = list(dict.fromkeys(row["step"] for row in rows))
    cells = {(row["step"], row["backends"], row["models"]): row for row in rows}
    header = "| step | " + " | ".join(f"{n} models, {b}" for b, n in columns) + " |"
    lines = [header, "|---|" + "---|" * len(columns)]
    for step in steps:
        values = []
        for backends, count in columns:
            found = cells.get((step, backends, count))
            values.append(
                f"{found['seconds']:.2f} s ({_per_model(found)}{found['peak_mb']:.0f} MB)" if found else "—"
            )
        lines.append(f"| {step} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def _per_model(row: dict[str, Any]) -> str:
    return f"{row['per_model_ms']:.1f} ms/model, " if row["per_model_ms"] is not None else ""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10,100,1000", help="zoo sizes on onnxruntime only")
    parser.add_argument("--toolkit-sizes", default="10,100", help="zoo sizes also converted and simulated")
    parser.add_argument("--repeat", type=int, default=7, help="runs of each cached step (median)")
    parser.add_argument("--output", type=Path, default=RESULTS, help="where the JSON results go")
    parser.add_argument(
        "--cached-only",
        action="store_true",
        help="after the lock and a cold verify, only the cached verify and unchanged lock --check rows",
    )
    arguments = parser.parse_args()
    uv_project = uv_workspace(1000)
    rows: list[dict[str, Any]] = []
    try:
        for sizes, toolkit in ((arguments.sizes, False), (arguments.toolkit_sizes, True)):
            for count in (int(size) for size in sizes.split(",") if size):
                rows += bench_size(count, toolkit, arguments.repeat, uv_project, arguments.cached_only)
    finally:
        if uv_project is not None:
            shutil.rmtree(uv_project, ignore_errors=True)
    if arguments.cached_only and arguments.output == RESULTS:  # the full table stays as it is
        arguments.output = RESULTS.with_name("zoo_cached.json")
    arguments.output.parent.mkdir(parents=True, exist_ok=True)
    arguments.output.write_text(json.dumps(rows, indent=2) + "\n")
    print(markdown(rows))


if __name__ == "__main__":
    main()
