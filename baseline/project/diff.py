"""What changed between two locks: versions, hashes, opsets, artifact metadata and output statistics."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from baseline.models.lock import Lock, ModelLock, ReferencePin

DIFF_STATS = ("min", "max", "mean", "std", "p01", "p50", "p99", "nan", "inf")


@dataclass(frozen=True)
class LockDifference:
    """One value that differs: `old` or `new` is None when the thing was added or removed."""

    scope: str  # "lock" or a model name
    key: str
    """The dotted path, for people: `outputs.rknn-sim/rk3588.logits.mean`."""
    old: Any
    new: Any
    path: tuple[str, ...] = ()
    """The same path as parts, for code (output names may contain dots)."""
    information: bool = False
    """A library version on the host or in a toolkit environment: shown, never makes a lock stale."""

    def line(self) -> str:
        note = " (information)" if self.information else ""
        return f"{self.scope}: {self.key}: {_show(self.old)} → {_show(self.new)}{note}"


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, str) and len(value) == 64:
        return value[:12] + "…"
    return str(value)


def diff_locks(old: Lock, new: Lock) -> list[LockDifference]:
    """Every difference that matters for review, lock-wide first, then per model."""
    changes = _information(
        _flat_changes("lock", ("toolchain",), old.toolchain.model_dump(), new.toolchain.model_dump())
    )
    old_kits = {k.version: k.model_dump() for k in old.toolkits}
    new_kits = {k.version: k.model_dump() for k in new.toolkits}
    kit_changes = _flat_changes("lock", ("toolkits",), old_kits, new_kits)
    changes += [c for c in kit_changes if not _is_information(c)] + _information(
        [c for c in kit_changes if _is_information(c)]
    )
    old_models = {m.name: m for m in old.models}
    new_models = {m.name: m for m in new.models}
    for name in sorted(old_models.keys() | new_models.keys()):
        if name not in new_models:
            changes.append(LockDifference(name, "model", "present", None, ("model",)))
        elif name not in old_models:
            changes.append(LockDifference(name, "model", None, "added", ("model",)))
        else:
            changes += diff_models(old_models[name], new_models[name])
    return changes


def decisive(changes: list[LockDifference]) -> list[LockDifference]:
    """The changes that make a lock stale (`diff --exit-code`, `lock --check`)."""
    return [change for change in changes if not change.information]


def _is_information(change: LockDifference) -> bool:
    """`toolkits.<version>.python` and `.packages.*`; the toolkit's version and commit decide."""
    return len(change.path) >= 3 and change.path[2] in {"python", "packages"}


def _information(changes: list[LockDifference]) -> list[LockDifference]:
    return [replace(change, information=True) for change in changes]


def diff_models(old: ModelLock, new: ModelLock) -> list[LockDifference]:
    name = old.name
    changes = _flat_changes(name, ("onnx",), _onnx_facts(old), _onnx_facts(new))
    # the exporter script is pinned like the model: an edit to it is a change to review
    changes += _flat_changes(name, ("exporter",), old.exporter.model_dump(), new.exporter.model_dump())
    changes += _flat_changes(name, ("fixtures",), _fixture_facts(old), _fixture_facts(new))
    changes += _flat_changes(name, ("toolkit",), old.toolkit.model_dump(), new.toolkit.model_dump())
    rebuilt = varying_builds(old) & varying_builds(new)
    same_bytes = _same_artifacts(old, new)
    conversions = _flat_changes(name, ("conversions",), _conversions(old), _conversions(new))
    # a build whose bytes differ on every conversion (measured at lock): new bytes are information;
    # so is a new fingerprint of the same bytes (a baseline that masks more volatile bytes)
    volatile = [c for c in conversions if _rebuilt_bytes(c, rebuilt) or _refingerprinted(c, same_bytes)]
    changes += [c for c in conversions if c not in volatile]
    changes += _information(volatile)
    statistics = _flat_changes(name, ("outputs",), _outputs(old.references), _outputs(new.references))
    same_tensors = _same_tensors(old.references, new.references)
    changes += [c for c in statistics if c.path[1] not in same_tensors]
    changes += _information([c for c in statistics if c.path[1] in same_tensors])
    changes += _flat_changes(
        name,
        ("tolerances",),
        {k: v.model_dump() for k, v in old.tolerances.items()},
        {k: v.model_dump() for k, v in new.tolerances.items()},
    )
    changes += _flat_changes(name, ("measured",), _measured(old), _measured(new))
    # accuracy against labels: a reviewer of a relock sees what the change did to it
    changes += _flat_changes(name, ("label_scores",), _label_scores(old), _label_scores(new))
    return changes


def _label_scores(model: ModelLock) -> dict[str, Any]:
    return {f"tasks[{s.task}] {s.where}": dict(s.metrics) for s in model.label_scores}


