"""What `baseline lock --check` remembers: each model's lock job, keyed by everything it reads.

A model's lock entry is a function of its resolved intent, the bytes of the files it reads (the
ONNX, fixture file or images, calibration set, exporter script, a CTC alphabet), the exporter's
git facts, the toolkit environment, the host versions, baseline's code and the entry it
replaces (whose `.rknn` is kept when a reconversion is equivalent). `job_key` hashes all of
them; an entry stores what the job returned, its files by sha256 rather than by bytes. A
check whose every model is remembered then converts nothing, and one changed model is the only
one measured again.

`baseline lock` stores each model under the key its next check will compute: the entry it
replaces is then the one just written, and a lock run twice is byte-identical (tested), so a
model locked from entry E gives E again. Models on a board backend are never remembered: a
board is a device, not a file. Like the result cache, this trusts whoever can write the cache
folder; `--no-cache` reads nothing from it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baseline.backends import needs_board, uses_toolkit
from baseline.errors import BaselineError
from baseline.files.hashing import sha256_bytes
from baseline.files.images import Resolve, image_files
from baseline.models.base import Record
from baseline.models.lock import Lock, ModelLock, ToolkitPin
from baseline.project.intent import ResolvedModel
from baseline.project.layout import Project
from baseline.project.lockfile import render_lock
from baseline.project.provenance import exporter_pin
from baseline.tasks.locking import locked_tasks
from baseline.toolchain.provision import find_toolchain
from baseline.verification.cache import (
    FileHashes,
    ParsedLock,
    ResultCache,
    cache_root,
    ignore_in_git,
    model_json,
    result_key,
    untrusted_cache_warning,
    write_best_effort,
)
from baseline.verification.runcache import RUNS_FOLDER, RunCache
from baseline.versions import host_toolchain, package_version

ImageLister = Callable[[Resolve, str, str, "int | None"], list[Path]]


@dataclass(frozen=True)
class RememberedJob:
    """A lock job's outcome as remembered: its entry, toolkit pins and files by sha256."""

    model: ModelLock
    toolkits: dict[str, ToolkitPin]
    digests: dict[Path, str]


class _JobDocument(Record):
    """A remembered lock job as stored, files relative to the project."""

    model: ModelLock
    toolkits: dict[str, ToolkitPin]
    digests: dict[str, str]


