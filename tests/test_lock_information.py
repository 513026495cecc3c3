"""Which lock values decide results and which are information (no toolkit: the repository's demo lock)."""

from __future__ import annotations

from pathlib import Path

from baseline.locker.project import _keep_information
from baseline.models.lock import Lock
from baseline.project.diff import decisive, diff_locks
from baseline.project.lockfile import load_lock
from tests.conftest import LOCK, REPO


def demo_lock() -> Lock:
    return load_lock(REPO / LOCK)


def on_another_machine(lock: Lock) -> Lock:
    """The same results, measured with newer patch releases of every library."""
    host = lock.toolchain.model_copy(update={"onnxruntime": "9.9.9", "numpy": "9.9.9", "python": "3.11.99"})
    kits = [pin.model_copy(update={"packages": {**pin.packages, "torch": "0.0.0"}}) for pin in lock.toolkits]
    return lock.model_copy(update={"toolchain": host, "toolkits": kits})


def test_library_versions_are_information() -> None:
    locked = demo_lock()
    fresh = on_another_machine(locked)
    assert fresh.decisive() == locked.decisive()
    changes = diff_locks(locked, fresh)
    assert changes and all(change.information for change in changes) and decisive(changes) == []
    assert "lock: toolchain.onnxruntime: 1.32.0 → 9.9.9 (information)" in [c.line() for c in changes]


def test_a_relock_with_the_same_results_keeps_the_locked_versions() -> None:
    locked = demo_lock()
    assert _keep_information(on_another_machine(locked), locked) == locked


def test_the_toolkit_build_decides() -> None:
    locked = demo_lock()
    kits = [pin.model_copy(update={"commit": "00000000"}) for pin in locked.toolkits]
    fresh = on_another_machine(locked).model_copy(update={"toolkits": kits})
    assert fresh.decisive() != locked.decisive()
    kept = _keep_information(fresh, locked)
    assert kept == fresh, "a real change relocks with this machine's versions"
    assert [c.key for c in decisive(diff_locks(locked, fresh))] == ["toolkits.2.5.0.commit"]


def test_diff_exit_code(tmp_path: Path, cli) -> None:
    locked = demo_lock()
    old = tmp_path / "old.lock"
    old.write_text((REPO / LOCK).read_text())
    info = tmp_path / "info.lock"
    info.write_text((REPO / LOCK).read_text().replace('onnxruntime = "', 'onnxruntime = "0.'))
    code, out, _ = cli(tmp_path, "diff", str(old), str(info), "--exit-code")
    assert code == 0 and out.endswith("0 changes, 2 information only\n")
    exporter = locked.models[0].exporter
    assert exporter.script is not None
    changed = tmp_path / "changed.lock"
    changed.write_text(old.read_text().replace(exporter.script.sha256, "0" * 64, 1))
    code, out, _ = cli(tmp_path, "diff", str(old), str(changed), "--exit-code")
    assert code == 1 and f"{locked.models[0].name}: exporter.script.sha256" in out
    assert cli(tmp_path, "diff", str(old), str(changed))[0] == 0, "without --exit-code, a diff is a report"


def with_std(lock: Lock, std: float, tensors_sha256: str | None = None) -> Lock:
    """The first model's onnxruntime statistics with another `std` (and, optionally, other tensors)."""
    model = lock.models[0]
    reference = model.reference("onnxruntime", None)
    assert reference is not None
    stats = [reference.outputs[0].model_copy(update={"std": std}), *reference.outputs[1:]]
    tensors = reference.tensors.model_copy(update={"sha256": tensors_sha256 or reference.tensors.sha256})
    changed = reference.model_copy(update={"outputs": stats, "tensors": tensors})
    references = [changed if ref is reference else ref for ref in model.references]
    models = [model.model_copy(update={"references": references}), *lock.models[1:]]
    return lock.model_copy(update={"models": models})


def test_statistics_of_the_same_tensors_are_information() -> None:
    """numpy 1.24 and 2.4 give a `std` differing in the 16th digit for the same tensor (measured)."""
    locked = demo_lock()
    std = locked.models[0].references[0].outputs[0].std
    assert std is not None
    rounded = with_std(on_another_machine(locked), std * (1 + 1e-15))
    assert rounded.decisive() == locked.decisive() and _keep_information(rounded, locked) == locked
    assert decisive(diff_locks(locked, rounded)) == []
    retrained = with_std(locked, std * 2, tensors_sha256="f" * 64)
    keys = [c.key for c in decisive(diff_locks(locked, retrained))]
    assert keys[0].startswith("outputs.onnxruntime.") and keys[0].endswith(".std")


def test_accept_counts_the_changes_it_does_not_print(tmp_path: Path, cli, monkeypatch) -> None:
    from baseline.models.lock import AuditEntry
    from baseline.project import accept

    entry = AuditEntry(
        model="m", author="a", date="d", reason="r", changes=[f"m: k{i}: 0 → 1" for i in range(25)]
    )
    monkeypatch.setattr(accept, "accept_change", lambda *args: entry)
    code, out, _ = cli(tmp_path, "accept", "m", "--reason", "r")
    assert code == 0 and "m: k19: 0 → 1" in out and "m: k20" not in out
    assert out.endswith("  … and 5 more, recorded in the audit entry of baseline.lock\n")


def test_a_new_fingerprint_of_the_same_bytes_is_information_and_of_new_bytes_a_change() -> None:
    """A baseline that masks more volatile bytes fingerprints the same `.rknn` differently."""
    locked = demo_lock()
    model = locked.models[0]
    pin, *others = model.conversions

    def relocked(**artifact: str) -> Lock:
        metadata = pin.metadata.model_copy(update={"fingerprint": "e" * 64})
        changed = pin.model_copy(
            update={"metadata": metadata, "artifact": pin.artifact.model_copy(update=artifact)}
        )
        entry = model.model_copy(update={"conversions": [changed, *others]})
        return locked.model_copy(update={"models": [entry, *locked.models[1:]]})

    [same_bytes] = diff_locks(locked, relocked())
    assert same_bytes.information and same_bytes.key == f"conversions.{pin.target}.fingerprint"
    keys = {c.key for c in decisive(diff_locks(locked, relocked(sha256="f" * 64)))}
    assert keys == {f"conversions.{pin.target}.fingerprint", f"conversions.{pin.target}.sha256"}
