from __future__ import annotations

from pathlib import Path

import git

from baseline.locker import pin_file
from baseline.models.intent import ExporterSpec
from baseline.project import Project
from baseline.provenance import exporter_pin


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
