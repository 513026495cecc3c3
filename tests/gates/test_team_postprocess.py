"""The team's own post-processing as the task test (`kind = "postprocess"`): through `lock` and
`verify` on a real model (PP-OCR's direction classifier from a PyPI wheel, onnxruntime), and
each way the team's module can be wrong, on small arrays."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import psutil
import pytest
from pydantic import ValidationError

from baseline.errors import ConfigError, InputError
from baseline.locker import lock_project
from baseline.models.results import Status
from baseline.models.task import PostprocessComparison, PostprocessTask, TaskOutcome
from baseline.project.layout import Project
from baseline.tasks.compare import compare_task
from baseline.tasks.team import result_differences, sources_hash
from baseline.verification.verify import VerifyOptions, verify_project
from tests.gates.test_task_gate import direction_inputs, project, task_result
from tests.tasks.conftest import PPOCR_CLS, pypi_onnx
from tests.tasks.test_real_models import swapped_classifier_rows

DIRECTION = '''
import numpy as np

LABELS = ["0", "180"]


def decode(outputs):
    """The team's own reading of the classifier: the label and its probability."""
    probabilities = outputs["save_infer_model/scale_0.tmp_1"][0]
    best = int(np.argmax(probabilities))
    return {"label": LABELS[best], "p": round(float(probabilities[best]), 1)}


def same_label(golden, candidate):
    change = abs(golden["p"] - candidate["p"])
    if golden["label"] != candidate["label"]:
        return False, f"label {golden['label']} became {candidate['label']}", {"p_change": change}
    return True, "same label", {"p_change": change}
