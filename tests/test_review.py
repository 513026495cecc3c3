"""Change review: lock --check, diff, accept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baseline.project.lockfile import load_lock
from tests.conftest import LOCK, retrain

pytestmark = pytest.mark.toolkit  # every test here drives the real toolkit


def test_lock_check_passes_when_nothing_changed_and_writes_nothing(demo: Path, cli) -> None:
    before = (demo / LOCK).read_bytes()
    code, out, _ = cli(demo, "lock", "--lock", str(LOCK), "--check")
    assert code == 0 and "up to date" in out and (demo / LOCK).read_bytes() == before


def test_lock_check_fails_when_the_lock_would_change(demo: Path, cli) -> None:
    retrain(demo)
    before = (demo / LOCK).read_bytes()
    code, out, _ = cli(demo, "lock", "--lock", str(LOCK), "--check")
    assert code == 1 and "would change" in out and "classifier: onnx.sha256" in out
    assert (demo / LOCK).read_bytes() == before, "--check writes nothing"


def test_diff_between_two_locks(demo: Path, cli, tmp_path: Path) -> None:
    old = tmp_path / "old.lock"
    old.write_bytes((demo / LOCK).read_bytes())
    retrain(demo)
    assert cli(demo, "lock", "--lock", str(LOCK))[0] == 0
    code, out, _ = cli(demo, "diff", str(old), str(LOCK), "--format", "json")
    changes = json.loads(out)["changes"]
    keys = {(c["scope"], c["key"]) for c in changes}
    assert code == 0 and ("classifier", "onnx.sha256") in keys
    assert ("classifier", "outputs.onnxruntime.logits.mean") in keys
    assert any(
        key.startswith("conversions.rk3588.fingerprint") for scope, key in keys if scope == "classifier"
    )
    assert not any(scope == "detector" for scope, _ in keys)


def test_accept_records_who_why_and_what(demo: Path, cli) -> None:
    retrain(demo)
    code, out, _ = cli(demo, "accept", "classifier", "--lock", str(LOCK), "--reason", "new training run")
    assert code == 0 and "accepted classifier" in out
    entry = load_lock(demo / LOCK).audit[-1]
    assert entry.model == "classifier" and entry.reason == "new training run" and entry.author
    assert any(change.startswith("classifier: onnx.sha256:") for change in entry.changes)
    assert any("outputs.onnxruntime.logits.mean" in change for change in entry.changes)
    assert cli(demo, "verify", "--lock", str(LOCK))[0] == 0
    assert cli(demo, "lock", "--lock", str(LOCK))[0] == 0
    assert load_lock(demo / LOCK).audit[-1] == entry, "a relock keeps the audit trail"


def test_accept_needs_a_reason_and_a_known_model(demo: Path, cli) -> None:
    assert cli(demo, "accept", "classifier", "--lock", str(LOCK), "--reason", " ")[0] == 2
    code, _, err = cli(demo, "accept", "resnet", "--lock", str(LOCK), "--reason", "x")
    assert code == 2 and "no model named 'resnet'" in err


def test_lock_check_ignores_other_library_patch_releases_and_lock_keeps_the_bytes(demo: Path, cli) -> None:
    """A second machine with other onnxruntime / numpy / torch releases that reproduce the results."""
    text = (demo / LOCK).read_text()
    for library in ("onnxruntime", "numpy", "torch"):
        text = text.replace(f'{library} = "', f'{library} = "0.0.')  # what "another machine" locked with
    (demo / LOCK).write_text(text)
    code, out, _ = cli(demo, "lock", "--lock", str(LOCK), "--check")
    assert (code, out.strip()) == (0, f"{LOCK}: up to date")
    assert cli(demo, "lock", "--lock", str(LOCK))[0] == 0
    assert (demo / LOCK).read_text() == text, "information-only versions do not rewrite the lock"


def test_lock_check_names_a_changed_exporter_script(demo: Path, cli) -> None:
    with (demo / "fixtures" / "make_models.py").open("a") as script:
        script.write("# a changed export\n")
    code, out, err = cli(demo, "lock", "--lock", str(LOCK), "--check")
    assert code == 1 and "would change (" in out and "(0 values" not in out
    assert "classifier: exporter.script.sha256" in out
    assert "… locking 4 models: classifier, detector, nms_head, overflow" in err
    assert "… [4/4] lock " in err, "one progress line per finished model"


def test_signoff_of_a_failing_project_exits_1_and_still_writes_the_sheet(demo: Path, cli) -> None:
    retrain(demo)
    code, out, _ = cli(demo, "signoff", "--lock", str(LOCK))
    assert code == 1 and "**FAILED**" in out
