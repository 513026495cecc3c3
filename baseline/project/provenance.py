"""Where a model came from: the exporter script and the git state of its repository."""

from __future__ import annotations

from pathlib import Path

from baseline.models.intent import ExporterSpec
from baseline.models.lock import ExporterPin, FilePin
from baseline.project.git import script_facts


def exporter_pin(
    spec: ExporterSpec, script: FilePin | None, script_path: Path | None, root: Path
) -> ExporterPin:
    """Pin the exporter; git facts are recorded when the script lives in a git work tree.

    The commit is the last one that touched the script, not HEAD: committing the lock
    itself must not make the lock stale.
    """
    git_facts = script_facts(script_path, root) if script_path is not None else {}
    return ExporterPin(script=script, command=spec.command, **git_facts)
