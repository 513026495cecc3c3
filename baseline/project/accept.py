"""`baseline accept`: take an intended change into the lock, with an audit entry saying who and why."""

from __future__ import annotations

import getpass
from datetime import datetime, timezone

from baseline.errors import ConfigError
from baseline.locker import LockOutcome, write_new_lock
from baseline.locker.memo import LockMemo
from baseline.models.lock import AuditEntry
from baseline.project.diff import diff_models
from baseline.project.git import configured_author
from baseline.project.layout import Project
from baseline.project.lockfile import load_lock, write_lock
from baseline.toolchain.provision import Progress


def accept_change(project: Project, model: str, reason: str, progress: Progress | None = None) -> AuditEntry:
    """Relock, then record what changed for `model` (old → new hashes and statistics)."""
    if not reason.strip():
        raise ConfigError('accept needs a reason: --reason "why this change is intended"')
    with project.exclusive():
        return _accept(project, model, reason, progress)


def _accept(project: Project, model: str, reason: str, progress: Progress | None) -> AuditEntry:
    old = load_lock(project.lock_path)
    if old.model(model) is None:
        raise ConfigError(f"{project.lock_path}: no model named {model!r}")
    # the other models, and every run whose inputs did not change, are answered from the cache
    outcome: LockOutcome = write_new_lock(project, progress, memo=LockMemo.open(project))
    new_model = outcome.lock.model(model)
    old_model = old.model(model)
    assert old_model is not None
    changes = [change.line() for change in diff_models(old_model, new_model)] if new_model else ["removed"]
    entry = AuditEntry(
        model=model, author=author(project), date=_now(), reason=reason.strip(), changes=changes
    )
    write_lock(project.lock_path, outcome.lock.model_copy(update={"audit": [*outcome.lock.audit, entry]}))
    return entry


def author(project: Project) -> str:
    """`Name <email>` from git config, else the login name."""
    return configured_author(project.root) or getpass.getuser()


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