@dataclass
class LockMemo:
    """Lock jobs by key, in the result cache's folder (one small JSON file per job)."""

    cache: ResultCache
    hashes: FileHashes
    read: bool = True
    """False for `--no-cache`: nothing is read, fresh outcomes are still stored."""
    replaced: Lock | None = None
    """The lock `build_lock` read as the one being replaced."""
    distrust: str | None = None
    """Why the cache folder is not read though `--no-cache` was not given (committed entries)."""
    runs: RunCache | None = None
    """Backend runs by what they read: a judging edit measures nothing again (`runcache`)."""
    _git: dict[Path, Any] = field(default_factory=dict)
    _images: dict[tuple[str, int | None], list[Path]] = field(default_factory=dict)
    _batch_path: Path | None = None
    _batch: dict[str, str] = field(default_factory=dict)
    """The jobs the last run of this lock used (key → stored text), read from one file."""
    _texts: dict[str, str] = field(default_factory=dict)
    _used: list[str] = field(default_factory=list)
    _lookups: dict[str, Any] = field(default_factory=dict)
    """What every key shares, looked up once per run (host versions take ~3 ms to read)."""

    @classmethod
    def open(cls, project: Project, read: bool = True) -> LockMemo:
        """The memo in the project's cache folder; `read=False` for `--no-cache`."""
        root = cache_root(project.root)
        distrust = untrusted_cache_warning(project.root, root) if read else None
        read = read and distrust is None
        ignore_in_git(root)
        hashes = FileHashes(root / "file-hashes.json", read=read)
        runs = RunCache(root / RUNS_FOLDER, hashes, project, read=read)
        memo = cls(ResultCache(root / "lock-jobs"), hashes, read, distrust=distrust, runs=runs)
        memo._preload(project)
        return memo

    def _preload(self, project: Project) -> None:
        """Read the jobs the last run of this lock used from one file: opening 1,000 job files
        took ~0.2 s of a check (as `ResultCache.preload` for results)."""
        self._batch_path = (
            self.cache.directory.parent
            / "batches"
            / f"lock-{sha256_bytes(str(project.lock_path.resolve()).encode())[:16]}.json"
        )
        if not self.read:
            return
        try:
            loaded = json.loads(self._batch_path.read_bytes())
        except (OSError, ValueError):
            return
        if isinstance(loaded, dict):
            self._batch = {str(k): v for k, v in loaded.items() if isinstance(v, str)}

    def parsed_lock(self, project: Project) -> ParsedLock:
        return ParsedLock(cache_root(project.root), project.lock_path, read=self.read)

    def save(self) -> None:
        self.hashes.save()
        entries = {key: self._texts[key] for key in self._used if key in self._texts}
        if self._batch_path is not None and entries != self._batch:
            write_best_effort(self._batch_path, json.dumps(entries).encode())

    def renders_as(self, project: Project, lock: Lock, text: str) -> bool:
        """`render_lock(lock) == text`, without rendering (~1.5 s for 1,000 models) when `text`
        is known to be a rendering (`ParsedLock.is_canonical`) of the lock `build_lock` replaced
        and `lock` dumps to the same JSON text (order and `-0.0` included) as that lock."""
        parsed = self.parsed_lock(project)
        digest = sha256_bytes(text.encode())
        replaced = self.replaced
        if replaced is not None and parsed.is_canonical(digest):
            # `build_lock` hands back the replaced lock itself when nothing decisive changed.
            # Otherwise the two JSON texts decide both ways: `_dump` and `render_lock` write the
            # same document (keys in the same order; ints, floats, -0.0 and NaN kept apart), and
            # neither maps two documents to one text, so different JSON renders differently too
            # (a changed model of 1,000 no longer costs a whole rendering, ~0.9 s)
            return lock is replaced or _dump(lock) == _dump(replaced)
        rendered = render_lock(lock) == text
        if rendered:
            parsed.mark_canonical(digest)
        return rendered

    def job_key(
        self, project: Project, model: ResolvedModel, previous: ModelLock | None, places: dict[str, str]
    ) -> str | None:
        """The key of one model's lock job (`places`: where tensors and captures go); None when it
        cannot be remembered (a board), or when a file is missing or refused: the real job then
        says so in its own words."""
        if needs_board(model.backends):
            return None
        try:
            return self._key(project, model, previous, places)
        except (OSError, BaselineError):
            return None

    def _key(
        self, project: Project, model: ResolvedModel, previous: ModelLock | None, places: dict[str, str]
    ) -> str:
        where = f"{project.intent_path}: models.{model.name}"
        toolchain = self._toolchain(model.toolkit.version) if uses_toolkit(model.backends) else None
        return result_key(
            {
                "places": places,
                "lock job": model_json(model),
                "files": {
                    key: self.hashes.sha256(path) for key, path in self._read_files(project, model, where)
                },
                "tasks": [
                    task.model_dump(mode="json")
                    for task in locked_tasks(model.tasks, project.resolve, where, project.root)
                ],
                "git": self._git_facts(project, model, where),
                "toolkit": toolchain,
                "host": self._host(),
                "previous": model_json(previous) if previous is not None else None,
                # a reconversion keeps the pinned `.rknn` on disk when its fingerprint matches
                "pinned artifacts": self._pinned_artifacts(project, previous),
                # weights beside the `.onnx`: found through the entry that pinned them (a new set
                # of files is named by a new `.onnx`, whose hash is above)
                "external data": self._external_data(project, previous),
            }
        )

    def get(self, project: Project, key: str | None) -> RememberedJob | None:
        if key is None or not self.read:
            return None
        self._used.append(key)
        path = self.cache.directory / f"lock-{key}.json"
        try:
            text = self._batch.get(key)
            if text is None:
                text = path.read_text()
            document = _JobDocument.model_validate_json(text)
            digests = {project.resolve(p, f"{path}: digests"): d for p, d in document.digests.items()}
        except (OSError, ValueError, BaselineError):  # a miss, whatever the file holds
            return None
        self._texts[key] = text
        return RememberedJob(document.model, document.toolkits, digests)

    def put(self, project: Project, key: str | None, job: RememberedJob) -> None:
        if key is None:
            return
        digests = {project.relative(path): digest for path, digest in job.digests.items()}
        document = _JobDocument(model=job.model, toolkits=job.toolkits, digests=digests)
        # json, not pydantic's JSON: it keeps a NaN statistic (pydantic writes null)
        text = json.dumps(document.model_dump(mode="json"))
        self.cache.put_document(f"lock-{key}", text)
        self._used.append(key)
        self._texts[key] = text

    def _pinned_artifacts(self, project: Project, previous: ModelLock | None) -> dict[str, str | None]:
        """The bytes of the `.rknn` files the replaced entry pins, as the job finds them."""
        found: dict[str, str | None] = {}
        for conversion in previous.conversions if previous is not None else []:
            where = f"{project.lock_path}: conversions"
            path = project.resolve(conversion.artifact.path, where, file=True)
            found[conversion.target] = self.hashes.sha256(path) if path.is_file() else None
        return found

    def _external_data(self, project: Project, previous: ModelLock | None) -> list[str | None]:
        pins = previous.onnx.external or [] if previous is not None else []
        where = f"{project.lock_path}: onnx.external"
        paths = [project.resolve(pin.path, where, file=True) for pin in pins]
        return [self.hashes.sha256(path) if path.is_file() else None for path in paths]

    def _host(self) -> Any:
        if "host" not in self._lookups:
            # Pillow decodes the image fixtures a lock job pins (a libjpeg update moves pixels)
            pillow = package_version("pillow")
            self._lookups["host"] = {**host_toolchain().model_dump(mode="json"), "pillow": pillow}
        return self._lookups["host"]

    def _toolchain(self, version: str) -> Any:
        if version not in self._lookups:
            found = find_toolchain(version)
            self._lookups[version] = found.packages if found is not None else None
        return self._lookups[version]

    def _git_facts(self, project: Project, model: ResolvedModel, where: str) -> Any:
        """The exporter's git facts, asked of git once per script (a zoo shares one exporter)."""
        script = model.exporter.script
        if script is None:
            return None
        path = project.resolve(script, f"{where}.exporter.script", file=True)
        if path not in self._git:
            self._git[path] = exporter_pin(model.exporter, None, path, project.root).model_dump(mode="json")
        return self._git[path]

    def _read_files(self, project: Project, model: ResolvedModel, where: str) -> list[tuple[str, Path]]:
        """Every user file a model's lock job reads, as (what it is, where it is)."""
        return _read_files(project, model, where, self._image_files)

    def _image_files(self, resolve: Resolve, path: str, where: str, samples: int | None) -> list[Path]:
        """`image_files`, listed once per command for each (path, samples): a zoo shares its
        fixture folder, and each listing globs and stats it (as `Project.resolve` keeps its
        answers for the command)."""
        if (path, samples) not in self._images:
            self._images[(path, samples)] = image_files(resolve, path, where, samples)
        return self._images[(path, samples)]