def varying_builds(model: ModelLock) -> set[str]:
    """Targets whose two conversions at lock gave different fingerprints (see remeasure)."""
    return set(model.measured.varying_fingerprints) if model.measured is not None else set()


def _same_artifacts(old: ModelLock, new: ModelLock) -> set[str]:
    """Targets whose pinned `.rknn` bytes are the same in both locks."""
    before = {pin.target: pin.artifact.sha256 for pin in old.conversions}
    return {pin.target for pin in new.conversions if before.get(pin.target) == pin.artifact.sha256}


def _refingerprinted(change: LockDifference, targets: set[str]) -> bool:
    return len(change.path) == 3 and change.path[1] in targets and change.path[2] == "fingerprint"


def _rebuilt_bytes(change: LockDifference, targets: set[str]) -> bool:
    return len(change.path) == 3 and change.path[1] in targets and change.path[2] == "sha256"


def _measured(model: ModelLock) -> dict[str, Any]:
    """The limits `baseline lock` measured (see `baseline.locker.remeasure`), by output and table, the
    task thresholds by task, table and field, and the targets judged without a fingerprint: what
    a reviewer accepts with a relock."""
    if model.measured is None:
        return {}
    limits = {
        f"{limit.key}.{limit.table}": limit.model_dump(
            exclude={"key", "table", "measured"}, exclude_none=True
        )
        for limit in model.measured.limits
    }
    tasks = {f"{t.task}.{t.table}.{t.field}": t.value for t in model.measured.tasks}
    varying = ", ".join(model.measured.varying_fingerprints) or None
    return {"limits": limits, "tasks": tasks, "varying_fingerprints": varying}


def _onnx_facts(model: ModelLock) -> dict[str, Any]:
    return {
        "sha256": model.onnx.sha256,
        "opsets": model.onnx.opsets,
        "ir_version": model.onnx.ir_version,
        "producer": model.onnx.producer,
        "external": {pin.path: pin.sha256 for pin in model.onnx.external or []},
    }


def _fixture_facts(model: ModelLock) -> dict[str, Any]:
    """The fixtures' hash, and how onnxruntime is fed from them (mean/std, layout)."""
    feeds = {feed.input: feed.model_dump(exclude={"input"}) for feed in model.fixtures.feeds or []}
    return {"sha256": model.fixtures.sha256, "feeds": feeds}


def _settings(model: ModelLock, target: str) -> dict[str, Any]:
    """The toolkit arguments a target was converted with (`conversion.config.mean_values`, ...)."""
    spec = next((t for t in model.targets if t.name == target), None)
    conversion = spec.conversion if spec is not None else None
    quantization = spec.quantization if spec is not None else None
    return {
        **(conversion.model_dump(mode="json") if conversion is not None else {}),
        "quantization": quantization.model_dump() if quantization is not None else None,
    }


def _conversions(model: ModelLock) -> dict[str, Any]:
    return {
        pin.target: {
            "settings": _settings(model, pin.target),
            "calibration": pin.calibration_sha256,
            "sha256": pin.artifact.sha256,
            "fingerprint": pin.metadata.fingerprint,
            "toolkit": pin.metadata.toolkit_version,
            "compiler": pin.metadata.compiler_version,
            "inputs": [t.model_dump() for t in pin.metadata.inputs],
            "outputs": [t.model_dump() for t in pin.metadata.outputs],
        }
        for pin in model.conversions
    }


def _reference_label(ref: ReferencePin) -> str:
    """`onnxruntime`, `rknn-sim/rk3588`: how changes name a backend's outputs."""
    return f"{ref.backend}{'/' + ref.target if ref.target else ''}"


def _same_tensors(old: list[ReferencePin], new: list[ReferencePin]) -> set[str]:
    """Backends whose output tensors are byte for byte the same: their statistics are information.

    The statistics are computed from those tensors; another numpy rounds them differently.
    """
    hashes = {_reference_label(ref): ref.tensors.sha256 for ref in old}
    return {_reference_label(ref) for ref in new if hashes.get(_reference_label(ref)) == ref.tensors.sha256}


def _outputs(references: list[ReferencePin]) -> dict[str, Any]:
    return {
        _reference_label(ref): {
            stats.name: {field: getattr(stats, field) for field in DIFF_STATS} for stats in ref.outputs
        }
        for ref in references
    }


def _flat_changes(scope: str, path: tuple[str, ...], old: Any, new: Any) -> list[LockDifference]:
    """Leaf-by-leaf differences of two nested dicts, keyed by path."""
    if isinstance(old, dict) and isinstance(new, dict):
        changes = []
        for key in sorted(old.keys() | new.keys(), key=str):
            changes += _flat_changes(scope, (*path, str(key)), old.get(key), new.get(key))
        return changes
    return [] if old == new else [LockDifference(scope, ".".join(path), old, new, path)]
