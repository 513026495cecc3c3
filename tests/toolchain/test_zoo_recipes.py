"""Baseline converts as the zoo's `convert.py` scripts do: same settings, same `.rknn`.

For each recipe of `airockchip/rknn_model_zoo` a small ONNX model with the same input
conventions is locked by baseline, and converted again by a plain toolkit script doing what
the zoo's script does; the two `.rknn` files must have the same fingerprint.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from baseline.errors import ConfigError
from baseline.files.rknn_file import read_rknn
from baseline.locker import lock_project
from baseline.models.lock import Lock
from baseline.project.layout import Project
from baseline.toolchain.provision import Toolchain
from tests.toolchain import zoo

pytestmark = pytest.mark.toolkit  # every test here drives the real toolkit

ZOO_YOLO = {"mean_values": [[0, 0, 0]], "std_values": [[255, 255, 255]]}
ZOO_PPOCR = {"mean_values": [[123.675, 116.28, 103.53]], "std_values": [[58.395, 57.12, 57.375]]}
ZOO_RETINAFACE = {"mean_values": [[104, 117, 123]], "std_values": [[1, 1, 1]]}
ZOO_DEEPLAB = {"mean_values": [[127.5, 127.5, 127.5]], "std_values": [[127.5, 127.5, 127.5]]}


def toml_value(value: Any) -> str:
    """Enough TOML for the intents below (inline tables, arrays, strings, numbers, bools)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {toml_value(item)}" for key, item in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def lock_recipe(
    root: Path,
    onnx_path: Path,
    *,
    config: dict[str, Any],
    load: dict[str, Any] | None = None,
    build: dict[str, Any] | None = None,
    quantized: bool = False,
    fixtures: str = "",
) -> Lock:
    """An intent with one model on rk3588 (w8a8 calibrated on the COCO subset, or fp16), locked."""
    conversion = {"config": config, "load_onnx": load or {}, "build": build or {}}
    target = '{ name = "rk3588", platform = "rk3588"' + (", quantization = {} }" if quantized else " }")
    lines = [
        "[[models]]",
        'name = "m"',
        f'onnx = "{onnx_path.name}"',
        f"targets = [{target}]",
        f"conversion = {toml_value(conversion)}",
    ]
    if quantized:
        shutil.copytree(zoo.COCO, root / "coco", dirs_exist_ok=True)
        lines.append('calibration = { path = "coco" }')
    if fixtures:
        lines.append(f"fixtures = {fixtures}")
    (root / "baseline.toml").write_text("\n".join(lines) + "\n")
    return lock_project(Project.locate(root / "baseline.lock", root=root)).lock


def baseline_fingerprint(lock: Lock) -> str:
    model = lock.model("m")
    assert model is not None and model.conversions
    fingerprint = model.conversions[0].metadata.fingerprint
    assert fingerprint is not None
    return fingerprint


def zoo_fingerprint(toolchain: Toolchain, onnx_path: Path, tmp: Path, **settings: Any) -> str:
    tmp.mkdir(parents=True, exist_ok=True)
    out = zoo.zoo_convert(toolchain, onnx_path, tmp / f"zoo-{onnx_path.stem}.rknn", **settings)
    fingerprint = read_rknn(out).fingerprint
    assert fingerprint is not None
    return fingerprint


def test_yolov8_recipe_w8a8_on_images(toolchain: Toolchain, tmp_path: Path) -> None:
    """examples/yolov8: mean 0 / std 255, quantized on datasets/COCO/coco_subset_20.txt."""
    onnx_path = zoo.yolo_like(tmp_path / "yolo.onnx")
    lock = lock_recipe(tmp_path, onnx_path, config=ZOO_YOLO, quantized=True)
    model = lock.model("m")
    assert model is not None and model.calibration is not None and len(model.calibration.files) == 20
    assert model.conversions[0].calibration_sha256 == model.calibration.sha256
    dataset = zoo.zoo_dataset(tmp_path / "zoo-datasets")
    expected = zoo_fingerprint(toolchain, onnx_path, tmp_path, config=ZOO_YOLO, dataset=dataset)
    assert baseline_fingerprint(lock) == expected


def test_ppocr_det_recipe_imagenet_mean_std(toolchain: Toolchain, tmp_path: Path) -> None:
    """examples/PPOCR/PPOCR-Det: ImageNet mean/std in 0..255 units (fp16 here)."""
    onnx_path = zoo.text_map_like(tmp_path / "det.onnx")
    lock = lock_recipe(tmp_path, onnx_path, config=ZOO_PPOCR)
    expected = zoo_fingerprint(toolchain, onnx_path, tmp_path, config=ZOO_PPOCR)
    assert baseline_fingerprint(lock) == expected
    # the comparison has teeth: the same model with YOLO's normalisation is another artifact
    assert zoo_fingerprint(toolchain, onnx_path, tmp_path / "yolo-norm", config=ZOO_YOLO) != expected


