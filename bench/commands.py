"""The commands users run, each as a whole process, on a project of real models.

    python bench/commands.py [--repeat 7] [--cold-repeat 3] [--json bench/results/commands.json]

The project: ddddocr's 54 MB OCR CNN (PyPI; its input 1x1x64xW has a dynamic width, pinned to
256 in the intent's `fixtures.shapes`) and the Inception-v2 of the onnx package, both locked
for rk3588 fp16 on onnxruntime and the toolkit's simulator. Rows, in the order a user meets them:

- `lock` with no lock yet (converts, simulates, measures what varies);
- `verify --no-cache`, cold: every gate, both conversions and simulations again;
- `verify`, cached; `lock --check` with nothing changed;
- `lock --check` after changing one model (its run answered from the run cache);
- `accept` of that change (a relock of one model, with an audit entry).

Every run is a `measure` run: its CPU counts every process it waited for, its memory is the
largest sum of RSS sampled over its live process tree, a process it left running fails it, and
its exit code and output are checked. Cold rows are the median of `--cold-repeat` runs, cached
ones of `--repeat` (≥ 7), each with its minimum and maximum. Beside the cached rows, interleaved
with them: the floor, `python -c "import numpy"` and `python -c "import baseline"`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from measure import Run, RunFailed, load_average, measure, spread  # noqa: E402

REPO = HERE.parent
RESULTS = HERE / "results" / "commands.json"
CHANGED = "inception"

INTENT = """[defaults]
targets = ["rk3588"]
backends = ["onnxruntime", "rknn-sim"]

[[models]]
name = "cnn"
onnx = "models/cnn.onnx"
# a dynamic width: the intent pins the shape the fixtures (and the build) use
fixtures = { samples = 1, shapes = { input1 = [1, 1, 64, 256] } }

[[models]]
name = "inception"
onnx = "models/inception.onnx"
fixtures = { samples = 1 }
"""


def project() -> Path:
    """The two-model project, not locked yet."""
    import onnx
    import whole_process

    root = Path(tempfile.mkdtemp(prefix="baseline-commands-"))
    (root / "pyproject.toml").write_text("[project]\nname = 'commands'\n")
    whole_process.cnn_model(root)  # models/cnn.onnx
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_inception_v2.onnx"
    shutil.copyfile(light, root / "models" / "inception.onnx")
    (root / "baseline.toml").write_text(INTENT)
    return root


def retrain(root: Path) -> None:
    """Scale the weights of the Inception's first convolution stored in the file by 1 %, as a
    retraining would."""
    import onnx
    from onnx import numpy_helper

    path = root / "models" / f"{CHANGED}.onnx"
    model = onnx.load(str(path))
    initializers = {tensor.name: tensor for tensor in model.graph.initializer}
    weights = next(
        initializers[node.input[1]]
        for node in model.graph.node
        if node.op_type == "Conv" and node.input[1] in initializers
    )
    weights.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weights) * 1.01, weights.name))
    onnx.save(model, str(path))


def baseline(root: Path, *args: str, codes: tuple[int, ...] = (0,), expect: str = "") -> Run:
    """`baseline ARGS` in the project, checked: an allowed exit code and `expect` in its output."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TQDM_DISABLE": "1"}
    run = measure([sys.executable, "-m", "baseline", *args], root, env, codes=codes)
    if expect not in run.stdout:
        raise RunFailed(f"baseline {' '.join(args)}: no {expect!r} in its output: {run.stdout[-500:]}")
    return run


def fresh(root: Path) -> None:
    """No lock, no fixtures, no cache: as a project before its first `lock`."""
    (root / "baseline.lock").unlink(missing_ok=True)
    for folder in ("tensors", ".baseline-cache"):
        shutil.rmtree(root / folder, ignore_errors=True)


def repeated(runs: int, action: Callable[[], Run], before: Callable[[], None] | None = None) -> list[Run]:
    """`runs` measured runs of `action`, each after `before` (not measured)."""
    measured = []
    for _ in range(runs):
        if before is not None:
            before()
        measured.append(action())
    return measured


