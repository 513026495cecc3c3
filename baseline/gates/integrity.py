"""Integrity gate: do the files on disk still match the hashes in the lock?"""

from __future__ import annotations

from baseline.gates.context import GateJob, VerifyContext
from baseline.models.lock import FilePin, ModelLock
from baseline.models.results import GateResult, Status

NAME = "integrity"


def jobs(model: ModelLock) -> list[GateJob]:
    return [GateJob(NAME)]


def pinned_files(model: ModelLock) -> list[tuple[str, FilePin]]:
    """Every file the lock pins for a model, with the lock key it sits under."""
    files: list[tuple[str, FilePin]] = [("onnx", model.onnx), ("fixtures", model.fixtures)]
    if model.fixtures.source is not None:
        files.append(("fixtures.source", model.fixtures.source))
    if model.exporter.script is not None:
        files.append(("exporter.script", model.exporter.script))
    files += [(f"conversions.{pin.target}.artifact", pin.artifact) for pin in model.conversions]
    files += [(f"references.{ref.backend}.{ref.target or 'host'}", ref.tensors) for ref in model.references]
    return files


def check(model: ModelLock, job: GateJob, ctx: VerifyContext) -> GateResult:
    files = pinned_files(model)
    changed = []
    for key, pin in files:
        actual = ctx.hashes.sha256(ctx.project.pinned(pin, f"models.{model.name}.{key}"))
        if actual != pin.sha256:
            changed.append(
                f"{pin.path} ({key}): sha256 {actual[:12]}… differs from the locked {pin.sha256[:12]}…"
            )
    metrics = {"files": len(files), "changed": len(changed)}
    if not changed:
        return GateResult(
            model=model.name,
            gate=NAME,
            status=Status.PASS,
            metrics=metrics,
            summary=f"{len(files)} files match the lock",
        )
    return GateResult(
        model=model.name,
        gate=NAME,
        status=Status.FAIL,
        metrics=metrics,
        details=changed,
        summary=f"{len(changed)} of {len(files)} files changed: "
        + ", ".join(line.split(" ", 1)[0] for line in changed),
        hint="if the change is intended, run `baseline lock` to pin the new files",
    )
