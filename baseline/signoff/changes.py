"""What changed since the previous lock, in the words of a release reviewer.

`baseline diff` lists every changed value; the sign-off names them for people and keeps output
statistics only where they moved beyond the drift tolerance (smaller moves are float noise).
"""

from __future__ import annotations

from baseline.models.lock import Lock, ModelLock
from baseline.models.tolerances import DriftTolerance
from baseline.project import diff
from baseline.signoff.records import ReleaseChange

NOT_PINNED = "—"


def lock_changes(previous: Lock, lock: Lock) -> list[ReleaseChange]:
    """What differs between two locks, as a reviewer reads it: `baseline diff`'s changes, named
    for people, with output statistics kept only where they moved beyond the drift tolerance."""
    described = [_describe(change, lock) for change in diff.diff_locks(previous, lock)]
    return list(dict.fromkeys(change for change in described if change is not None))


def _describe(change: diff.LockDifference, lock: Lock) -> ReleaseChange | None:
    """One `baseline diff` change in sign-off words; None for noise (float jitter, minor stats)."""
    if change.scope == "lock":
        return _describe_lock(change)
    part = change.path[0]
    if part == "model":
        return ReleaseChange(
            "model",
            f"model {change.scope}",
            *(("present", "removed") if change.new is None else ("absent", "added")),
        )
    if part == "outputs":
        return _describe_statistics(change, lock.model(change.scope))
    if part == "conversions":
        return _describe_conversion(change)
    if change.path == ("toolkit", "version"):
        return ReleaseChange("version", f"{change.scope} toolkit", _text(change.old), _text(change.new))
    subject = {"onnx": "ONNX", "fixtures": "fixtures", "toolkit": "toolkit", "tolerances": "tolerance"}[part]
    return ReleaseChange(
        "model", " ".join([change.scope, subject, *change.path[1:]]), _value(change.old), _value(change.new)
    )


def _describe_lock(change: diff.LockDifference) -> ReleaseChange:
    if change.path[0] == "toolchain":
        return ReleaseChange("version", f"host {change.path[1]}", str(change.old), str(change.new))
    version, detail = change.path[1], change.path[2:]
    subject = " ".join(["RKNN-Toolkit2", version, *(part for part in detail if part != "packages")])
    if not detail:
        return ReleaseChange(
            "version", subject, *(("pinned", "removed") if change.new is None else ("absent", "added"))
        )
    return ReleaseChange("version", subject, _text(change.old), _text(change.new))


def _describe_conversion(change: diff.LockDifference) -> ReleaseChange:
    target, detail = change.path[1], change.path[2:]
    subject = f"{change.scope} {target} .rknn"
    if not detail:  # a target added or removed
        return ReleaseChange(
            "artifact", subject, _pin_digest(change.old, "absent"), _pin_digest(change.new, "removed")
        )
    if detail == ("fingerprint",):
        subject = f"{change.scope} {target} fingerprint"
    else:
        subject = " ".join([subject, *detail])
    return ReleaseChange("artifact", subject, _value(change.old), _value(change.new))


def _pin_digest(pin: object, missing: str) -> str:
    return _short(str(pin["sha256"])) if isinstance(pin, dict) else missing


def _describe_statistics(change: diff.LockDifference, model: ModelLock | None) -> ReleaseChange | None:
    """Means and stds that moved by more than the output's drift tolerance (smaller is float
    noise), NaN / Inf counts, outputs that appeared; other statistics are in `baseline diff`."""
    if model is None or len(change.path) < 3:
        return None  # a whole backend's outputs added or removed: the conversion change says it
    output = change.path[2]
    subject = f"{model.name} {change.path[1]} {output!r}"
    if len(change.path) == 3:
        return (
            ReleaseChange("statistics", f"{subject} output", "absent", "added")
            if change.old is None
            else None
        )
    statistic = change.path[3]
    if statistic in ("nan", "inf"):
        return ReleaseChange(
            "statistics",
            f"{subject} {statistic.replace('nan', 'NaN').replace('inf', 'Inf')}",
            str(change.old),
            str(change.new),
        )
    tolerance = model.tolerance(output).drift
    if statistic in ("mean", "std") and _moved(change.old, change.new, tolerance):
        return ReleaseChange(
            "statistics", f"{subject} {statistic}", _stat(change.old), _stat_change(change.old, change.new)
        )
    return None


def _moved(before: float | None, after: float | None, tolerance: DriftTolerance) -> bool:
    if before is None or after is None:
        return before is not after
    return bool(abs(after - before) > tolerance.atol + tolerance.rtol * abs(before))


def _stat(value: float | None) -> str:
    return "none" if value is None else f"{value:.6g}"


def _stat_change(before: float | None, after: float | None) -> str:
    if before is None or after is None or before == 0:
        return _stat(after)
    return f"{after:.6g} ({(after - before) / abs(before):+.2%})"


def _short(digest: str | None) -> str:
    return "none" if digest is None else f"{digest[:12]}…"


def _text(value: str | None) -> str:
    return NOT_PINNED if value is None else value


def _value(value: object) -> str:
    """A changed value in a table cell: digests shortened, absent values named."""
    if value is None:
        return "none"
    if isinstance(value, str) and len(value) == 64:
        return _short(value)
    return str(value)
