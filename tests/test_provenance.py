from __future__ import annotations

from pathlib import Path

import git

from baseline.locker import pin_file
from baseline.models.intent import ExporterSpec
from baseline.project.layout import Project
from baseline.project.provenance import exporter_pin


def test_commit_is_the_last_one_touching_the_script(tmp_path: Path) -> None:
    repo = git.Repo.init(tmp_path)
    script = tmp_path / "export.py"
    script.write_text("print('export')\n")
    repo.index.add(["export.py"])
    first = repo.index.commit("add exporter").hexsha
    (tmp_path / "other.txt").write_text("unrelated")
    repo.index.add(["other.txt"])
    repo.index.commit("unrelated change")
    project = Project.locate(tmp_path / "baseline.lock", root=tmp_path)
    spec = ExporterSpec(script="export.py", command="python export.py")
    pin = exporter_pin(spec, pin_file(project, script), script, tmp_path)
    assert pin.commit == first and pin.dirty is False and pin.repository == "."
    assert pin.command == "python export.py" and pin.script is not None and pin.script.path == "export.py"
    script.write_text("print('changed')\n")
    assert exporter_pin(spec, None, script, tmp_path).dirty is True


def test_script_outside_git_has_no_git_facts(tmp_path: Path) -> None:
    script = tmp_path / "export.py"
    script.write_text("")
    pin = exporter_pin(ExporterSpec(script="export.py"), None, script, tmp_path)
    assert pin.commit is None and pin.repository is None


def test_a_failing_git_is_a_recorded_gap_not_a_traceback(tmp_path: Path) -> None:
    """git fails for reasons of its own (a damaged index here; a file-size limit or a full disk in
    CI): the lock records why the exporter's commit is missing, in git's own first line."""
    repo = git.Repo.init(tmp_path)
    script = tmp_path / "export.py"
    script.write_text("print('export')\n")
    repo.index.add(["export.py"])
    repo.index.commit("add exporter")
    (tmp_path / ".git" / "index").write_bytes(b"DIRC garbage")
    pin = exporter_pin(ExporterSpec(script="export.py"), None, script, tmp_path)
    assert pin.commit is None and pin.git_gap is not None
    assert pin.git_gap.startswith("git failed (") and "index" in pin.git_gap, pin.git_gap
    assert pin.git_gap.endswith("so the exporter's commit is not recorded") and "\n" not in pin.git_gap
