"""Integrity gate: do the files on disk still match the hashes in the lock?"""

from __future__ import annotations

from baseline.gates import advice
from baseline.gates.contract import GateInputs, GateJob, Reads, pinned_files
from baseline.models.lock import ModelLock
from baseline.models.results import GateMetrics, GateResult, Headline
from baseline.verification.cache import SIZE_MISMATCH

NAME = "integrity"


class IntegrityMetrics(GateMetrics):
    gate = NAME

    files: int
    changed: int

    def headline(self) -> Headline:
        return Headline("changed files", float(self.changed), 0.0, "≤")


def jobs(model: ModelLock) -> list[GateJob]:
    return [GateJob(NAME)]


def reads(model: ModelLock, job: GateJob) -> Reads:
    return Reads(files=frozenset(pinned_files(model)))


def check(job: GateJob, inputs: GateInputs) -> GateResult:
    files = pinned_files(inputs.model)
    changed, keys = [], []
    for key, pin in files.items():
        actual = inputs.sha256(key)
        if actual.startswith(SIZE_MISMATCH):  # not hashed: a size that differs says enough
            size = actual.removeprefix(SIZE_MISMATCH)
            changed.append(f"{pin.path} ({key}): {size} bytes, the lock pins {pin.size}")
            keys.append(key)
        elif actual != pin.sha256:
            changed.append(
                f"{pin.path} ({key}): sha256 {actual[:12]}… differs from the locked {pin.sha256[:12]}…"
            )
            keys.append(key)
    metrics = IntegrityMetrics(files=len(files), changed=len(changed))
    if not changed:
        return inputs.result(metrics, summary=f"{len(files)} files match the lock")
    return inputs.failed(
        f"{len(changed)} of {len(files)} files changed: "
        + ", ".join(line.split(" ", 1)[0] for line in changed),
        details=changed,
        hint=advice.changed_model(inputs.model)
        if advice.ONNX_KEY in keys
        else "if the change is intended, run `baseline lock` to pin the new files",
        metrics=metrics,
    )
