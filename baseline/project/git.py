"""Every question baseline asks git, in one place.

GitPython answers them (the design's choice), imported inside each function: it costs
0.06-0.12 s to import, more than a fifth of a cached verify, and it refuses to import at all
when no git executable is found (then each question has its own answer, below).

One question is asked on every verify, cached or not: which files of the cache folder are
committed (`tracked_files`). It runs the git executable directly, as GitPython itself would
(`repo.git.ls_files` is a subprocess too), so a cached verify imports no GitPython.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from baseline.errors import ConfigError

NO_GIT = "git is not installed, so the exporter's commit is not recorded; install git and lock again"


def tracked_files(work_tree: Path, folder: Path) -> list[str]:
    """The files under `folder` (inside `work_tree`) that git tracks, as git names them. Empty
    when `work_tree` is not a git checkout, git is not installed, or git fails."""
    git = shutil.which("git")
    if git is None or not (work_tree / ".git").exists():
        return []
    try:
        listed = subprocess.run(
            [git, "ls-files", "-z", "--", folder.as_posix() or "."],
            cwd=work_tree,
            capture_output=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [name for name in listed.decode(errors="replace").split("\0") if name]


def script_facts(script_path: Path, root: Path) -> dict[str, object]:
    """`repository`, `commit` (the last one that touched the script) and `dirty` of the git work
    tree holding `script_path`; `{}` outside one; `{"git_gap": why}` when git could not say.

    Provenance is never worth failing a lock over, but its absence is recorded (`git_gap`) and
    reported: a lock made without git must not pass for one whose exporter had no repository.
    """
    try:
        import git
    except ImportError:  # GitPython refuses to import without a git executable
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
    except git.GitCommandNotFound:  # git went missing after GitPython was imported
        return {"git_gap": NO_GIT}
    except git.GitCommandError as error:  # a broken repository, a full disk, a file-size limit
        return {"git_gap": f"git failed ({git_error_line(error)}), so the exporter's commit is not recorded"}


def git_error_line(error: Exception) -> str:
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


def configured_author(where: Path) -> str | None:
    """`Name <email>` from the git config of the repository holding `where`; None without git,
    a repository or a configured name."""
    try:
        import git

        with git.Repo(where, search_parent_directories=True) as repo:
            reader = repo.config_reader()
            name = reader.get_value("user", "name", "")
            email = reader.get_value("user", "email", "")
    except Exception:  # no git, no repository, an unreadable config: the caller falls back
        return None
    if not name:
        return None
    return f"{name} <{email}>" if email else str(name)


def text_at_revision(path: Path, revision: str) -> str:
    """The text of `path` as it was at the git `revision`, or a one-line ConfigError. The caller
    checks that `revision` is a name, not an option."""
    try:
        import git
    except ImportError:  # GitPython refuses to import when no git executable is found
        raise ConfigError(
            f"{path}: cannot read it at git revision {revision!r}: git is not installed; "
            "install git, or pass the older lock as a file"
        ) from None
    try:
        with git.Repo(path.resolve().parent, search_parent_directories=True) as repo:
            relative = path.resolve().relative_to(Path(repo.working_tree_dir or ".").resolve()).as_posix()
            # --end-of-options: whatever the revision says, git reads it as a revision
            text: str = repo.git.show("--end-of-options", f"{revision}:{relative}")
    except (
        git.GitCommandError,
        git.GitCommandNotFound,
        git.InvalidGitRepositoryError,
        git.NoSuchPathError,
        ValueError,
    ) as error:
        first = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        raise ConfigError(f"{path}: cannot read it at git revision {revision!r} ({first})") from None
    return text
