"""The files a lock pins: content-addressed tensors and artifacts written only once the whole
lock is known, and pins of the user's own files (the ONNX model, scripts, images)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from baseline.errors import InputError
from baseline.files.fsutil import write_atomic
from baseline.files.hashing import sha256_bytes, sha256_file
from baseline.models.lock import (
    FilePin,
    ModelLock,
    OnnxPin,
)
from baseline.project.layout import Project

if TYPE_CHECKING:
    from baseline.files.tensors import TensorSet
    from baseline.locker.memo import RememberedJob
    from baseline.verification.runcache import RunCache

OWNED_SUFFIXES = (".npz", ".rknn")
"""What baseline writes into a model's tensor folder; the folder is baseline's own."""


@dataclass
class PendingFiles:
    """Tensor and artifact files to write once the whole lock is known: path → bytes."""

    files: dict[Path, bytes] = field(default_factory=dict)
    digests: dict[Path, str] = field(default_factory=dict)
    """Files known only by sha256: a remembered lock job's (`lock --check`), never written."""
    jobs: dict[str, RememberedJob] = field(default_factory=dict)
    """Each model's job as `locker.memo` remembers it (entry, toolkit pins, files by hash)."""

    def pin(self, project: Project, directory: Path, stem: str, suffix: str, data: bytes) -> FilePin:
        """Pin `data` under a content-addressed name (`stem.<sha256[:12]>suffix`).

        A new baseline never overwrites the files the current lock points at, so a lock run
        that is interrupted leaves the old lock and its files intact.
        """
        digest = sha256_bytes(data)
        path = directory / f"{stem}.{digest[:12]}{suffix}"
        self.files[path] = data
        return FilePin(path=project.relative(path), sha256=digest, size=len(data))

    def pin_arrays(self, project: Project, directory: Path, stem: str, arrays: TensorSet) -> FilePin:
        from baseline.files.tensors import npz_bytes  # numpy: only when a model is measured

        return self.pin(project, directory, stem, ".npz", npz_bytes(arrays))

    def add(self, other: PendingFiles) -> None:
        self.files.update(other.files)
        self.digests.update(other.digests)

    def sha256(self) -> dict[Path, str]:
        """Every pending file by sha256."""
        return {**self.digests, **{path: sha256_bytes(data) for path, data in self.files.items()}}

    def write(self) -> None:
        """Write the pending bytes. Files known only by hash (remembered lock jobs, whose files
        `build_lock` found on disk as remembered) must still be there: they are not written."""
        gone = [path for path in self.digests if not path.is_file()]
        if gone:
            raise InputError(f"{gone[0]}: removed while the lock was built; run `baseline lock` again")
        for path, data in self.files.items():
            write_atomic(path, data)

    def tensors(self) -> dict[Path, bytes]:
        """Every tensor file the new lock pins, by bytes: those to write, and those it keeps
        (read from disk), for the new baseline's self-check."""
        kept = {path: path.read_bytes() for path in self.digests if path.suffix == ".npz"}
        return {**kept, **{path: data for path, data in self.files.items() if path.suffix == ".npz"}}

    def collect_garbage(self) -> list[Path]:
        """Remove tensors and artifacts in the written folders that the new lock no longer pins."""
        removed = []
        for directory in {path.parent for path in self.files}:
            for stale in directory.iterdir():
                if stale.suffix in OWNED_SUFFIXES and stale not in self.files and stale not in self.digests:
                    stale.unlink(missing_ok=True)
                    removed.append(stale)
        return removed


@dataclass(frozen=True)
class Workspace:
    """Where one model's files go and what the current lock pins for it."""

    tensor_dir: Path
    captures: Path
    previous: ModelLock | None
    """The model's entry in the lock being replaced (its `.rknn` bytes are kept when unchanged)."""
    pending: PendingFiles = field(default_factory=PendingFiles)
    runs: RunCache | None = None
    """Backend runs kept by what they read (`runcache`); None measures everything anew."""
    measurement: int = 1
    """Which of `lock`'s two measurements this is: each keeps its own runs."""


def pin_file(project: Project, path: Path) -> FilePin:
    return FilePin(path=project.relative(path), sha256=sha256_file(path), size=path.stat().st_size)


def pin_onnx(project: Project, path: Path) -> OnnxPin:
    # onnx is imported only when a model is measured: `lock --check` answered from the cache
    # never needs it (~0.3 s of a 1,000-model check)
    from baseline.files.onnx_facts import (
        check_external_data,
        graph_inputs,
        load_onnx_structure,
        opset_imports,
        producer,
        tensor_specs,
    )

    structure = load_onnx_structure(path)
    external = [pin_file(project, file) for file in check_external_data(structure, path)]
    return OnnxPin(
        **pin_file(project, path).model_dump(),
        external=external or None,
        ir_version=structure.ir_version,
        opsets=opset_imports(structure),
        producer=producer(structure),
        inputs=tensor_specs(graph_inputs(structure), path),
        outputs=tensor_specs(list(structure.graph.output), path),
    )


def calibration_manifest(files: list[FilePin]) -> str:
    """One hash over the set: renaming, reordering or editing an image changes it."""
    return sha256_bytes("".join(f"{pin.sha256}  {pin.path}\n" for pin in files).encode())
