"""The pytest plugin, exercised through pytester on a copy of the demo project."""

from __future__ import annotations

import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from baseline.project.lockfile import load_lock
from baseline.testing import assert_tensors_close, tensor_mismatch
from baseline.toolchain.provision import CACHE_ENV, cache_root
from tests.conftest import LOCK, retrain

TOOLCHAINS = cache_root()  # resolved now: pytester points HOME at a fresh directory

SAMPLE_TEST = """
def test_classifier_matches_its_baseline(baseline):
    baseline.assert_passes("classifier")


def test_my_own_inference_matches(baseline):
    import onnxruntime as ort
    inputs = baseline.inputs("classifier")
    session = ort.InferenceSession("fixtures/demo/classifier.onnx", providers=["CPUExecutionProvider"])
    outputs = {"logits": [], "probs": []}
    for sample in inputs["image"]:
        logits, probs = session.run(None, {"image": sample})
        outputs["logits"].append(logits)
        outputs["probs"].append(probs)
    import numpy as np
    baseline.assert_outputs_match("classifier", {k: np.stack(v) for k, v in outputs.items()})
"""


@pytest.fixture
def project(demo: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv(CACHE_ENV, str(TOOLCHAINS))
    shutil.copytree(demo, pytester.path, dirs_exist_ok=True)
    pytester.makeini(f"[pytest]\nbaseline_lock = {LOCK}\n")
    pytester.makepyfile(test_sample=SAMPLE_TEST)
    return pytester


@pytest.mark.toolkit
def test_fixture_passes_on_the_locked_model(project: pytest.Pytester) -> None:
    project.runpytest("test_sample.py").assert_outcomes(passed=2)


@pytest.mark.toolkit
def test_perturbed_model_fails_with_numbers_and_a_hint(project: pytest.Pytester) -> None:
    retrain(project.path)
    result = project.runpytest("test_sample.py")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert "classifier drift [onnxruntime]: FAIL" in text and "allowed" in text
    assert "hint: if the change is intended" in text
    assert "classifier.logits: 20 of 20 elements" in text and "worst elements:" in text


@pytest.mark.toolkit
def test_every_gate_is_a_test_with_junit(project: pytest.Pytester) -> None:
    result = project.runpytest("--baseline-lock", str(LOCK), "--junitxml=out.xml", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    lock = load_lock(project.path / LOCK)
    cases = list(ET.parse(project.path / "out.xml").getroot().iter("testcase"))
    gate_cases = [c for c in cases if ".baseline.lock." in (c.get("classname") or "")]
    assert outcomes["passed"] >= 30 and outcomes["xfailed"] == 3
    assert {c.get("classname", "").rsplit(".", 1)[-1] for c in gate_cases} == {m.name for m in lock.models}
    names = {(c.get("classname", "").rsplit(".", 1)[-1], c.get("name")) for c in gate_cases}
    assert ("classifier", "consistency[rknn-sim/rk3588-w8a8]") in names
    assert ("nms_head", "compilable[rknn-sim/rk3588]") in names


@pytest.mark.toolkit
def test_update_accepts_the_change_with_an_audit_entry(project: pytest.Pytester) -> None:
    retrain(project.path)
    result = project.runpytest(
        "test_sample.py::test_classifier_matches_its_baseline",
        "--baseline-update",
        "--baseline-reason",
        "retrained on more data",
    )
    result.assert_outcomes(failed=1)
    assert "baseline of 'classifier' updated (retrained on more data)" in result.stdout.str()
    audit = load_lock(project.path / LOCK).audit
    assert audit[-1].model == "classifier" and audit[-1].reason == "retrained on more data"
    assert any("onnx.sha256" in change for change in audit[-1].changes)
    project.runpytest("test_sample.py").assert_outcomes(passed=2)


def test_mismatch_message_reads_like_pytest_regressions() -> None:
    import numpy as np

    expected = np.zeros((2, 3), dtype=np.float32)
    obtained = expected.copy()
    obtained[1, 2] = 0.5
    message = tensor_mismatch("y", obtained, expected, atol=1e-3, rtol=0)
    assert message is not None
    assert "y: 1 of 6 elements (16.67%) differ beyond atol 0.001" in message
    assert "max abs 0.5" in message and "(1, 2)" in message.splitlines()[4]
    assert tensor_mismatch("y", expected, expected, 0, 0) is None


def test_assert_tensors_close_raises_the_message_and_passes_within_tolerance() -> None:
    import numpy as np

    expected = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    assert_tensors_close(expected + 5e-6, expected, atol=1e-5, rtol=0, name="logits")
    with pytest.raises(AssertionError) as raised:
        assert_tensors_close(expected + 1e-3, expected, atol=1e-5, rtol=0, name="logits")
    assert str(raised.value) == tensor_mismatch("logits", expected + 1e-3, expected, 1e-5, 0)
    assert str(raised.value).startswith("logits: 12 of 12 elements")


# Issue 14, item 11: the plugin is loaded by pytest in every project; one with its own `baseline`
# package must keep it, and pytest must still run there.

OWN_PACKAGE_TEST = """
import baseline


def test_my_own_baseline_package_is_the_one_imported():
    assert baseline.MINE == "yes"
"""


@pytest.fixture
def own_baseline(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.mkpydir("baseline").joinpath("__init__.py").write_text('MINE = "yes"\n')
    pytester.makepyfile(test_own=OWN_PACKAGE_TEST)
    return pytester


def test_a_project_with_its_own_baseline_package_keeps_it(own_baseline: pytest.Pytester) -> None:
    # `python -m pytest` (the project's folder first on sys.path) and the `pytest` script alike
    own_baseline.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    script = Path(sys.executable).with_name("pytest")
    result = own_baseline.run(str(script), "-p", "no:cacheprovider", "test_own.py")
    assert result.ret == 0, result.stdout.str()


def test_the_plugin_module_imports_nothing_of_baseline(own_baseline: pytest.Pytester) -> None:
    code = "import sys, baseline_pytest; print(sorted(m for m in sys.modules if m.startswith('baseline')))"
    result = own_baseline.run(sys.executable, "-c", code)
    assert result.stdout.lines[-1] == "['baseline_pytest']"


def test_using_the_plugin_where_baseline_is_shadowed_fails_in_one_line(own_baseline: pytest.Pytester) -> None:
    own_baseline.path.joinpath("models.lock").write_text("")
    result = own_baseline.runpytest_subprocess("-p", "no:cacheprovider", "--baseline-lock", "models.lock")
    text = result.stdout.str()
    assert "finds" in text and "not the baseline tool" in text and "Traceback" not in text
    assert result.ret != 0
