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


NO_GIT = "git is not installed, so the exporter's commit is not recorded; install git and lock again"


def _git_facts(script_path: Path, root: Path) -> dict[str, object]:
    # provenance is never worth failing a lock over, but its absence is recorded (`git_gap`) and
    # reported: a lock made without git must not pass for one whose exporter had no repository
    try:
        import git
    except ImportError:  # gitpython refuses to import without a git executable
        return {"git_gap": NO_GIT}
    try:
        repo = git.Repo(script_path.parent, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return {}
    except git.GitCommandNotFound:
        return {"git_gap": NO_GIT}
    try:
        with repo:
            return _repository_facts(repo, script_path, root)
    except git.GitCommandNotFound:  # git went missing after gitpython was imported
        return {"git_gap": NO_GIT}
    except git.GitCommandError as error:  # a broken repository, a full disk, a file-size limit
        return {"git_gap": f"git failed ({_git_error(error)}), so the exporter's commit is not recorded"}


def _git_error(error: Exception) -> str:
    """git's own first line (`fatal: ...`), bounded: it ends up in the lock and in CI logs."""
    stderr = getattr(error, "stderr", "") or ""
    text = stderr if isinstance(stderr, str) else stderr.decode("utf-8", "replace")
    lines = [line.strip().removeprefix("stderr:").strip(" '") for line in text.splitlines() if line.strip()]
    first = next((line for line in lines if line), str(getattr(error, "status", "error")))
    return first[:200]


def _repository_facts(repo: object, script_path: Path, root: Path) -> dict[str, object]:
    import git

    assert isinstance(repo, git.Repo)
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
