"""The cache key of a verify job, in two parts: what the lock fixes, and what is read live.

A job's results depend on its part of the lock entry, the lock-wide sections its checks
declare, the bytes of the pinned files they read, on-board captures, the toolkit environment,
the host's versions and baseline's code (see `declared_reads`). The first two are a function of
the lock's bytes and baseline's code alone: a `KeyRecipe` holds them as one digest, with the
list of what must be read live. `KeyRecipes` remembers every job's recipe under the lock's
sha256 and baseline's code stamp, so an unchanged lock of 1,000 models is not walked again
(~0.15 s of a cached verify); the live part (file hashes, captures, toolkit, host) is computed
on every run, recipe remembered or not, so an edited file still moves its jobs' keys.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baseline.backends import capabilities
from baseline.board.capture import capture_dir, capture_files
from baseline.files.hashing import sha256_bytes
from baseline.gates import declared_reads
from baseline.gates.contract import (
    GateJob,
    Reads,
    calibration_files,
    matrix_cells,
    model_view,
    onnx_files,
    pinned_files,
)
from baseline.models.lock import Lock, ModelLock
from baseline.toolchain.provision import find_toolchain
from baseline.verification.cache import code_stamp, model_json, result_key, write_best_effort
from baseline.versions import host_toolchain

if TYPE_CHECKING:
    from baseline.gates import VerifyContext


@dataclass(frozen=True)
class VerifyJob:
    """One model's gate checks that share a backend (or none) and a target."""

    model: str
    backend: str | None
    """None: the checks that run no backend (integrity; static and compat per target)."""
    target: str | None
    toolkit: str | None
    """The toolkit version the job's backend runs (None for onnxruntime and backend-free checks)."""
    checks: tuple[GateJob, ...]

    @property
    def label(self) -> str:
        where = "/".join(part for part in (self.backend or "checks", self.target) if part)
        return f"{self.model} {where}"


@dataclass(frozen=True)
class KeyRecipe:
    """What a job's key is made of: a digest of its lock-derived parts, and what to read live."""

    model: str
    fixed: str
    """sha256 of the job's lock entry view, its checks and the lock-wide sections they read."""
    files: tuple[tuple[str, str, int | None], ...]
    """(lock key, project-relative path, pinned size) of every pinned file the job reads."""
    toolkit: str | None
    """The toolkit version whose installed environment the job reads, if any."""
    capture_targets: tuple[str, ...]
    """Targets whose on-board capture folders the job reads."""

    def to_json(self) -> list[Any]:
        return [
            self.model,
            self.fixed,
            [list(f) for f in self.files],
            self.toolkit,
            list(self.capture_targets),
        ]

    @classmethod
    def from_json(cls, value: Any) -> KeyRecipe | None:
        """A remembered recipe, or None for anything not shaped like one (a cache is not trusted
        to be well-formed: a truncated or foreign file is a miss)."""
        try:
            model, fixed, files, toolkit, targets = value
            recipe = cls(
                str(model),
                str(fixed),
                tuple(
                    (str(key), str(path), None if size is None else int(size)) for key, path, size in files
                ),
                None if toolkit is None else str(toolkit),
                tuple(str(target) for target in targets),
            )
        except (TypeError, ValueError):
            return None
        return recipe


def lock_wide_dependencies(ctx: VerifyContext) -> dict[str, Any]:
    """The lock-wide sections a recipe may include, dumped once per verify rather than per job."""
    return {
        "boards": [board.model_dump() for board in ctx.lock.boards],
        "toolkits": [pin.model_dump() for pin in ctx.lock.toolkits],
    }


def key_recipe(ctx: VerifyContext, job: VerifyJob, shared: dict[str, Any]) -> KeyRecipe:
    """A job's recipe from the lock: what its gates declare they read (`Reads`), and what the
    backend runs they read take in, by the backends' capabilities. Other targets' files are
    left out. `shared` is `lock_wide_dependencies(ctx)`."""
    model = ctx.lock.model(job.model)
    assert model is not None
    # one narrowed copy of the entry per (backend, target): a pydantic copy per check was ~8,000
    # copies in a cached verify of 1,000 models
    views: dict[tuple[str | None, str | None], ModelLock] = {}

    def view(backend: str | None, target: str | None) -> ModelLock:
        if (backend, target) not in views:
            views[(backend, target)] = model_view(model, backend, target)
        return views[(backend, target)]

    reads = Reads.union(declared_reads(view(c.backend, c.target), c) for c in job.checks)
    reads = reads | Reads.union(
        _run_reads(model, backend, target) for backend, target in sorted(reads.runs, key=str)
    )
    pins = pinned_files(model)
    fixed: dict[str, Any] = {
        "job": [job.backend, job.target, [check.gate for check in job.checks]],
        "model": model_json(view(job.backend, job.target)),
        **{section: shared[section] for section in ("boards", "toolkits") if section in reads.lock},
        "matrix": _matrix_cells(ctx, model, job.target) if "matrix" in reads.lock else [],
    }
    return KeyRecipe(
        model=model.name,
        fixed=sha256_bytes(json.dumps(fixed, sort_keys=True, default=str).encode()),
        files=tuple((key, pins[key].path, pins[key].size) for key in sorted(reads.files)),
        toolkit=model.toolkit.version if reads.toolkit_environment else None,
        capture_targets=tuple(
            sorted({str(t) for backend, t in reads.runs if capabilities(backend).reads_captures})
        ),
    )


