"""Issue 33, the seventh round's false "compiles", each cut with real conversions to a pattern:
an STFT leaving onesided to its default, a graph input read only by Shape, a hand-written
GroupNorm after a Conv1d, and a Pad that crops (`bench/rule_probes.py`, `bench/export_probes.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from onnx import helper

from baseline.static_check import check_model
from baseline.static_check.evidence import REAL_EXPORT, evidence
from tests.test_static_check_rules import errors, model, weights

TARGETS = (("rk3588", False), ("rk3566", False), ("rv1106", True))
NEW_RULES = (
    "stft-default-onesided",
    "shape-only-graph-input",
    "conv1d-grouped-mean",
    "quantized-negative-pad",
)


def spectrogram(tmp_path: Path, onesided: int | None) -> Path:
    extra: dict[str, Any] = {} if onesided is None else {"onesided": onesided}
    nodes = [
        helper.make_node("STFT", ["x", "step", "window"], ["frames"], **extra),
        helper.make_node("ReduceSumSquare", ["frames"], ["y"], axes=[-1], keepdims=0),
    ]
    constants: dict[str, np.ndarray] = {
        "step": np.array(160, np.int64),
        "window": np.hanning(400).astype(np.float32),
    }
    return model(tmp_path, nodes, {"x": [1, 16000]}, constants, name=f"stft{onesided}.onnx")


def test_an_stft_without_onesided_fails_every_target(tmp_path: Path) -> None:
    default = spectrogram(tmp_path, None)
    for target, quantized in TARGETS:
        report = check_model(default, target=target, quantized=quantized)
        assert "stft-default-onesided" in {f.rule for f in report.errors()} and report.verdict == "fails"
    # written out, either value compiles (probes stft_w*_onesided1, _onesided0)
    for side in (0, 1):
        assert "stft-default-onesided" not in errors(spectrogram(tmp_path, side), target="rk3588")
    # as the graph output itself it compiles (the node tests test_stft, test_stft_with_window)
    alone = model(
        tmp_path,
        [helper.make_node("STFT", ["x", "step", "window"], ["y"])],
        {"x": [1, 16000]},
        {"step": np.array(160, np.int64), "window": np.hanning(400).astype(np.float32)},
        name="alone.onnx",
    )
    assert "stft-default-onesided" not in errors(alone, target="rk3588")
    # of a constant signal it folds (the checker's policy for constants; not measured)
    nodes = [
        helper.make_node("STFT", ["signal", "step", "window"], ["frames"]),
        helper.make_node("ReduceSumSquare", ["frames"], ["power"], axes=[-1], keepdims=0),
        helper.make_node("Add", ["x", "power"], ["y"]),
    ]
    constants: dict[str, np.ndarray] = {
        "signal": np.ones((1, 1600), np.float32),
        "step": np.array(160, np.int64),
        "window": np.hanning(400).astype(np.float32),
    }
    folded = model(tmp_path, nodes, {"x": [1, 7, 201]}, constants, name="folded.onnx")
    assert "stft-default-onesided" not in errors(folded, target="rk3588")


def lengths_model(tmp_path: Path, reader: str) -> Path:
    if reader == "Shape":
        lengths = [
            helper.make_node("Shape", ["lengths"], ["size"]),
            helper.make_node(
                "ConstantOfShape", ["size"], ["z"], value=helper.make_tensor("v", 1, [1], [0.0])
            ),
        ]
    else:
        lengths = [helper.make_node("Relu", ["lengths"], ["z"])]
    return model(
        tmp_path,
        [helper.make_node("Relu", ["x"], ["y"]), *lengths],
        {"x": [1, 3, 8, 8], "lengths": [1]},
        opset=13,
        outputs=("y", "z"),
        name=f"lengths_{reader}.onnx",
    )


def test_an_input_read_only_by_shape_fails_the_quantized_build_only(tmp_path: Path) -> None:
    path = lengths_model(tmp_path, "Shape")
    report = check_model(path, target="rv1106", quantized=True)
    assert "shape-only-graph-input" in {f.rule for f in report.errors()} and report.verdict == "fails"
    float_build = check_model(path, target="rk3588", quantized=False)
    assert [f.severity for f in float_build.findings if f.rule == "shape-only-graph-input"] == ["warning"]
    assert "shape-only-graph-input" not in errors(path, target="rk3588", quantized=False)
    # read for its values, it stays an input of the built model
    read = check_model(lengths_model(tmp_path, "Relu"), target="rv1106", quantized=True)
    assert all(f.rule != "shape-only-graph-input" for f in read.findings)


def grouped_mean(tmp_path: Path, dims: int) -> Path:
    spatial = [64] if dims == 1 else [8, 8]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * (2 * dims)),
        helper.make_node("Reshape", ["c", "groups"], ["g"]),
        helper.make_node("ReduceMean", ["g"], ["m"], axes=list(range(2, 2 + dims + 1)), keepdims=1),
        helper.make_node("Sub", ["g", "m"], ["y"]),
    ]
    constants: dict[str, np.ndarray] = {
        "w": weights(32, 16, *([3] * dims)),
        "b": weights(32),
        "groups": np.array([1, 8, 4, *spatial], np.int64),
    }
    return model(tmp_path, nodes, {"x": [1, 16, *spatial]}, constants, opset=13, name=f"gn{dims}.onnx")


def test_a_groupnorm_written_by_hand_after_a_conv1d_fails_every_target(tmp_path: Path) -> None:
    conv1d = grouped_mean(tmp_path, 1)
    for target, quantized in TARGETS:
        report = check_model(conv1d, target=target, quantized=quantized)
        assert "conv1d-grouped-mean" in {f.rule for f in report.errors()} and report.verdict == "fails"
    # after a Conv2d the toolkit's merge has a 4-D weight and compiles (torch_manual_groupnorm_conv2d_*)
    assert "conv1d-grouped-mean" not in errors(grouped_mean(tmp_path, 2), target="rk3588")


def preemphasis(tmp_path: Path, pads: list[int]) -> Path:
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["shifted"], mode="edge"),
        helper.make_node("Mul", ["coefficient", "shifted"], ["y"]),
    ]
    constants: dict[str, np.ndarray] = {
        "pads": np.array(pads, np.int64),
        "coefficient": np.array(0.97, np.float32),
    }
    return model(tmp_path, nodes, {"x": [1, 1600]}, constants, name=f"pad{min(pads)}.onnx")


def test_a_pad_that_crops_fails_the_quantized_build_only(tmp_path: Path) -> None:
    crop = preemphasis(tmp_path, [0, 1, 0, -1])
    report = check_model(crop, target="rv1106", quantized=True)
    assert "quantized-negative-pad" in {f.rule for f in report.errors()} and report.verdict == "fails"
    assert "quantized-negative-pad" not in errors(crop, target="rk3588", quantized=False)
    assert "quantized-negative-pad" not in errors(preemphasis(tmp_path, [0, 1, 0, 0]), target="rv1106")


def test_the_new_rules_rest_on_real_models() -> None:
    for rule in NEW_RULES:
        entry = evidence(rule)
        assert entry.kind == REAL_EXPORT and ("onnx-asr" in entry.cites or "typeseg" in entry.cites), rule