def alternated(runs: int, actions: dict[str, Callable[[], Run]]) -> dict[str, list[Run]]:
    """The actions in turn, forwards then backwards (A B C, C B A, ...), after one warm-up each:
    a machine that gets busier during the runs shifts all of them alike."""
    for action in actions.values():
        action()
    measured: dict[str, list[Run]] = {name: [] for name in actions}
    order = list(actions)
    for index in range(runs):
        for name in order if index % 2 == 0 else reversed(order):
            measured[name].append(actions[name]())
    return measured


def floor(code: str) -> Callable[[], Run]:
    return lambda: measure([sys.executable, "-c", code], REPO)


def bench(repeat: int, cold_repeat: int) -> list[dict[str, Any]]:
    root = project()
    rows: list[dict[str, Any]] = []

    def row(command: str, runs: list[Run], kind: str) -> None:
        numbers = spread(runs)
        rows.append({"command": command, "kind": kind, "runs": len(runs), **numbers})
        wall, tree = numbers["wall_s"], numbers["tree_peak_mb"]
        print(
            f"{command:58s} {wall['median']:7.2f} s ({wall['min']:.2f}-{wall['max']:.2f}) "
            f"{numbers['cpu_s']['median']:7.2f} s CPU {tree['median']:6.0f} MB tree",
            flush=True,
        )

    try:
        lock = repeated(cold_repeat, lambda: baseline(root, "lock", expect="written"), lambda: fresh(root))
        row("baseline lock (no lock yet)", lock, "cold")
        cold = repeated(cold_repeat, lambda: baseline(root, "verify", "--no-cache", expect="PASSED"))
        row("baseline verify --no-cache", cold, "cold")
        baseline(root, "verify")  # fills the result cache
        cached = alternated(
            repeat,
            {
                "verify": lambda: baseline(root, "verify", expect="PASSED"),
                "check": lambda: baseline(root, "lock", "--check", expect="up to date"),
                "numpy": floor("import numpy"),
                "baseline": floor("import baseline"),
            },
        )
        row("baseline verify, cached", cached["verify"], "cached")
        row("baseline lock --check, nothing changed", cached["check"], "cached")
        row("floor: python -c 'import numpy'", cached["numpy"], "floor")
        row("floor: python -c 'import baseline'", cached["baseline"], "floor")
        shutil.copyfile(root / "baseline.lock", root / "before.lock")
        retrain(root)
        stale = f"{CHANGED}: onnx.sha256"
        check = lambda: baseline(root, "lock", "--check", codes=(1,), expect=stale)  # noqa: E731
        row(f"baseline lock --check, {CHANGED} changed (measures it)", [check()], "cold")
        # that check stored the changed model's runs: the next ones answer from the run cache
        row(f"baseline lock --check, {CHANGED} changed", repeated(repeat, check), "cached")
        accepted = repeated(
            repeat,
            lambda: baseline(root, "accept", CHANGED, "--reason", "retrained", expect=CHANGED),
            lambda: shutil.copyfile(root / "before.lock", root / "baseline.lock"),
        )
        row(f"baseline accept {CHANGED}", accepted, "cached")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| command (whole process) | runs | wall s, median (min–max) | CPU s | tree peak MB | processes |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        wall = r["wall_s"]
        lines.append(
            f"| {r['command']} | {r['runs']} | {wall['median']:.2f} ({wall['min']:.2f}–{wall['max']:.2f}) | "
            f"{r['cpu_s']['median']:.2f} | {r['tree_peak_mb']['median']:.0f} | "
            f"{r['processes']['median']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--repeat", type=int, default=7, help="runs of each cached command (median, min, max)"
    )
    parser.add_argument("--cold-repeat", type=int, default=3, help="runs of each cold command")
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args()
    start_load = load_average()
    rows = bench(args.repeat, args.cold_repeat)
    document = {
        "machine": f"{os.cpu_count()} cores, shared",
        "load_average": {"start": round(start_load, 2), "end": round(load_average(), 2)},
        "rows": rows,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(document, indent=2) + "\n")
    print(markdown(rows))


if __name__ == "__main__":
    main()
