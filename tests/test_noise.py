"""Image-like inputs fed generated random noise are named at lock and in every report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from baseline.models.lock import ImagesPin
from baseline.models.results import GateResult, Report, Status
from baseline.models.tensors import TensorSpec
from baseline.project.lockfile import load_lock
from baseline.report.html import render_html
from baseline.report.markdown import render_markdown
from baseline.report.text import render_text
from baseline.verification.noise import looks_like_image, noise_warnings
from tests.gates.test_part_gates import yolo_project

DEMO = Path(__file__).resolve().parents[1] / "lockfiles" / "demo" / "baseline.lock"


@pytest.mark.parametrize(
    ("shape", "dtype", "image"),
    [
        ([1, 3, 640, 640], "float32", True),
        (["N", 3, "H", "W"], "float32", True),
        ([1, 224, 224, 3], "uint8", True),
        ([1, 1, 48, 320], "float16", True),
        ([1, 3, 8, 8], "float32", False),  # too small to be a picture
        ([1, 80, 20, 20], "float32", False),  # a feature map
        ([1, 3, 640, 640], "int64", False),
        ([1, 3, 640], "float32", False),
        # issue 29: real shapes on each side of the rule in `looks_like_image`
        ([1, 3, 224, 224], "float32", True),  # NCHW photo
        ([1, 3, 480, 640], "float32", True),  # a rectangular 640×480 photo
        ([1, 480, 640, 3], "uint8", True),
        ([1, 1, 28, 28], "float32", True),  # MNIST
        (["N", 28, 28, 1], "float32", True),  # MNIST exported from Keras, channel-last
        ([1, 480, 640, 1], "float32", True),  # a grey camera frame, channel-last
        (["N", 76, 32, 1], "float32", False),  # 76 mel frames × 32 bins × 1: audio
        ([1, 96, 64, 1], "float32", False),  # VGGish's log-mel patch
        (["N", "T", 40, 1], "float32", False),  # frames of unknown count
        ([1, 80, 3000], "float32", False),  # Whisper's mel input
        ([1, 128, 1, 32], "float32", False),
    ],
)
def test_what_looks_like_an_image(shape: list[int | str], dtype: str, image: bool) -> None:
    assert looks_like_image(TensorSpec(name="x", dtype=dtype, shape=shape)) is image


def test_the_demo_models_are_warned_about_their_noise_fixtures() -> None:
    lock = load_lock(DEMO)
    warned = {model.name: noise_warnings(model) for model in lock.models}
    assert warned["overflow"] == []  # 8×8: not an image
    assert warned["classifier"] == [
        "model 'classifier': input 'image' [1, 3, 32, 32] looks like an image but its fixtures are "
        "generated random noise (fixtures.seed = 0); the gates judge the model on inputs no camera "
        "produces — point fixtures.images at real photos (a folder, glob, dataset.txt or one image) "
        "for this model"
    ]


@pytest.mark.parametrize(
    ("shape", "advice"),
    [
        ([1, 3, 64, 64], "point fixtures.images at real photos"),
        ([1, 1, 48, 320], "point fixtures.images at real photos"),  # grey photos feed it
        # or it is a spectrogram: hawkears' [100, 1, 64, 384] mel frames (twelfth round)
        ([100, 1, 64, 384], "or if it is a spectrogram or other sensor data, recorded inputs as a .npz"),
        (["N", 4, 256, 256], "give real inputs as a .npz in fixtures.path (photos feed 3 colour"),
        ([1, 320, 320, 4], "give real inputs as a .npz in fixtures.path"),
    ],
)
def test_the_way_to_real_inputs_is_one_that_can_feed_the_input(shape: list[int | str], advice: str) -> None:
    """ukis-csmask's cloud mask takes a satellite's four bands, `[N, 4, 256, 256]`: the warning sent
    it to photos, which feed 3 colours or 1 grey channel only."""
    classifier = load_lock(DEMO).model("classifier")
    assert classifier is not None
    spec = TensorSpec(name="image", dtype="float32", shape=shape)
    onnx = classifier.onnx.model_copy(update={"inputs": [spec]})
    [warning] = noise_warnings(classifier.model_copy(update={"onnx": onnx}))
    assert advice in warning


def test_an_input_fed_with_photos_is_not_called_noise() -> None:
    """Image fixtures (`fixtures.images`) feed their input real pixels: no warning for it."""
    classifier = load_lock(DEMO).model("classifier")
    assert classifier is not None
    photos = ImagesPin(input="image", resize="resize", pad=0, channels="rgb", files=[])
    with_photos = classifier.model_copy(
        update={"fixtures": classifier.fixtures.model_copy(update={"images": photos})}
    )
    assert noise_warnings(classifier) and noise_warnings(with_photos) == []


def test_reports_carry_the_warning() -> None:
    result = GateResult(model="m", gate="drift", status=Status.PASS, summary="ok")
    report = Report(lock="baseline.lock", results=[result], warnings=["model 'm': input 'x' is noise"])
    assert "warning: model 'm': input 'x' is noise" in "\n".join(line.plain for line in render_text(report))
    assert "> **warning:** model 'm': input 'x' is noise" in render_markdown(report)
    assert '<section id="warnings"><h2>Warnings</h2>' in render_html(report)
    assert "Warnings" not in render_html(report.model_copy(update={"warnings": []}))


def test_lock_warns_only_when_the_fixtures_are_generated(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    project = yolo_project(tmp_path)  # real photographs: no warning
    code, _, err = cli(tmp_path, "lock")
    assert code == 0 and "warning" not in err
    intent = project.intent_path.read_text()
    project.intent_path.write_text(intent.replace('fixtures = { path = "fixtures/layout.npz" }', ""))
    code, _, err = cli(tmp_path, "lock")
    assert code == 0
    assert "warning: model 'layout': input 'images' [1, 3, 1024, 1024] looks like an image" in " ".join(
        err.split()
    )
