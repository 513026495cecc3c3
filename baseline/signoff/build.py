"""Gathering the sign-off: the pinned versions and hashes, the deciding number of each gate,
the changes since the previous lock and the checks left to a person."""

from __future__ import annotations

from pathlib import PurePosixPath

from baseline.backends import capabilities
from baseline.models.labels import metric_text
from baseline.models.lock import ConversionPin, Lock, ModelLock
from baseline.models.results import GateResult, Report, Status
from baseline.signoff.changes import lock_changes
from baseline.signoff.records import ConversionRecord, GateCheck, ModelRecord, Signoff


def build_signoff(lock: Lock, report: Report, previous: Lock | None) -> Signoff:
    """The sign-off of `lock`, verified as `report`, against the lock it replaces (if any)."""
    changes = lock_changes(previous, lock) if previous is not None else None
    return Signoff(
        lock=report.lock,
        passed=report.passed,
        counts=report.counts(),
        host=lock.toolchain,
        toolkits=lock.toolkits,
        boards=lock.boards,
        models=[_model_record(model) for model in lock.models],
        gates=[_gate_check(lock, result) for result in report.results],
        changes=changes,
        audit=lock.audit,
        manual=_manual_items(lock, report, bool(changes)),
    )


def _model_record(model: ModelLock) -> ModelRecord:
    return ModelRecord(
        name=model.name,
        onnx=model.onnx.path,
        onnx_sha256=model.onnx.sha256,
        opsets=model.onnx.opsets,
        toolkit=model.toolkit.version,
        exporter_commit=model.exporter.commit,
        exporter_dirty=model.exporter.dirty,
        conversions=[_conversion_record(pin) for pin in model.conversions],
        measured=tuple(model.measured.lines()) if model.measured is not None else (),
        exporter_script=model.exporter.script.path if model.exporter.script is not None else None,
        exporter_command=model.exporter.command,
        exporter_gap=model.exporter.git_gap,
        accuracy=tuple(accuracy_lines(model)),
    )


def accuracy_lines(model: ModelLock) -> list[str]:
    """Per labelled task and backend, the locked accuracy against its labels: the numbers that
    stand in for "accuracy on the real validation set" once a task names ground truth."""
    lines = []
    for score in model.label_scores:
        task = model.tasks[score.task]
        labels = getattr(task, "labels", None)
        source = f"{labels.path}, " if labels is not None else ""
        numbers = ", ".join(metric_text(metric, value) for metric, value in score.metrics.items())
        lines.append(
            f"tasks[{score.task}] {task.kind} on {score.where}: {numbers} "
            f"({source}{score.samples} labelled sample(s))"
        )
    return lines


MAX_NAMED_FILES = 8
"""Image fixtures named one by one in the sign-off; beyond this, how many more."""


def fixtures_used(model: ModelLock) -> str:
    """What the gates ran on, as the lock pins it: photographs, a user file or random samples."""
    fixtures = model.fixtures
    if fixtures.images is not None:
        names = [PurePosixPath(pin.path).name for pin in fixtures.images.files]
        listed = ", ".join(names[:MAX_NAMED_FILES])
        if len(names) > MAX_NAMED_FILES:
            listed += f" and {len(names) - MAX_NAMED_FILES} more"
        return f"{len(names)} photograph(s): {listed} (fixtures.images)"
    if fixtures.source is not None:
        return f"{fixtures.samples} sample(s) from {fixtures.source.path} (fixtures.path)"
    return f"{fixtures.samples} random sample(s), seed {fixtures.seed}"


def _conversion_record(pin: ConversionPin) -> ConversionRecord:
    return ConversionRecord(
        target=pin.target,
        platform=pin.platform,
        quantization=_quantization(pin),
        artifact=pin.artifact.path,
        sha256=pin.artifact.sha256,
        fingerprint=pin.metadata.fingerprint,
        toolkit=pin.metadata.toolkit_version,
        compiler=pin.metadata.compiler_version,
    )


def _quantization(pin: ConversionPin) -> str:
    q = pin.quantization
    return "fp16" if q is None else f"{q.dtype} / {q.algorithm} / {q.method}"


def _gate_check(lock: Lock, result: GateResult) -> GateCheck:
    return GateCheck(
        model=result.model,
        gate=result.gate,
        where=result.where,
        status=result.status,
        summary=result.summary,
        headline=result.metrics.headline() if result.metrics is not None else None,
    )


def _manual_items(lock: Lock, report: Report, changed: bool) -> list[str]:
    items = _board_items(lock, report)
    for model in lock.models:
        if not model.label_scores:  # with labels, the accuracy is a number above, not an item
            items.append(
                f"{model.name}: accuracy on the real validation set (the gates used {fixtures_used(model)})"
            )
        if model.exporter.dirty:
            items.append(f"{model.name}: commit the export script (it had uncommitted changes when locked)")
    expected = [f"{r.model} {r.gate} {r.where}" for r in report.results if r.status == Status.XFAIL]
    if expected:
        items.append(f"the expected failures are still acceptable: {', '.join(expected)}")
    if changed:
        items.append("every change since the previous lock is intended")
    items.append("sign-off by the model owner: name, date")
    items.append("sign-off by whoever ships the board image: name, date")
    return items


def _board_items(lock: Lock, report: Report) -> list[str]:
    """One item per platform with a pinned `.rknn` that no board backend passed on in this report."""
    on_board = {(r.model, r.target) for r in report.results if _on_board(r) and r.status == Status.PASS}
    platforms: dict[str, list[str]] = {}
    for model in lock.models:
        for pin in model.conversions:
            if (model.name, pin.target) not in on_board:
                names = platforms.setdefault(pin.platform, [])
                names += [] if model.name in names else [model.name]
    return [
        f"run {', '.join(names)} on a physical {platform} board (the gates above ran on the simulator)"
        for platform, names in platforms.items()
    ]


def _on_board(result: GateResult) -> bool:
    return result.backend is not None and capabilities(result.backend).needs_board