'''

TASK = 'kind = "postprocess"\npostprocess = "team.direction:decode"\ncompare = "team.direction:same_label"'


def team_project(tmp_path: Path, task: str = TASK) -> Project:
    classifier = project(tmp_path, "direction", pypi_onnx(*PPOCR_CLS), direction_inputs(), task)
    write(tmp_path, "team/__init__.py", "")
    write(tmp_path, "team/direction.py", DIRECTION)
    return classifier


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_teams_comparator_judges_a_real_classifier_and_names_the_sample(tmp_path: Path) -> None:
    classifier = team_project(tmp_path)
    lock_project(classifier)
    assert "sha256 = " in classifier.lock_path.read_text()
    unchanged = task_result(classifier)
    assert unchanged.status == Status.PASS, unchanged.details

    onnx_path = tmp_path / "models" / "direction.onnx"
    swapped_classifier_rows(onnx_path, onnx_path)
    faulty = task_result(classifier)
    assert faulty.status == Status.FAIL
    assert faulty.details[0] == "against locked onnxruntime: sample 0: label 0 became 180"
    comparison = faulty.metrics.checks[0].outcome.comparison  # type: ignore[union-attr]
    assert isinstance(comparison, PostprocessComparison)
    assert (
        comparison.samples[0].numbers["p_change"] >= 0 and '"label":"180"' in comparison.samples[0].candidate
    )


def test_without_a_comparator_the_results_must_be_equal_and_the_diff_says_where(tmp_path: Path) -> None:
    classifier = team_project(tmp_path, 'kind = "postprocess"\npostprocess = "team.direction:decode"')
    lock_project(classifier)
    assert task_result(classifier).status == Status.PASS
    onnx_path = tmp_path / "models" / "direction.onnx"
    swapped_classifier_rows(onnx_path, onnx_path)
    faulty = task_result(classifier)
    assert faulty.status == Status.FAIL
    assert "sample 0: 1 difference(s): label: '0' → '180'" in faulty.details[0]


def test_editing_the_module_needs_a_new_lock_and_a_lock_only_edit_is_refused(tmp_path: Path) -> None:
    classifier = team_project(tmp_path)
    lock_project(classifier)
    locked = classifier.lock_path.read_text()
    write(tmp_path, "team/helpers.py", "# a helper of the package changes the hash too\n")
    with pytest.raises(ConfigError, match=r"models\.direction\.tasks differs"):
        verify_project(classifier, options=VerifyOptions(use_cache=False))
    lock_project(classifier)
    relocked = classifier.lock_path.read_text()
    assert relocked != locked
    assert task_result(classifier).status == Status.PASS

    pinned = relocked.split('sha256 = "')[-1][:64]
    classifier.lock_path.write_text(relocked.replace(pinned, "0" * 64))
    with pytest.raises(ConfigError, match=r"models\.direction\.tasks differs"):
        verify_project(classifier, options=VerifyOptions(use_cache=False))


def test_an_edit_of_the_teams_code_re_runs_the_cached_gate(tmp_path: Path) -> None:
    classifier = team_project(tmp_path)
    lock_project(classifier)

    def cached_task_status() -> Status:
        report = verify_project(classifier, options=VerifyOptions(use_cache=True))
        return next(result for result in report.results if result.gate == "task").status

    assert cached_task_status() == Status.PASS
    assert cached_task_status() == Status.PASS  # from the cache now
    write(
        tmp_path,
        "team/direction.py",
        DIRECTION.replace('return True, "same label"', 'return False, "strict"'),
    )
    lock_project(classifier)  # pins the new hash; its own self-check warns that the task fails
    assert cached_task_status() == Status.FAIL  # the cached PASS of the old code is not reused


# ---------------------------------------------------------------- the team's code, wrong


def outputs(*rows: list[float]) -> dict[str, np.ndarray]:
    return {"scores": np.array(rows, dtype=np.float32)[:, None]}


def judge(root: Path, function: str, compare: str | None = None, timeout: float = 60.0) -> TaskOutcome:
    spec = PostprocessTask(postprocess=function, compare=compare, timeout=timeout)
    return compare_task(spec, outputs([0.1, 0.9]), outputs([0.8, 0.2]), root=root, model="m")


MODULE = """
import time
import numpy as np


def top(outputs):
    return int(np.argmax(outputs["scores"]))


def raw(outputs):
    return outputs["scores"]


def broken(outputs):
    raise KeyError("logits")


def multiline(outputs):
    raise ValueError("first line\\nPASSED: forged")


def slow(outputs):
    time.sleep(30)


def chatty(outputs):
    print("debug output the team left in")
    return [round(float(x), 3) for x in outputs["scores"][0]]


def bad_verdict(golden, candidate):
    return "yes"


def leaky(outputs):
    import os

    raise RuntimeError("upload failed with " + os.environ["BASELINE_TEST_API_TOKEN"] + " " + "x" * 5000)


def spawner(outputs):
    import subprocess
    import sys

    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # never waited for
    return [round(float(x), 3) for x in outputs["scores"][0]]


def crash(outputs):
    import os
    import sys

    print("the last words", file=sys.stderr)
    os._exit(3)


NOT_A_FUNCTION = 3
"""


@pytest.fixture
def team(tmp_path: Path) -> Path:
    write(tmp_path, "post.py", MODULE)
    return tmp_path


def test_the_default_comparator_fails_with_the_difference(team: Path) -> None:
    outcome = judge(team, "post:top")
    assert not outcome
    assert outcome.failures == ["sample 0: 1 difference(s): result: 1 → 0"]


def test_prints_of_the_teams_code_do_not_break_the_reply(team: Path) -> None:
    outcome = judge(team, "post:chatty")
    assert outcome.failures == ["sample 0: 2 difference(s): [0]: 0.1 → 0.8; [1]: 0.9 → 0.2"]


@pytest.mark.parametrize(
    ("function", "compare", "message"),
    [
        (
            "missing.module:top",
            None,
            r"module 'missing.module' is not in the project .* \(looked for missing/module.py",
        ),
        (
            "post:nothing",
            None,
            r"model 'm': postprocess 'post:nothing': module 'post' has no function 'nothing'",
        ),
        ("post:broken", None, r"post:broken' raised KeyError on the golden outputs of sample 0: 'logits'"),
        ("post:raw", None, r"returned a result that is not JSON .*ndarray is not JSON serializable"),
        (
            "post:top",
            "post:bad_verdict",
            r"compare 'post:bad_verdict' returned 'yes' on sample 0; return a bool",
        ),
        (
            "post:multiline",
            None,
            r"raised ValueError on the golden outputs of sample 0: first line\\nPASSED: forged$",
        ),
        ("post:crash", None, r"post:crash': the post-processing process died: the last words$"),
        ("post:NOT_A_FUNCTION", None, r"module 'post' has no function 'NOT_A_FUNCTION'"),
    ],
)
def test_each_mistake_in_the_teams_module_is_one_line(
    team: Path, function: str, compare: str | None, message: str
) -> None:
    with pytest.raises((ConfigError, InputError), match=message) as error:
        judge(team, function, compare)
    assert "\n" not in str(error.value)


def test_a_secret_in_the_teams_error_is_redacted_and_its_length_bounded(
    team: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI masks secrets in its log, not in the comment a bot posts: what the team's code says is
    cut to 500 characters and the value of an environment variable named like a secret replaced."""
    monkeypatch.setenv("BASELINE_TEST_API_TOKEN", "s3cr3t-value-123")
    with pytest.raises(InputError) as error:
        judge(team, "post:leaky")
    text = str(error.value)
    assert "s3cr3t-value-123" not in text and "[$BASELINE_TEST_API_TOKEN redacted]" in text
    assert len(text) < 700 and text.endswith("…")


def test_processes_the_teams_code_starts_do_not_outlive_its_judgement(team: Path) -> None:
    before = {p.pid for p in psutil.process_iter() if "time.sleep(300)" in " ".join(_cmdline(p))}
    judge(team, "post:spawner")
    started = [p for p in psutil.process_iter() if "time.sleep(300)" in " ".join(_cmdline(p))]
    _, alive = psutil.wait_procs([p for p in started if p.pid not in before], timeout=10)  # SIGKILL lands
    assert alive == []


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return list(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []


def test_a_hanging_postprocess_is_stopped_at_its_timeout(team: Path) -> None:
    with pytest.raises(InputError, match=r"did not finish within 1 s and was stopped; raise `timeout`"):
        judge(team, "post:slow", timeout=1)


def test_an_installed_module_cannot_stand_in_for_the_projects(tmp_path: Path) -> None:
    # the child has imported numpy before the team's code: a project `numpy.py` is not what runs
    write(tmp_path, "numpy.py", "def top(outputs):\n    return 0\n")
    with pytest.raises(InputError, match=r"'numpy' imported from .*, not the project's .*numpy.py"):
        judge(tmp_path, "numpy:top")


def test_a_module_symlinked_out_of_the_project_is_refused(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside", "post.py", MODULE)
    project_root = tmp_path / "project"
    project_root.mkdir()
    os.symlink(outside, project_root / "post.py")
    with pytest.raises(ConfigError, match=r"symlink that leaves the project"):
        judge(project_root, "post:top")


@pytest.mark.parametrize(
    "name", ["../post:top", "post", "post:top:x", "/abs/post:top", "post.:top", "1post:top"]
)
def test_a_function_name_that_is_not_a_dotted_name_is_refused(name: str) -> None:
    with pytest.raises(ValidationError):
        PostprocessTask(postprocess=name)


def test_the_hash_covers_the_package_and_not_other_files(tmp_path: Path) -> None:
    write(tmp_path, "team/__init__.py", "")
    write(tmp_path, "team/direction.py", DIRECTION)
    spec = PostprocessTask(postprocess="team.direction:decode")
    before = sources_hash(tmp_path, spec, "here")
    write(tmp_path, "README.md", "not code")
    assert sources_hash(tmp_path, spec, "here") == before
    write(tmp_path, "team/direction.py", DIRECTION + "\n# edited\n")
    assert sources_hash(tmp_path, spec, "here") != before


def test_the_hash_covers_project_modules_it_imports_and_declared_data_files(tmp_path: Path) -> None:
    """A helper outside the package, found through its imports (absolute and relative), and a data
    file the intent declares: editing either needs a new lock, as editing the module does."""
    write(tmp_path, "team/__init__.py", "from .shared import THRESHOLD\n")
    write(tmp_path, "team/shared.py", "THRESHOLD = 0.5\n")
    write(tmp_path, "team/direction.py", "import numpy as np\nfrom common.labels import LABELS\n" + DIRECTION)
    write(tmp_path, "common/__init__.py", "")
    write(tmp_path, "common/labels.py", 'LABELS = ["0", "180"]\n')
    write(tmp_path, "common/unused.py", "# nothing imports this\n")
    write(tmp_path, "labels.json", '["0", "180"]')
    spec = PostprocessTask(postprocess="team.direction:decode", data=["labels.json"])
    before = sources_hash(tmp_path, spec, "here")
    write(tmp_path, "common/unused.py", "# edited, still imported by nothing\n")
    assert sources_hash(tmp_path, spec, "here") == before
    for relative, text in (("common/labels.py", 'LABELS = ["180", "0"]\n'), ("labels.json", '["180", "0"]')):
        write(tmp_path, relative, text)
        assert sources_hash(tmp_path, spec, "here") != before, relative
        before = sources_hash(tmp_path, spec, "here")
    for outside in ("../elsewhere.json", "/etc/passwd"):
        with pytest.raises(ConfigError, match=r"here\.data: .* must be a path inside the project"):
            sources_hash(tmp_path, spec.model_copy(update={"data": [outside]}), "here")


def test_result_differences_walk_dicts_and_lists() -> None:
    golden = {"boxes": [[0, 0, 10, 10]], "text": "ab", "n": float("nan")}
    candidate = {"boxes": [[0, 0, 10, 12]], "text": "ab", "n": float("nan"), "extra": 1}
    assert result_differences(golden, candidate) == ["boxes[0][3]: 10 → 12", "extra: only in the candidate"]
    assert result_differences([1, 2], [1]) == ["result: 2 items → 1"]


TOOLKIT_INTENT = """
[[models]]
name = "direction"
onnx = "models/direction.onnx"
fixtures = { path = "fixtures/direction.npz" }
targets = [{ name = "rk3588", platform = "rk3588" }]

[models.conversion.load_onnx]
inputs = ["x"]
input_size_list = [[1, 3, 48, 192]]

[[models.tasks]]
kind = "postprocess"
postprocess = "team.direction:decode"
compare = "team.direction:same_label"
"""


@pytest.mark.toolkit
def test_the_teams_code_judges_the_simulator_against_onnxruntime(tmp_path: Path) -> None:
    """The real toolkit's fp16 simulator: the team's decoding of its outputs, run against the
    locked simulator outputs and against onnxruntime today, keeps every label."""
    classifier = team_project(tmp_path)
    (tmp_path / "baseline.toml").write_text(TOOLKIT_INTENT)
    lock_project(classifier)
    report = verify_project(classifier, options=VerifyOptions(use_cache=False))
    simulated = next(r for r in report.results if r.gate == "task" and r.backend == "rknn-sim")
    assert simulated.status == Status.PASS, simulated.details
    assert simulated.summary == "1 task(s) unchanged against locked rknn-sim/rk3588 and onnxruntime today"
    checks = simulated.metrics.checks  # type: ignore[union-attr]
    comparison = checks[1].outcome.comparison
    assert isinstance(comparison, PostprocessComparison) and len(comparison.samples) == 4
    assert all(sample.numbers["p_change"] <= 0.1 for sample in comparison.samples)