def _read_files(
    project: Project, model: ResolvedModel, where: str, image_files: ImageLister
) -> list[tuple[str, Path]]:
    """Every user file a model's lock job reads, as (what it is, where it is)."""
    files = [("onnx", project.resolve(model.onnx, f"{where}.onnx", file=True))]
    if model.exporter.script is not None:
        files.append(
            ("exporter", project.resolve(model.exporter.script, f"{where}.exporter.script", file=True))
        )
    fixtures = model.fixtures
    if fixtures.path is not None:
        files.append(("fixtures", project.resolve(fixtures.path, f"{where}.fixtures.path", file=True)))
    if fixtures.images is not None:
        images = image_files(
            project.resolve, fixtures.images.path, f"{where}.fixtures.images.path", fixtures.images.samples
        )
        files += [(f"images/{i}:{project.relative(p)}", p) for i, p in enumerate(images)]
    if model.calibration is not None:
        spec = model.calibration
        listed = image_files(project.resolve, spec.path, f"{where}.calibration.path", spec.samples)
        files += [(f"calibration/{i}:{project.relative(p)}", p) for i, p in enumerate(listed)]
    return files


def _dump(lock: Lock) -> str:
    """The document `render_lock` writes as TOML, as JSON text: equal texts render equally."""
    return model_json(lock, exclude_none=True)
