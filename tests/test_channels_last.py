"""Image inputs the ONNX graph lays out NHWC (TensorFlow exports through tf2onnx, TFLite models).

The toolkit takes a 4-D ONNX input's dimension 1 as its channels whatever the graph means by
it. open-rppg's tf2onnx BlazeFace ([1, 192, 192, 3]) was written `mean_values = [[0, 0, 0]]` by
`init` and its lock failed at once: "The len of mean_values ([0.0, 0.0, 0.0]) for input 0 is
wrong, expect 192!"; without them the simulator refused the pixels given as `nhwc` ("expect
'nhwc' like (1, 192, 3, 192)"). Six of the eleventh round's 32 files have such an input.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from baseline.backends.base import BackendJob
from baseline.backends.rknn_sim import _build_request
from baseline.errors import ConfigError
from baseline.files.images import input_feeds, load_pixels
from baseline.models.intent import ConversionSpec, ImageSet, QuantizationSpec, TargetSpec
from baseline.models.lock import InputFeed
from baseline.models.tensors import TensorSpec
from tests.toolchain import zoo

COCO = sorted(zoo.COCO.glob("*.jpg"))
NHWC = InputFeed(input="image", fixture_layout="nhwc", onnx_layout="nhwc", mean=[0.0] * 3, std=[255.0] * 3)
NCHW = InputFeed(input="image", fixture_layout="nhwc", onnx_layout="nchw", mean=[0.0] * 3, std=[255.0] * 3)


def test_pixels_go_to_the_toolkit_as_they_are_for_an_nhwc_graph_and_transposed_for_an_nchw_one() -> None:
    assert (NHWC.toolkit_format, NHWC.channels_last_image) == ("nchw", True)
    assert (NCHW.toolkit_format, NCHW.channels_last_image) == ("nhwc", False)
    assert InputFeed(input="x").toolkit_format == "nchw"  # a non-image fixture: the ONNX layout


def _job(feed: InputFeed, shape: tuple[int, ...], calibration: list[Path] | None = None) -> BackendJob:
    pixels = np.zeros((2, *shape), np.uint8)  # [samples, 1, H, W, 3]
    quantization = QuantizationSpec(dtype="w8a8") if calibration else None
    return BackendJob(
        model="m",
        onnx_path=Path("m.onnx"),
        inputs={"image": pixels},
        output_names=["y"],
        target=TargetSpec(
            name="t", platform="rv1106" if quantization else "rk3588", quantization=quantization
        ),
        feeds=[feed],
        calibration=calibration,
    )


def _request(job: BackendJob, workdir: Path, conversion: ConversionSpec) -> dict[str, object]:
    assert job.target is not None
    target = TargetSpec(**{**job.target.model_dump(), "conversion": conversion})
    return _build_request(BackendJob(**{**job.__dict__, "target": target}), workdir)


def test_one_value_for_all_colours_is_given_once_per_row_of_an_nhwc_image(tmp_path: Path) -> None:
    conversion = ConversionSpec(config={"mean_values": [[0, 0, 0]], "std_values": [[255, 255, 255]]})
    request = _request(_job(NHWC, (1, 40, 24, 3)), tmp_path, conversion)
    config = request["config"]
    assert isinstance(config, dict)
    assert config["mean_values"] == [[0] * 40] and config["std_values"] == [[255] * 40]
    assert request["data_formats"] == ["nchw"]
    # an NCHW graph's three colours stay three, and its NHWC pixels are said to be NHWC
    request = _request(_job(NCHW, (1, 40, 24, 3)), tmp_path, conversion)
    assert request["config"] == {"mean_values": [[0, 0, 0]], "std_values": [[255, 255, 255]]}
    assert request["data_formats"] == ["nhwc"]


def test_calibration_photos_of_an_nhwc_graph_reach_the_toolkit_decoded_to_its_size(tmp_path: Path) -> None:
    """The toolkit decodes a dataset's images to what it takes as H x W: for [1, 40, 24, 3] that
    is 24 x 3 pixels. The photos go as `.npy` pixels at 40 x 24 instead (an NCHW graph keeps the
    files as they are, as the zoo's convert.py passes them)."""
    photos = COCO[:2]
    request = _request(_job(NHWC, (1, 40, 24, 3), photos), tmp_path, ConversionSpec())
    listed = [Path(line) for line in Path(str(request["dataset"])).read_text().splitlines()]
    assert [path.suffix for path in listed] == [".npy", ".npy"]
    first = np.load(listed[0])
    assert first.shape == (1, 40, 24, 3) and first.dtype == np.float32
    expected = load_pixels(photos[0], 40, 24, ImageSet(path="p")).astype(np.float32)
    assert np.array_equal(first[0], expected)
    (tmp_path / "nchw").mkdir()
    request = _request(_job(NCHW, (1, 40, 24, 3), photos), tmp_path / "nchw", ConversionSpec())
    listed = [Path(line) for line in Path(str(request["dataset"])).read_text().splitlines()]
    assert listed == [photo.resolve() for photo in photos]


def test_per_colour_values_for_an_nhwc_image_are_refused_with_the_way_out() -> None:
    spec = TensorSpec(name="image", dtype="float32", shape=[1, 192, 192, 3])
    imagenet = ConversionSpec(config={"mean_values": [[123.675, 116.28, 103.53]], "std_values": [[58.4] * 3]})
    with pytest.raises(ConfigError) as refused:
        input_feeds([spec], {}, imagenet, "image", "face")
    message = str(refused.value)
    assert message.startswith("models.face.conversion.config.mean_values: [123.675, 116.28, 103.53] differ")
    assert "is laid out NHWC in the graph (shape [1, 192, 192, 3])" in message
    assert "tf2onnx --inputs-as-nchw" in message and "\n" not in message
    uniform = ConversionSpec(config={"mean_values": [[127.5] * 3], "std_values": [[127.5] * 3]})
    [feed] = input_feeds([spec], {}, uniform, "image", "face") or []
    assert feed.channels_last_image and feed.mean == [127.5] * 3


def channels_last_classifier(path: Path) -> Path:
    """What tf2onnx writes for a Keras image model: an NHWC input, a Transpose into the Convs."""
    rng = np.random.default_rng(3)
    weights = {
        "k": rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3,
        "w": rng.standard_normal((8, 4)).astype(np.float32) * 0.3,
    }
    nodes = [
        helper.make_node("Transpose", ["image"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["nchw", "k"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("MatMul", ["f", "w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "keras_like",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 48, 64, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=[numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)
    return path


def test_lock_refuses_imagenet_values_for_a_channels_last_graph_in_one_line(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    channels_last_classifier(tmp_path / "keras.onnx")
    shutil.copytree(zoo.COCO, tmp_path / "photos")
    (tmp_path / "baseline.toml").write_text(KERAS_INTENT)
    code, _, err = cli(tmp_path, "lock")
    assert code == 2 and not (tmp_path / "baseline.lock").exists()
    [line] = err.strip().splitlines()
    assert "models.keras.conversion.config.mean_values: [123.675, 116.28, 103.53] differ per colour" in line


KERAS_INTENT = """\
[[models]]
name = "keras"
onnx = "keras.onnx"
backends = ["onnxruntime"]
fixtures = { images = { path = "photos", samples = 2 } }
[models.conversion.config]
mean_values = [[123.675, 116.28, 103.53]]
std_values = [[58.395, 57.12, 57.375]]
"""


def _baseline(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "baseline", *args]
    return subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=900)


@pytest.mark.toolkit
def test_a_real_tf2onnx_blazeface_inits_locks_and_verifies_green_on_fp16_and_int8(tmp_path: Path) -> None:
    """open-rppg's BlazeFace (tf2onnx 1.16, [1, 128, 128, 3]) with the zoo's COCO photos, as a
    newcomer runs it: `init` (which locks) on rk3588 and rv1106 w8a8, then `verify --no-cache`."""
    from tests.tasks import conftest as corpus

    project = tmp_path / "p"
    (project / ".git").mkdir(parents=True)
    (project / "models").mkdir()
    shutil.copyfile(corpus.pypi_onnx(*corpus.BLAZEFACE), project / "models" / "face.onnx")
    shutil.copytree(zoo.COCO, project / "photos")
    done = _baseline(
        project, "init", "models/face.onnx", "--images", "photos", "-t", "rk3588", "-t", "rv1106-w8a8"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "baseline.lock: written (1 models: face)" in done.stdout
    verified = _baseline(project, "verify", "--no-cache", "--format", "json")
    results = json.loads(verified.stdout)["results"]
    failing = [r for r in results if r["status"] not in ("pass", "skip", "xfail")]
    assert verified.returncode == 0 and failing == [], failing
    consistency = {
        (r["backend"], r["target"]) for r in results if r["gate"] == "consistency" and r["status"] == "pass"
    }
    assert consistency == {("onnxruntime", None), ("rknn-sim", "rk3588"), ("rknn-sim", "rv1106-w8a8")}
