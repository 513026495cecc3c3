"""The pytest plugin, exercised through pytester on a copy of the demo project."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from baseline.project.lockfile import load_lock
from baseline.testing import assert_tensors_close, tensor_mismatch
from baseline.toolchain.provision import CACHE_ENV, cache_root
from tests.conftest import LOCK, REPO, retrain

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
    # the ONNX file changed: accept it or revert it (issue 28), never a tolerance
    assert "hint: the model changed since the lock (" in text
    assert '`baseline accept classifier --reason "..."` if the change is intended' in text
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


# Issue 30: the plugin at syrupy's level. A toolkit-free project (onnxruntime only) keeps these fast.

TINY_INTENT = """
[defaults]
targets = []
backends = ["onnxruntime"]
fixtures = { seed = 0, samples = 1 }

[[models]]
name = "classifier"
onnx = "models/classifier.onnx"

[[models]]
name = "detector"
onnx = "models/detector.onnx"
"""

TINY_TESTS = """
def test_classifier(baseline):
    baseline.assert_passes("classifier")


def test_detector(baseline):
    baseline.assert_passes("detector")
"""

LOGGING_CONFTEST = """
import json, os, time

import baseline.testing
import baseline.verification.verify

_real = baseline.verification.verify.verify_project


def _logged(project, only=None, *args, **kwargs):
    start = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process of the machine
    try:
        return _real(project, only, *args, **kwargs)
    finally:
        line = {"pid": os.getpid(), "only": only, "start": start, "end": time.monotonic()}
        with open(os.environ["VERIFY_LOG"], "a") as log:
            log.write(json.dumps(line) + "\\n")


baseline.verification.verify.verify_project = _logged
baseline.testing.verify_project = _logged
"""


@pytest.fixture(scope="module")
def tiny_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two demo models locked for onnxruntime alone: the gates run in seconds, no toolkit."""
    root = tmp_path_factory.mktemp("tiny")
    (root / "models").mkdir()
    for name in ("classifier", "detector"):
        shutil.copy2(REPO / "fixtures" / "demo" / f"{name}.onnx", root / "models")
    (root / "pyproject.toml").write_text("[project]\nname = 'tiny'\n")
    (root / "baseline.toml").write_text(TINY_INTENT)
    lock = subprocess.run(
        [sys.executable, "-m", "baseline", "lock"], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert lock.returncode == 0, lock.stderr
    return root


@pytest.fixture
def tiny(tiny_template: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    shutil.copytree(tiny_template, pytester.path, dirs_exist_ok=True)
    pytester.makepyfile(test_tiny=TINY_TESTS, conftest=LOGGING_CONFTEST)
    monkeypatch.setenv("VERIFY_LOG", str(pytester.path / "verify.log"))
    return pytester


def verifications(project: pytest.Pytester) -> list[dict[str, Any]]:
    log = project.path / "verify.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def retrain_tiny(root: Path) -> None:
    command = [sys.executable, str(REPO / "fixtures" / "make_models.py"), "--out", "models"]
    subprocess.run([*command, "--perturb", "0.02", "classifier"], cwd=root, check=True, capture_output=True)


def test_xdist_workers_verify_the_lock_once_and_take_turns(tiny: pytest.Pytester) -> None:
    result = tiny.runpytest_subprocess(
        "-n", "2", "-v", "-p", "no:cacheprovider", "--baseline-lock", "baseline.lock"
    )
    result.assert_outcomes(passed=8)  # 6 gate items, 2 fixture tests
    gate_lines = [line for line in result.stdout.lines if "baseline.lock::" in line and "PASSED" in line]
    assert {line.split("]")[0].lstrip("[") for line in gate_lines} == {"gw0", "gw1"}, "both workers ran gates"
    runs = sorted(verifications(tiny), key=lambda run: run["start"])
    assert [run["only"] for run in runs].count(None) == 1, "the whole lock is verified once, by one worker"
    assert sorted(run["only"] for run in runs if run["only"]) == [["classifier"], ["detector"]]
    for earlier, later in itertools.pairwise(runs):
        assert earlier["end"] <= later["start"], "verifications take turns: one writes the cache at a time"
    assert "6 gates: 6 passed" in result.stdout.str()
    assert "2 tests using the baseline fixture: 2 passed" in result.stdout.str()


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_gate_items_honour_baseline_update_once_per_model(tiny: pytest.Pytester, workers: list[str]) -> None:
    retrain_tiny(tiny.path)
    update = ["--baseline-update", "--baseline-reason", "retrained on more data"]
    result = tiny.runpytest_subprocess(
        *workers, "-p", "no:cacheprovider", "--baseline-lock", "baseline.lock", "baseline.lock", *update
    )
    failed = [line for line in result.stdout.lines if line.startswith("FAILED")]
    assert failed and all("::classifier::" in line for line in failed)
    assert "baseline of 'classifier' updated (retrained on more data)" in result.stdout.str()
    assert "updated in the lock: classifier (retrained on more data)" in result.stdout.str()
    audit = load_lock(tiny.path / "baseline.lock").audit
    assert [(entry.model, entry.reason) for entry in audit] == [("classifier", "retrained on more data")]
    again = tiny.runpytest_subprocess(*workers, "-p", "no:cacheprovider", "--baseline-lock", "baseline.lock")
    again.assert_outcomes(passed=8)


def test_without_update_failures_show_their_numbers_at_the_test_s_line(tiny: pytest.Pytester) -> None:
    retrain_tiny(tiny.path)
    result = tiny.runpytest_subprocess("-p", "no:cacheprovider", "--baseline-lock", "baseline.lock")
    text = result.stdout.str()
    assert "classifier drift [onnxruntime]: FAIL" in text
    assert "hint: the model changed since the lock" in text
    assert load_lock(tiny.path / "baseline.lock").audit == []
    assert re.search(r"^6 gates: 3 passed, 3 failed$", text, re.MULTILINE), text
    assert re.search(r"^2 tests using the baseline fixture: 1 passed, 1 failed$", text, re.MULTILINE), text
    # the fixture's failure points at the test's own line (`__tracebackhide__`)
    assert re.search(r"^>\s+baseline.assert_passes\(\"classifier\"\)$", text, re.MULTILINE), text
    assert "baseline/testing.py" not in text


HIDDEN_TRACEBACK_TEST = """
import numpy as np
from baseline.testing import assert_tensors_close


def test_my_model():
    expected = np.zeros(4, dtype=np.float32)
    assert_tensors_close(expected + 1, expected, name="logits")  # the line a failure points at
"""


def test_a_failing_assertion_points_at_the_test_s_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hidden=HIDDEN_TRACEBACK_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert re.search(r"^>\s+assert_tensors_close\(expected \+ 1, expected", text, re.MULTILINE), text
    assert "E       AssertionError: logits: 4 of 4 elements" in text
    assert "baseline/testing.py" not in text and "def assert_tensors_close" not in text


def test_the_entry_point_and_the_internals_name_the_same_properties() -> None:
    """`baseline_pytest` cannot import `baseline` (it loads in every project): the names the
    summary counts by are written twice, and must agree."""
    import baseline_pytest
    from baseline import pytest_plugin

    assert (baseline_pytest.GATE, baseline_pytest.CHECKED, baseline_pytest.UPDATED) == (
        pytest_plugin.GATE,
        pytest_plugin.CHECKED,
        pytest_plugin.UPDATED,
    )
    assert baseline_pytest.SHARED_FOLDER == pytest_plugin.SHARED_FOLDER
