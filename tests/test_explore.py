"""`baseline explore`: real conversions of a quantized target's remedies, judged as an fp16 build."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import tomllib

from baseline.models.intent import QuantizationSpec, TargetSpec
from baseline.verification.explore import candidates, intent_line
from tests.conftest import LOCK

CLI = Callable[..., tuple[int, str, str]]


def w8a8(algorithm: str = "normal") -> TargetSpec:
    return TargetSpec(
        name="rk3588-w8a8",
        platform="rk3588",
        quantization=QuantizationSpec(dtype="w8a8", algorithm=algorithm),
    )


def test_candidates_are_the_target_and_each_single_change() -> None:
    found = candidates(w8a8("mmse"))
    assert [c.label for c in found] == [
        "as locked",
        "algorithm normal",
        "algorithm kl_divergence",
        "per-layer scales",
        "dtype w8a16",
        "dtype w16a16i",
        "dtype w16a16i_dfp",
    ]
    layer = next(c for c in found if c.label == "per-layer scales").target
    assert layer.quantization is not None and layer.quantization.method == "layer"
    assert layer.quantization.algorithm == "mmse" and layer.name == "rk3588-w8a8-layer-scales"
    fp16 = TargetSpec(name="rk3588", platform="rk3588")
    with pytest.raises(Exception, match="not quantized"):
        candidates(fp16)


def test_the_intent_line_keeps_the_target_name_and_is_toml() -> None:
    line = intent_line(candidates(w8a8())[1].target, "rk3588-w8a8")
    target = tomllib.loads(f"t = {line}")["t"]
    assert target == {
        "name": "rk3588-w8a8",
        "platform": "rk3588",
        "quantization": {"dtype": "w8a8", "algorithm": "mmse", "method": "channel"},
    }


def test_int8_throughout_is_preferred_to_float_layers_and_wider_dtypes() -> None:
    """Measured on YOLOv8n DocLayNet w8a8 (toolkit 2.3.2): the graph cut and the hybrid both
    restored detection; the hybrid's cosine (of the whole output) was higher, the cut's (of its
    parts) not comparable, and the cut keeps every layer int8: it is the one proposed."""
    from baseline.models.task import DetectionTask
    from baseline.verification.explore import CandidateResult, Exploration, GraphCut, _cut_candidate

    target = w8a8()
    hybrid, wider = candidates(target, [("hybrid", ["output0"])])[-1], candidates(target)[-1]
    task = DetectionTask.model_validate({"outputs": ["boxes", "scores"], "head": "yolov8"})
    cut = _cut_candidate(target, GraphCut(["boxes", "scores"], [task], [0]))
    results = [
        CandidateResult(candidates(target)[0]),
        CandidateResult(wider, min_cosine=0.9999, as_float=True),
        CandidateResult(hybrid, min_cosine=0.999817, as_float=True),
        CandidateResult(cut, min_cosine=0.976895, as_float=True),
    ]
    found = Exploration("yolo", target, [], None, results)
    assert found.best is results[3]
    assert found.restoring == results[1:]
    load_onnx = cut.target.conversion.load_onnx if cut.target.conversion else {}
    assert load_onnx["outputs"] == ["boxes", "scores"] and cut.target.quantization == target.quantization


def test_a_candidate_row_shows_its_accuracy_against_labels_beside_onnxruntime_s() -> None:
    """Measured on PP-OCRv4 rec w8a8 (toolkit 2.5.0, three labelled lines): as locked CER 0.054,
    `algorithm kl_divergence` 0.000, onnxruntime 0.000."""
    from baseline.cli.exploring import _row
    from baseline.models.labels import LabelScore
    from baseline.verification.explore import CandidateResult

    def cer(value: float, backend: str) -> LabelScore:
        return LabelScore(task=0, backend=backend, samples=3, metrics={"cer": value})

    result = CandidateResult(candidates(w8a8())[0], seconds=6.3, size=4214 * 1024, min_cosine=0.994303)
    result.labels, result.float_labels = [cer(0.054, "rknn-sim")], [cer(0.0, "onnxruntime")]
    assert _row(result).endswith("| no | CER 0.054 (0.000)")
    assert _row(CandidateResult(candidates(w8a8())[0], seconds=1.0)).endswith("| no")


def test_the_graph_cut_lines_are_the_intent_s_toml() -> None:
    from baseline.models.task import DetectionTask
    from baseline.verification.explore import GraphCut, cut_lines

    task = DetectionTask.model_validate(
        {"outputs": ["/m/Mul_2_output_0", "/m/Sigmoid_output_0"], "head": "yolov8"}
    )
    lines = cut_lines(GraphCut(task.outputs or [], [task], [0]))
    table = tomllib.loads("\n".join(lines[:2]))
    assert table["models"]["conversion"]["load_onnx"]["outputs"] == [
        "/m/Mul_2_output_0",
        "/m/Sigmoid_output_0",
    ]
    assert lines[2] == (
        "# and in [[models.tasks]] #0 (detection on '/m/Mul_2_output_0'): "
        'outputs = ["/m/Mul_2_output_0", "/m/Sigmoid_output_0"]'
    )


@pytest.mark.toolkit
def test_explore_converts_every_candidate_and_writes_nothing(demo: Path, cli: CLI) -> None:
    lock, intent = demo / LOCK, demo / LOCK.with_suffix(".toml")
    before = (lock.read_bytes(), intent.read_bytes())
    code, out, err = cli(demo, "explore", "classifier", "--target", "rk3588-w8a8", "--lock", str(LOCK))
    assert code == 0, out + err
    assert "where rk3588-w8a8 loses accuracy" in out and "\n  [" in out  # layers from the analysis
    rows = {line.split(" | ")[0].strip(): line for line in out.splitlines() if " | " in line}
    assert {"as locked", "algorithm mmse", "algorithm kl_divergence", "per-layer scales"} <= rows.keys()
    assert "classification on 'probs'" in rows["as locked"]
    # each step is heard of as it ends: the analysis, then every candidate once, numbered
    assert "per-layer analysis done in " in err
    steps = [line for line in err.splitlines() if line.startswith("… [") and "converted and run in" in line]
    assert len(steps) == len(rows) - 1 and f"/{len(rows) - 1}] " in steps[0]  # rows hold the header too
    # rk3588 takes no w8a16 in toolkit 2.5.0: the candidate is shown refused, with the toolkit's reason
    assert "not built: " in rows["dtype w8a16"] and "w8a16" in rows["dtype w8a16"]
    # the demo's w8a8 build already ranks every class as onnxruntime does: nothing to restore
    assert "rk3588-w8a8 as locked already meets what an fp16 build meets: nothing to restore" in out
    assert "restores it" not in out
    assert "--candidate-timeout" not in out  # the toolkit's own timeout stopped nothing
    assert (lock.read_bytes(), intent.read_bytes()) == before


@pytest.mark.toolkit
def test_a_candidate_past_its_limit_is_stopped_and_the_report_says_how_to_wait_longer(
    demo: Path, cli: CLI
) -> None:
    args = ("explore", "classifier", "--target", "rk3588-w8a8", "--lock", str(LOCK))
    code, out, err = cli(demo, *args, "--candidate-timeout", "0.1")  # no conversion is this fast
    assert code == 0, out + err
    rows = {line.split(" | ")[0].strip(): line for line in out.splitlines() if " | " in line}
    assert "the toolkit did not answer within 0 s" in rows["algorithm mmse"]
    assert "each candidate had 0.1 s: `--candidate-timeout SECONDS` gives the stopped ones longer" in out


@pytest.mark.toolkit
def test_explore_names_the_targets_of_a_model_for_an_unknown_one(demo: Path, cli: CLI) -> None:
    code, _, err = cli(demo, "explore", "classifier", "--target", "rk3588-int8", "--lock", str(LOCK))
    assert code == 2 and "has no target 'rk3588-int8' (its targets: rk3588, rk3588-w8a8)" in err


@pytest.mark.toolkit
def test_a_hybrid_target_locks_and_verifies_with_its_float_layers(demo: Path, cli: CLI) -> None:
    """`quantization.float_layers` goes through the toolkit's hybrid_quantization_step1/2 (toolkit
    2.5.0, which runs step 2 only in a new RKNN object): the build differs from plain w8a8 and
    the lock verifies green."""
    from baseline.project.lockfile import load_lock

    intent = demo / LOCK.with_suffix(".toml")
    plain = load_lock(demo / LOCK).model("classifier")
    assert plain is not None
    before = plain.conversion("rk3588-w8a8")
    text = intent.read_text().replace(
        'quantization = { dtype = "w8a8", algorithm = "normal" }',
        'quantization = { dtype = "w8a8", algorithm = "normal", float_layers = ["logits"] }',
    )
    intent.write_text(text)
    code, out, err = cli(demo, "lock", "--lock", str(LOCK))
    assert code == 0, out + err
    hybrid = load_lock(demo / LOCK).model("classifier")
    assert hybrid is not None
    after = hybrid.conversion("rk3588-w8a8")
    assert before is not None and after is not None and after.artifact.sha256 != before.artifact.sha256
    code, out, err = cli(demo, "verify", "--lock", str(LOCK), "--model", "classifier", "--no-cache")
    assert code == 0, out + err


@pytest.mark.toolkit
def test_a_hybrid_target_on_rv1106_keeps_its_layers_in_int16(demo: Path, cli: CLI) -> None:
    """rv1106 has no float16 layers: toolkit 2.5.0 refuses `conv2: float16` in a hybrid build
    ("only support int8/int16"), so the layers named there are built int16, and `explore` says so."""
    from baseline.project.layout import Project
    from baseline.project.lockfile import load_lock
    from baseline.verification.explore import hybrid_sets

    intent = demo / LOCK.with_suffix(".toml")
    hybrid = (
        '{ name = "rv1106-w8a8", platform = "rv1106", '
        'quantization = { dtype = "w8a8", algorithm = "normal", float_layers = ["conv2"] } }'
    )
    plain = (
        '{ name = "rk3588-w8a8", platform = "rk3588", '
        'quantization = { dtype = "w8a8", algorithm = "normal" } }'
    )
    text = intent.read_text().replace(plain, hybrid)
    assert hybrid in text
    intent.write_text(text)
    code, out, err = cli(demo, "lock", "--lock", str(LOCK))
    assert code == 0, out + err
    model = load_lock(demo / LOCK).model("classifier")
    assert model is not None and model.conversion("rv1106-w8a8") is not None
    code, out, err = cli(demo, "verify", "--lock", str(LOCK), "--model", "classifier", "--no-cache")
    assert code == 0, out + err
    project = Project.locate(demo / LOCK)
    labels = [label for label, _ in hybrid_sets(project, model, [], "rv1106")]
    assert labels == ["hybrid: the outputs' last layers in int16", "hybrid: the 5 weakest layers in int16"]


def test_the_candidates_are_said_in_order_before_the_first_runs() -> None:
    """Each candidate is reported as it ends; mmse can be silent for minutes after the first, so
    the plan, and that mmse is the slow one and how to bound it, is said first."""
    from baseline.verification.explore import _plan_line

    line = _plan_line(candidates(w8a8()), None)
    assert line.startswith("7 candidates, run in this order: as locked, algorithm mmse, ")
    assert "mmse converts 11-33x slower" in line and "--candidate-timeout SECONDS" in line
    assert "--candidate-timeout" not in _plan_line(candidates(w8a8()), 600.0)
    assert "slower" not in _plan_line(candidates(w8a8("mmse")), None)


def test_numbered_tensors_of_a_hybrid_build_are_found_under_their_yaml_quotes() -> None:
    """Step 1 of hybrid quantization writes a numbered tensor quoted (`'368':`, as PyTorch names
    CenterFace's): asked for as `368`, it was matched by none, and the hybrid candidate failed with
    'none of the float_layers names a quantized tensor'. The key is written back as it was."""
    from baseline.toolchain.worker import _asked_for, _cfg_tensors, _unquoted

    text = (
        "custom_quantize_layers: {}\nquantize_parameters:\n    input.1:\n        qtype: asym\n"
        "    '368':\n        qtype: asym\n    '368_rs':\n        dtype: int8\n"
        "    conv2:\n        qtype: asym\n"
    )
    keys = _cfg_tensors(text)
    assert keys == ["input.1", "'368'", "'368_rs'", "conv2"]
    assert [key for key in keys if _asked_for(_unquoted(key), ["368"])] == ["'368'", "'368_rs'"]
    assert _unquoted('"12"') == "12" and _unquoted("'") == "'"


def test_rows_an_int8_output_rounds_to_one_value_are_named_before_the_candidates() -> None:
    """Team run 17: mahjong-detector's YOLO11n on rv1106-w8a8. Its `[1, 38, 8400]` output holds
    boxes (up to ~640) and 34 class-score rows (up to 0.49) under one int8 scale: every score row
    came back 0 while the cosine stayed 0.9994, and the per-layer analysis named head layers at
    cosine 0.95, not the output. explore says which rows one int8 step swallowed."""
    import numpy as np

    from baseline.cli.exploring import report_lines
    from baseline.verification.explore import CandidateResult, Exploration, collapsed_rows

    rng = np.random.default_rng(0)
    golden = rng.uniform(0, 0.5, (4, 1, 6, 50)).astype(np.float32)  # samples, batch, rows, anchors
    golden[:, :, :2] = rng.uniform(0, 640, (4, 1, 2, 50))  # two box rows dwarf four score rows
    build = golden.copy()
    build[:, :, 2:] = 0.0
    [said] = collapsed_rows({"output0": golden}, {"output0": build})
    assert said.startswith("output 'output0': 4 of 6 rows along axis 1 hold one value in this build")
    assert collapsed_rows({"output0": golden}, {"output0": golden}) == []
    flat = np.zeros((4, 1, 6, 50), np.float32)  # rows onnxruntime holds constant too: nothing lost
    assert collapsed_rows({"output0": flat}, {"output0": flat}) == []
    scores = {"p": rng.uniform(0, 1, (4, 1, 81)).astype(np.float32)}  # class scores: no rows of positions
    assert collapsed_rows(scores, {"p": np.zeros_like(scores["p"])}) == []
    found = Exploration("yolo", w8a8(), [], None, [CandidateResult(candidates(w8a8())[0])], collapsed=[said])
    lines = report_lines(found)
    assert f"  {said}" in lines and lines.index(f"  {said}") < next(
        i for i, line in enumerate(lines) if line.startswith("candidates")
    )


def test_when_nothing_meets_fp16_the_closest_candidate_past_locks_floor_is_named() -> None:
    """kelp-o-matic's LRASPP on rv1106-w8a8 (thirteenth round): 0.856 as locked, below the 0.9 lock
    holds a quantized build to; kl_divergence 0.923, mmse 0.921, nothing near fp16's bar. explore
    said only "none of the 8 candidates ..."; the kl_divergence build would lock as it is."""
    from baseline.cli.exploring import report_lines
    from baseline.verification.explore import CandidateResult, Exploration

    target = w8a8()
    as_locked, mmse, kl = candidates(target)[:3]
    assert (mmse.label, kl.label) == ("algorithm mmse", "algorithm kl_divergence")
    results = [
        CandidateResult(as_locked, min_cosine=0.856014),
        CandidateResult(mmse, min_cosine=0.921103),
        CandidateResult(kl, min_cosine=0.923043),
    ]
    lines = report_lines(Exploration("kelp", target, [], None, results))
    closest = next(i for i, line in enumerate(lines) if line.startswith("closest: "))
    assert lines[closest].startswith("closest: algorithm kl_divergence (min cosine 0.923043), above the 0.9")
    target_line = tomllib.loads(f"t = {lines[closest + 1].strip()}")["t"]
    assert target_line["quantization"]["algorithm"] == "kl_divergence"
    below = [CandidateResult(as_locked, min_cosine=0.5), CandidateResult(mmse, min_cosine=0.85)]
    assert not any(
        line.startswith("closest") for line in report_lines(Exploration("k", target, [], None, below))
    )