def test_retinaface_recipe_w8a8(toolchain: Toolchain, tmp_path: Path) -> None:
    """examples/RetinaFace: mean (104, 117, 123), std 1, quantized."""
    onnx_path = zoo.face_like(tmp_path / "face.onnx")
    lock = lock_recipe(tmp_path, onnx_path, config=ZOO_RETINAFACE, quantized=True)
    dataset = zoo.zoo_dataset(tmp_path / "zoo-datasets")
    expected = zoo_fingerprint(toolchain, onnx_path, tmp_path, config=ZOO_RETINAFACE, dataset=dataset)
    assert baseline_fingerprint(lock) == expected


def test_deeplabv3_recipe_output_cut_and_input_size(toolchain: Toolchain, tmp_path: Path) -> None:
    """examples/deeplabv3: `inputs`, `input_size_list` and `outputs` (the ArgMax cut off)."""
    onnx_path = zoo.segmenter_like(tmp_path / "seg.onnx")
    load = {"inputs": ["input"], "input_size_list": [[1, 3, 33, 33]], "outputs": ["logits"]}
    lock = lock_recipe(tmp_path, onnx_path, config=ZOO_DEEPLAB, load=load)
    model = lock.model("m")
    assert model is not None
    assert [ref.outputs[0].name for ref in model.references] == ["logits", "logits"]  # golden cut too
    assert [ref.outputs[0].shape for ref in model.references] == [[1, 1, 5, 33, 33]] * 2
    expected = zoo_fingerprint(toolchain, onnx_path, tmp_path, config=ZOO_DEEPLAB, load=load)
    assert baseline_fingerprint(lock) == expected


def test_clip_text_recipe_int64_ids(toolchain: Toolchain, tmp_path: Path) -> None:
    """examples/clip/python/text: int64 `input_ids`, `inputs` + `input_size_list`, fp16."""
    onnx_path = zoo.text_encoder_like(tmp_path / "text.onnx")
    load = {"inputs": ["input_ids"], "input_size_list": [[1, 8]]}
    lock = lock_recipe(tmp_path, onnx_path, config={}, load=load, fixtures="{ low = 0, high = 64 }")
    model = lock.model("m")
    assert model is not None
    assert model.onnx.inputs[0].dtype == "int64" and model.fixtures.feeds is None
    expected = zoo_fingerprint(toolchain, onnx_path, tmp_path, config={}, load=load)
    assert baseline_fingerprint(lock) == expected


def test_yolov8_pose_recipe_auto_hybrid(toolchain: Toolchain, tmp_path: Path) -> None:
    """examples/yolov8_pose: automatic hybrid quantization (`build(auto_hybrid=True)` in 2.5.0;
    the zoo's `auto_hybrid_quant` is the name of the RKNPU1 toolkit)."""
    onnx_path = zoo.yolo_like(tmp_path / "pose.onnx", heads=8)
    build = {"auto_hybrid": True}
    lock = lock_recipe(tmp_path, onnx_path, config=ZOO_YOLO, build=build, quantized=True)
    dataset = zoo.zoo_dataset(tmp_path / "zoo-datasets")
    expected = zoo_fingerprint(toolchain, onnx_path, tmp_path, config=ZOO_YOLO, build=build, dataset=dataset)
    assert baseline_fingerprint(lock) == expected


def test_a_setting_the_pinned_version_does_not_take_is_named(toolchain: Toolchain, tmp_path: Path) -> None:
    onnx_path = zoo.yolo_like(tmp_path / "yolo.onnx")
    with pytest.raises(ConfigError) as caught:
        lock_recipe(tmp_path, onnx_path, config=ZOO_YOLO, build={"auto_hybrid_quant": True}, quantized=True)
    message = str(caught.value)
    assert "conversion.build.auto_hybrid_quant" in message and "rknn-toolkit2 2.5.0" in message
    assert "auto_hybrid" in message.split("it takes:")[1]  # what that version does take
    assert not (tmp_path / "baseline.lock").exists()  # nothing half-written


def test_signatures_are_read_per_version(tmp_path: Path) -> None:
    """2.2.0's build() has no auto_hybrid: the same intent is refused there, naming 2.2.0."""
    from baseline.models.intent import ConversionSpec
    from baseline.toolchain.provision import find_toolchain
    from baseline.toolchain.signatures import check_settings, toolkit_signatures

    old = find_toolchain("2.2.0")
    if old is None:
        pytest.skip("rknn-toolkit2 2.2.0 is not installed")
    assert "auto_hybrid" not in toolkit_signatures(old)["build"]
    with pytest.raises(
        ConfigError,
        match=r"conversion\.build\.auto_hybrid is not an argument of build\(\) in rknn-toolkit2 2\.2\.0",
    ):
        check_settings(ConversionSpec(build={"auto_hybrid": True}), old, "models.m")
