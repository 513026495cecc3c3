"""Artifact gate: is a fresh conversion the same model as the one pinned in the lock?

Raw `.rknn` bytes differ between identical conversions, so the comparison uses the
fingerprint (volatile bytes masked, see rknn_file) and the I/O contract the file declares:
names, dtypes, layouts and shapes. Quantization silently turns float32 I/O into int8, and
optional outputs can vanish from a built model; both show up here. A build with no stable
fingerprint (a platform whose reconversions differ, see `rknn_file.fingerprint_gap`) is judged on
its I/O contract alone, and the summary says so: never a false alarm on volatile bytes.
"""

from __future__ import annotations

import contextlib

from baseline.backends import converter
from baseline.backends.base import graph_outputs
from baseline.errors import BaselineError
from baseline.files.rknn_file import fingerprint_gap, read_rknn
from baseline.gates import advice
from baseline.gates.contract import NOT_BUILT, GateInputs, GateJob, Reads
from baseline.models.base import replaced
from baseline.models.lock import ConversionPin, ModelLock, RknnMetadata, RknnTensor
from baseline.models.results import GateMetrics, GateResult

NAME = "artifact"


class ArtifactMetrics(GateMetrics):
    gate = NAME

    fingerprint: str | None
    locked_fingerprint: str | None
    toolkit: str
    compiler: str | None


def jobs(model: ModelLock) -> list[GateJob]:
    """A fresh conversion by the converting backend, per pinned `.rknn`."""
    backend = converter(model.backends)
    if backend is None:
        return []
    return [GateJob(NAME, backend=backend, target=pin.target) for pin in model.conversions]


def reads(model: ModelLock, job: GateJob) -> Reads:
    """The fresh build, the pinned metadata (in the lock entry) and the pinned `.rknn`, whose
    fingerprint is read again when the lock's differs (the converting run reads it already)."""
    assert job.backend is not None
    return Reads(
        files=frozenset({f"conversions.{job.target}.artifact", advice.ONNX_KEY}),
        runs=frozenset({(job.backend, job.target)}),
    )


def check(job: GateJob, inputs: GateInputs) -> GateResult:
    assert job.backend is not None and job.target is not None
    model = inputs.model
    pin = model.conversion(job.target)
    assert pin is not None
    build = inputs.run(job.backend, job.target).build
    if build is None or build.metadata is None:
        return inputs.skipped(NOT_BUILT)
    fresh = build.metadata
    locked = _locked_metadata(inputs, pin, fresh)
    differences, dropped = build_differences(model, locked, fresh)
    metrics = ArtifactMetrics(
        fingerprint=fresh.fingerprint,
        locked_fingerprint=locked.fingerprint,
        toolkit=fresh.toolkit_version,
        compiler=fresh.compiler_version,
    )
    if differences:
        return inputs.failed(
            f"{len(differences)} difference(s) from the locked .rknn; first: {differences[0]}",
            details=differences,
            hint=advice.changed_artifact(model, advice.model_changed(inputs)),
            metrics=metrics,
        )
    summary = _match_summary(locked, fresh, _varies(model, job.target))
    if dropped:
        summary += f"; {len(dropped)} ONNX output(s) not in the built model, as when locked: {dropped[0]}"
    return inputs.result(metrics, summary=summary)


def _locked_metadata(inputs: GateInputs, pin: ConversionPin, fresh: RknnMetadata) -> RknnMetadata:
    """The pinned build's metadata, with its fingerprint read again from the pinned `.rknn` where
    the lock's differs from the fresh one: a lock written by an older baseline holds a fingerprint
    with fewer volatile bytes masked, and the pinned file (its bytes checked against the lock)
    is the same model by today's masking. Without the file, or with other bytes, the lock's
    fingerprint stands (integrity reports the file)."""
    stored = pin.metadata
    if stored.fingerprint is None or fresh.fingerprint is None or stored.fingerprint == fresh.fingerprint:
        return stored
    key = f"conversions.{pin.target}.artifact"
    with contextlib.suppress(BaselineError, OSError):
        path = inputs.path(key)
        if path.is_file() and inputs.sha256(key) == pin.artifact.sha256:
            return replaced(stored, fingerprint=read_rknn(path).fingerprint)
    return stored


