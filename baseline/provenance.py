"""Where a model came from: the exporter script and the git state of its repository."""

from __future__ import annotations

from pathlib import Path

from baseline.models.intent import ExporterSpec
from baseline.models.lock import ExporterPin, FilePin


def exporter_pin(
    spec: ExporterSpec, script: FilePin | None, script_path: Path | None, root: Path
) -> ExporterPin:
    """Pin the exporter; git facts are recorded when the script lives in a git work tree.

    The commit is the last one that touched the script, not HEAD: committing the lock
    itself must not make the lock stale.
    """
    git_facts = _git_facts(script_path, root) if script_path is not None else {}
    return ExporterPin(script=script, command=spec.command, **git_facts)


def _git_facts(script_path: Path, root: Path) -> dict[str, object]:
    try:
        import git
    except ImportError:  # gitpython needs a git executable; provenance then stays partial
        return {}
    try:
        repo = git.Repo(script_path.parent, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, git.GitCommandNotFound):
        return {}
    with repo:
        work_tree = Path(repo.working_tree_dir or script_path.parent).resolve()
        relative_script = script_path.resolve().relative_to(work_tree).as_posix()
        commit = _last_commit(repo, relative_script)
        dirty = commit is None or bool(repo.git.status("--porcelain", "--", relative_script))
    try:
        repository = work_tree.relative_to(root.resolve()).as_posix()
    except ValueError:
        repository = None
    return {"repository": repository, "commit": commit, "dirty": dirty}


def _last_commit(repo: object, relative_script: str) -> str | None:
    import git

    assert isinstance(repo, git.Repo)
    try:
        return repo.git.log("-1", "--format=%H", "--", relative_script) or None
    except git.GitCommandError:  # no commits yet
        return None