def _matrix_cells(ctx: VerifyContext, model: ModelLock, target: str | None) -> list[dict[str, Any]]:
    return [cell.model_dump() for cell in matrix_cells(ctx.lock.matrix, model.name, target)]


def _run_reads(model: ModelLock, backend: str, target: str | None) -> Reads:
    """What a backend run takes in besides the lock entry: the ONNX file and fixtures always;
    the toolkit environment, the pinned `.rknn` and the board's observed versions where its
    capabilities say so. (Captures are hashed separately, see `capture_hashes`.)"""
    caps = capabilities(backend)
    files = {"onnx", "fixtures", *onnx_files(model)}
    if caps.runs_pinned_artifact and target is not None and model.conversion(target) is not None:
        files.add(f"conversions.{target}.artifact")
    if caps.converts and target is not None and model.quantized(target):
        files |= set(calibration_files(model))  # a quantized build calibrates on them
    return Reads(
        files=frozenset(files),
        lock=frozenset({"boards"}) if caps.needs_board else frozenset(),
        toolkit_environment=caps.uses_toolkit,
    )


class LiveInputs:
    """The part of every key read on each run: file bytes (by `FileHashes`), captures, toolkit
    environments and host versions, each looked up once per verify."""

    def __init__(self, ctx: VerifyContext) -> None:
        self.ctx = ctx
        self.host = host_toolchain().model_dump()
        self._toolkits: dict[str, Any] = {}
        self._files: dict[tuple[str, int | None], str] = {}
        """sha256 by (path, size) for this run: a zoo's models share fixture images."""

    def key(self, recipe: KeyRecipe) -> str:
        return result_key(
            {
                "fixed": recipe.fixed,
                "files": {key: self._file(recipe.model, key, path, size) for key, path, size in recipe.files},
                "captures": capture_hashes(self.ctx, recipe.model, recipe.capture_targets),
                "toolkit": self._toolkit(recipe.toolkit),
                "host": self.host,
            }
        )

    def _file(self, model: str, key: str, path: str, size: int | None) -> str:
        known = self._files.get((path, size))
        if known is None:
            where = f"{self.ctx.project.lock_path}: models.{model}.{key}"
            resolved = self.ctx.project.resolve(path, where, file=True)
            known = self._files[(path, size)] = self.ctx.hashes.sha256(resolved, size)
        return known

    def _toolkit(self, version: str | None) -> Any:
        if version is None:
            return None
        if version not in self._toolkits:
            self._toolkits[version] = toolkit_identity(self.ctx.lock, version)
        return self._toolkits[version]


def toolkit_identity(lock: Lock, version: str) -> Any:
    """What of a toolkit environment decides a job's results: the lock's pin of that version (its
    version and build; the packages beside it are information, as the lock records them) when the
    installed environment is that version or none is installed yet, so a fully cached verify
    needs no toolkit; otherwise the installed environment's packages (the jobs run again, and
    `compat` says how it differs)."""
    pin = next((p for p in lock.toolkits if p.version == version), None)
    toolchain = find_toolchain(version)
    if pin is not None and (toolchain is None or toolchain.packages.get("rknn-toolkit2") == pin.version):
        return list(pin.decisive())
    return toolchain.packages if toolchain is not None else None


def capture_hashes(ctx: VerifyContext, model: str, targets: tuple[str, ...]) -> dict[str, str]:
    """On-board captures are inputs too: a new capture must rerun the gates that read it.
    Only regular files inside the project are read (see `capture_files`)."""
    hashes: dict[str, str] = {}
    for target in targets:
        folder = capture_dir(ctx.project, ctx.lock, model, target)
        hashes |= {
            p.relative_to(folder.parent).as_posix(): ctx.hashes.sha256(p)
            for p in capture_files(ctx.project, folder)
        }
    return hashes


class KeyRecipes:
    """Every job's recipe for one lock file, kept under the lock's sha256 and baseline's code
    stamp (a recipe follows from both alone); anything else in the file is ignored."""

    def __init__(self, path: Path, lock_digest: str, read: bool = True) -> None:
        self.path = path
        self.stamp = f"{lock_digest}:{code_stamp()}"
        self._recipes: dict[str, KeyRecipe] = self._load() if read else {}
        self._dirty = False

    def _load(self) -> dict[str, KeyRecipe]:
        try:
            document = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return {}
        if not isinstance(document, dict) or document.get("stamp") != self.stamp:
            return {}
        jobs = document.get("jobs")
        recipes = {
            label: KeyRecipe.from_json(value)
            for label, value in (jobs.items() if isinstance(jobs, dict) else ())
        }
        return {str(label): recipe for label, recipe in recipes.items() if recipe is not None}

    def recipe(self, ctx: VerifyContext, job: VerifyJob, shared: dict[str, Any]) -> KeyRecipe:
        known = self._recipes.get(job.label)
        if known is None or known.model != job.model:
            known = self._recipes[job.label] = key_recipe(ctx, job, shared)
            self._dirty = True
        return known

    def save(self) -> None:
        if self._dirty:
            jobs = {label: recipe.to_json() for label, recipe in self._recipes.items()}
            write_best_effort(self.path, json.dumps({"stamp": self.stamp, "jobs": jobs}).encode())
            self._dirty = False
