from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import git

from baseline.locker import pin_file
from baseline.models.intent import ExporterSpec
from baseline.project.git import NO_GIT, configured_author, tracked_files
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


# Every git question goes through `baseline.project.git` (issue 30): the same answers as before,
# and the one asked on every verify (which cache files are committed) imports no GitPython.


def test_tracked_files_lists_what_git_tracks_under_a_folder(tmp_path: Path) -> None:
    repo = git.Repo.init(tmp_path)
    (tmp_path / "cache").mkdir()
    for name in ("cache/a.json", "cache/b.json", "elsewhere.txt"):
        (tmp_path / name).write_text("{}")
    repo.index.add(["cache/a.json", "elsewhere.txt"])
    repo.index.commit("commit a cache entry")
    assert tracked_files(tmp_path, Path("cache")) == ["cache/a.json"]
    assert tracked_files(tmp_path / "cache", Path(".")) == [], "not the work tree's root: no .git there"


def test_tracked_files_imports_no_gitpython(tmp_path: Path) -> None:
    git.Repo.init(tmp_path)
    probe = (
        "import sys; from pathlib import Path; from baseline.project.git import tracked_files\n"
        f"tracked_files(Path({str(tmp_path)!r}), Path('.'))\n"
        "print('git' in sys.modules)"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False"


def test_without_a_git_executable_each_question_has_its_answer(tmp_path: Path) -> None:
    """GitPython refuses to import without git: provenance records the gap, the author falls
    back, the cache check finds nothing committed, a revision is a one-line error."""
    repo = git.Repo.init(tmp_path)
    (tmp_path / "export.py").write_text("")
    repo.index.add(["export.py"])
    repo.index.commit("exporter")
    probe = (
        "from pathlib import Path; from baseline.errors import ConfigError\n"
        "from baseline.project import git as g\n"
        f"root = Path({str(tmp_path)!r})\n"
        "print(g.script_facts(root / 'export.py', root))\n"
        "print(g.configured_author(root), g.tracked_files(root, Path('.')))\n"
        "try:\n    g.text_at_revision(root / 'export.py', 'HEAD')\n"
        "except ConfigError as error:\n    print(error)\n"
    )
    env = {**os.environ, "PATH": str(tmp_path / "no-bin")}
    env.pop("GIT_PYTHON_GIT_EXECUTABLE", None)
    run = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    facts, author, revision = run.stdout.splitlines()
    assert facts == str({"git_gap": NO_GIT})
    assert author == "None []"
    assert revision.endswith(
        "cannot read it at git revision 'HEAD': git is not installed; "
        "install git, or pass the older lock as a file"
    )


def test_the_author_is_the_repository_s_configured_user(tmp_path: Path) -> None:
    repo = git.Repo.init(tmp_path / "repo")
    with repo.config_writer() as config:
        config.set_value("user", "name", "Ada Lovelace")
        config.set_value("user", "email", "ada@example.com")
    (tmp_path / "repo" / "sub").mkdir()
    assert configured_author(tmp_path / "repo" / "sub") == "Ada Lovelace <ada@example.com>"
    (tmp_path / "outside").mkdir()
    assert configured_author(tmp_path / "outside") is None
