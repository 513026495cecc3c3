from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

import baseline.models.intent as intent
import baseline.models.task as task
import baseline.models.tolerances as tolerances
from baseline.errors import ConfigError
from baseline.models.tolerances import ConsistencyTolerance
from baseline.project.intent import intent_hash, load_intent, output_tolerances, resolve_models

INTENT = """
[defaults]
targets = ["rk3566"]
fixtures = { seed = 3, samples = 2 }

[defaults.tolerances.drift]
rtol = 0.01

[[models]]
name = "a"
onnx = "a.onnx"
fixtures = { samples = 5 }

[models.tolerances.drift]
atol = 0.5

[models.tolerances.outputs.y.consistency]
min_cosine = 0.99

[[models]]
name = "b"
onnx = "b.onnx"
backends = ["rknn-sim"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "baseline.toml"
    path.write_text(text)
    return path


def test_models_inherit_only_what_they_do_not_set(tmp_path: Path) -> None:
    a, b = resolve_models(load_intent(write(tmp_path, INTENT)))
    assert [t.platform for t in a.targets] == ["rk3566"] and not a.targets[0].quantized
    assert a.fixtures.seed == 3 and a.fixtures.samples == 5
    assert a.tolerances.drift.rtol == 0.01 and a.tolerances.drift.atol == 0.5
    assert b.tolerances.drift.atol == 1e-5  # the built-in default
    assert b.backends == ["onnxruntime", "rknn-sim"], "the golden always runs first"


def test_per_output_tolerances_override_one_field(tmp_path: Path) -> None:
    a = resolve_models(load_intent(write(tmp_path, INTENT)))[0]
    tolerances = output_tolerances(a.tolerances, ["y", "z"])
    assert tolerances["y"].consistency.min_cosine == 0.99
    assert tolerances["y"].consistency.atol == tolerances["z"].consistency.atol
    assert tolerances["y"].drift.atol == 0.5
    assert tolerances["z"].consistency.min_cosine == ConsistencyTolerance().min_cosine


def test_hash_ignores_formatting_but_not_meaning(tmp_path: Path) -> None:
    base = intent_hash(load_intent(write(tmp_path, INTENT)))
    assert intent_hash(load_intent(write(tmp_path, "# comment\n" + INTENT))) == base
    assert intent_hash(load_intent(write(tmp_path, INTENT.replace("0.99", "0.98")))) != base


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[[models]]\nname = "a"\nonnx = "a.onnx"\ntargts = ["x"]\n',
            "models.0.targts: unknown key",
        ),
        ('[[models]]\nname = "a"\n', "models.0.onnx: Field required"),
        (
            '[[models]]\nname = "a"\nonnx = "x"\n[[models]]\nname = "a"\nonnx = "y"\n',
            "unique, repeated: a",
        ),
        ('[[models]]\nname = "a b"\nonnx = "x"\n', "models.0.name"),
        ("models = []\n", "models: List should have at least 1 item"),
        (
            '[defaults]\nfixtures = { low = 1, high = 0 }\n[[models]]\nname = "a"\nonnx = "x"\n',
            "greater than low",
        ),
    ],
)
def test_bad_intent_files(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_intent(write(tmp_path, text))


@pytest.mark.parametrize(
    ("record", "values"),
    [
        ("DriftTolerance", {"atol": float("inf")}),
        ("ConsistencyTolerance", {"rtol": float("inf")}),
        ("SegmentationTask", {"output": "x", "threshold": float("nan")}),
        ("CtcTask", {"output": "x", "alphabet": ["a"], "max_cer": float("inf")}),
        ("ToolkitSettings", {"timeout": float("inf")}),
    ],
)
def test_non_finite_numbers_are_refused_where_a_verify_would_act_on_them(
    record: str, values: dict[str, object]
) -> None:
    """`inf` turns a tolerance off; a NaN threshold never equals itself, so every later verify
    called the lock edited. Both are refused when the intent is read."""
    cls = next(getattr(module, record) for module in (intent, task, tolerances) if hasattr(module, record))
    with pytest.raises(ValidationError, match="finite number"):
        cls(**values)


def test_a_raw_heads_input_size_is_bounded() -> None:
    """Anchors and grids grow with the square of `input_size`: a billion-pixel side is refused."""
    with pytest.raises(ValidationError, match="less than or equal to 8192"):
        task.DetectionTask(output="o", head="retinaface", outputs=["a", "b", "c"], input_size=(10**9, 640))


def test_toolkit_argument_names_keep_their_uppercase() -> None:
    """`quant_img_RGB2BGR` is a real `rknn.config` argument (README lists it): it was refused by
    a lowercase-only pattern. Anything that is not an identifier still is."""
    spec = intent.ConversionSpec(config={"quant_img_RGB2BGR": [True]})
    assert spec.config == {"quant_img_RGB2BGR": [True]}
    for bad in ("quant-img", "2bgr", "a b", "mean_values;rm"):
        with pytest.raises(ValidationError, match="should match pattern"):
            intent.ConversionSpec(config={bad: 1})


MODEL = '[[models]]\nname = "a"\nonnx = "a.onnx"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (MODEL + 'targts = ["x"]\n', r"models\.0\.targts: unknown key; did you mean 'targets'\?"),
        (
            MODEL + '[[models.tasks]]\nkind = "ctc"\noutput = "y"\nalfabet = ["a"]\n',
            r"models\.0\.tasks\.0\.ctc\.alfabet: unknown key; did you mean 'alphabet'\?",
        ),
        (
            "[defaults.tolerances.outputs.y.drfit]\natol = 1\n" + MODEL,
            r"defaults\.tolerances\.outputs\.y\.drfit: unknown key; did you mean 'drift'\?",
        ),
        ('[[model]]\nname = "a"\nonnx = "a.onnx"\n', r"key model: unknown key; did you mean 'models'\?"),
        (MODEL + "zzzz = 1\n", r"models\.0\.zzzz: unknown key$"),
        (
            MODEL + '[[models.expect_fail]]\ngate = "compilabel"\nreason = "r"\n',
            r"models\.0\.expect_fail\.0\.gate: unknown gate 'compilabel'; did you mean 'compilable'\? "
            r"\(known: integrity, static",
        ),
        (
            '[defaults]\nbackends = ["onnxruntime", "rknn_sim"]\n' + MODEL,
            r"defaults\.backends\.1: unknown backend 'rknn_sim'; did you mean 'rknn-sim'\?",
        ),
        (
            MODEL + 'backends = ["rknnlight"]\n',
            r"models\.0\.backends\.0: unknown backend 'rknnlight'; did you mean",
        ),
    ],
)
def test_a_misspelt_name_is_refused_when_read_with_the_closest_known_one(
    tmp_path: Path, text: str, message: str
) -> None:
    """A typo in a key, an `expect_fail` gate or a backend is one line naming the key and the
    name meant; a misspelt gate was accepted and expected nothing."""
    with pytest.raises(ConfigError, match=message) as raised:
        load_intent(write(tmp_path, text))
    assert "\n" not in str(raised.value) and str(raised.value).startswith(str(tmp_path / "baseline.toml"))


@pytest.mark.parametrize("platform", sorted(intent.QUANTIZED_ONLY_PLATFORMS))
def test_a_float_build_of_a_platform_that_builds_int8_only_is_refused_with_its_target(
    tmp_path: Path, platform: str
) -> None:
    """RKNN-Toolkit2 2.2.0, 2.3.2 and 2.5.0 refuse `build(do_quantization=False)` for these: the
    intent says so before anything converts, with the target to write instead."""
    path = write(tmp_path, f'[[models]]\nname = "m"\nonnx = "m.onnx"\ntargets = ["rk3588", "{platform}"]\n')
    with pytest.raises(ConfigError) as refused:
        load_intent(path)
    message = str(refused.value)
    dtype = '{ dtype = "w8a8" }'
    quantized = f'{{ name = "{platform}-w8a8", platform = "{platform}", quantization = {dtype} }}'
    assert f"{platform} builds int8 only" in message and quantized in message and "\n" not in message
    written = f'[[models]]\nname = "m"\nonnx = "m.onnx"\ntargets = [{quantized}, "rk3562"]\n'
    load_intent(write(tmp_path, written))