def build_differences(
    model: ModelLock, locked: RknnMetadata, fresh: RknnMetadata
) -> tuple[list[str], list[str]]:
    """How `fresh` differs from the locked build, and the ONNX outputs missing from both: an
    output the toolkit already left out when the model was locked is how this model builds (said
    in the summary); one it drops only now is a difference."""
    dropped = _missing_outputs(model, fresh)
    already = set(_missing_outputs(model, locked))
    newly = [line for line in dropped if line not in already]
    return contract_differences(locked, fresh) + newly, [line for line in dropped if line in already]


def _varies(model: ModelLock, target: str) -> bool:
    """Whether `baseline lock` saw two conversions of the unchanged model differ (see remeasure)."""
    return model.measured is not None and target in model.measured.varying_fingerprints


def _match_summary(locked: RknnMetadata, fresh: RknnMetadata, varies: bool = False) -> str:
    io = f"{len(fresh.inputs)} inputs, {len(fresh.outputs)} outputs, toolkit {fresh.toolkit_version}"
    if fresh.fingerprint is not None and locked.fingerprint is not None:
        return f"reconversion matches the lock (fingerprint {fresh.fingerprint[:12]}…, {io})"
    if varies:
        return (
            f"I/O contract matches the lock ({io}); weights judged by the outputs: two conversions "
            "of the unchanged model gave different fingerprints when it was locked"
        )
    gap = fingerprint_gap(fresh) or "the lock holds no fingerprint for it; run `baseline lock` to pin one"
    return f"I/O contract matches the lock ({io}); weights not compared: {gap}"


def contract_differences(locked: RknnMetadata, fresh: RknnMetadata) -> list[str]:
    """Every way `fresh` differs from `locked`, one readable line each."""
    lines = [
        f"{field}: locked {old!r} → now {new!r}"
        for field in ("format_version", "toolkit_version", "compiler_version", "target_platforms")
        if (old := getattr(locked, field)) != (new := getattr(fresh, field))
    ]
    lines += _tensor_differences("input", locked.inputs, fresh.inputs)
    lines += _tensor_differences("output", locked.outputs, fresh.outputs)
    # a missing fingerprint (none is stable for the build) is not a difference
    comparable = locked.fingerprint is not None and fresh.fingerprint is not None
    if not lines and comparable and locked.fingerprint != fresh.fingerprint:
        lines.append(
            f"fingerprint: locked {(locked.fingerprint or '')[:16]}… → now "
            f"{(fresh.fingerprint or '')[:16]}… (same I/O contract, different weights or graph)"
        )
    return lines


def _tensor_differences(kind: str, locked: list[RknnTensor], fresh: list[RknnTensor]) -> list[str]:
    old = {tensor.name: tensor for tensor in locked}
    new = {tensor.name: tensor for tensor in fresh}
    lines = [f"{kind} {name!r} disappeared" for name in old if name not in new]
    lines += [f"{kind} {name!r} is new" for name in new if name not in old]
    for name in old.keys() & new.keys():
        for field in ("dtype", "layout", "shape"):
            if getattr(old[name], field) != getattr(new[name], field):
                lines.append(
                    f"{kind} {name!r} {field}: locked {getattr(old[name], field)} → "
                    f"now {getattr(new[name], field)}"
                )
    return lines


def _missing_outputs(model: ModelLock, fresh: RknnMetadata) -> list[str]:
    built = {tensor.name for tensor in fresh.outputs}
    # a graph cut (`load_onnx(outputs=...)`) asks for other tensors: the graph's outputs it leaves
    # out are the intent's choice, not the toolkit dropping them
    wanted = graph_outputs(model.targets) or [spec.name for spec in model.onnx.outputs]
    missing = [name for name in wanted if built and name not in built]
    return [f"ONNX output {name!r} is missing from the built model" for name in missing]
