"""Caches that make an unchanged verification nearly free.

- `FileHashes`: a file's sha256 is reused while its (size, mtime, ctime, inode, device) are
  unchanged, the way git's index avoids rereading files, so multi-GB models are not hashed on
  every run. ctime cannot be set back by a user (`touch -d` sets mtime, and moves ctime).
- `ResultCache`: a model's gate results, keyed by the content hashes of everything they depend
  on (the model's lock entry, the current bytes of its pinned files, the toolkit environment,
  the host versions, baseline's version). Entries are written atomically; an unreadable one is
  a miss. Results with an `error` are never cached: a crash or timeout may not repeat.

Both trust whoever can write the cache folder (see README, "Trust model"): CI that runs
untrusted pull requests uses `--no-cache` or a cache no pull request can write. Every cache
write is best-effort: a read-only checkout still verifies.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pydantic_core
from pydantic import BaseModel, TypeAdapter

from baseline import __version__
from baseline.files.fsutil import WriteError, write_atomic
from baseline.files.hashing import sha256_bytes, sha256_file, stat_signature
from baseline.models.results import GateResult, Status
from baseline.project.git import tracked_files

# where a project's cache lives: in `paths`, which the command's launcher reads before the
# CLI's imports (see `baseline.launch`); named here too, where the rest of the cache is
from baseline.project.paths import CACHE_DIR_NAME as CACHE_DIR_NAME
from baseline.project.paths import CACHE_ENV as CACHE_ENV
from baseline.project.paths import cache_root as cache_root


def committed_files(project_root: Path, root: Path) -> list[str]:
    """Files under the cache folder that git tracks: a pull request that commits cache entries
    (a forged result, a parsed lock that is not the file) must not have them believed. Empty
    when the folder is outside the project, the project is not a git checkout, or git is absent.
    """
    try:
        relative = root.resolve().relative_to(project_root.resolve())
    except ValueError:
        return []
    names = tracked_files(project_root, relative)
    return [name for name in names if Path(name).name != ".gitignore"]


def untrusted_cache_warning(project_root: Path, root: Path) -> str | None:
    """Why the cache must not be read in this checkout (committed entries), or None."""
    committed = committed_files(project_root, root)
    if not committed:
        return None
    return (
        f"{root}: {len(committed)} file(s) in the cache folder are committed to git (first: "
        f"{committed[0]}); cached results are not trusted in this checkout, everything is measured "
        f"again — remove them with `git rm -r --cached {committed[0].split('/')[0]}`"
    )


GITIGNORE = b"# written by baseline: results cached on this machine, never committed\n*\n"


def ignore_in_git(root: Path) -> None:
    """Give the cache folder its own `.gitignore`, so a new project never commits it by accident.

    Best effort, like every cache write; an existing file is left as the team wrote it.
    """
    if not (root / ".gitignore").exists():
        write_best_effort(root / ".gitignore", GITIGNORE)


_PROCESS_HASHES: dict[tuple[Path | None, bool], tuple[str, FileHashes]] = {}


class FileHashes:
    """sha256 of files, remembered by (size, mtime_ns, inode, ctime_ns, device)."""

    def __init__(self, path: Path | None = None, read: bool = True) -> None:
        self.path = path
        """Where the hashes persist between runs; None keeps them for this run only."""
        self.read = read
        self.run = os.urandom(8).hex()
        """Which run these hashes belong to: the processes it ships jobs to share one copy."""
        self._entries: dict[str, list[Any]] = self._load() if read else {}
        """`read=False` (`--no-cache`) trusts none of the stored hashes and stores fresh ones."""
        self._dirty = False

    def _load(self) -> dict[str, list[Any]]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def sha256(self, file: Path, size: int | None = None) -> str:
        """The file's sha256; with the `size` the lock pins, a file of another size is not read
        at all (a sparse file can claim terabytes) and gets `size_mismatch(...)` instead."""
        stat = file.stat()
        if size is not None and stat.st_size != size:
            return size_mismatch(stat.st_size)
        signature = stat_signature(stat)
        # the entry is only used when the signature matches, so the key needs no symlink
        # resolution (a `Path.resolve` per file was a third of a cached verify)
        key = os.path.abspath(file)
        entry = self._entries.get(key)
        if isinstance(entry, list) and len(entry) == len(signature) + 1 and entry[:-1] == signature:
            return str(entry[-1])
        digest = sha256_file(file)
        self._entries[key] = [*signature, digest]
        self._dirty = True
        return digest

    @classmethod
    def of_process(cls, path: Path | None, read: bool, run: str) -> FileHashes:
        """The one `FileHashes` of this process for the run `run` (the driver's `self.run`): a
        Ray worker unpickles a context per job, and parsing a 1,000-model zoo's hashes each time
        (~6 ms) was three quarters of a 3,000-job verify on Ray (18 of 24 s). Never shared
        across runs (a worker outlives them): `--no-cache` trusts no earlier hash."""
        kept = _PROCESS_HASHES.get((path, read))
        if kept is None or kept[0] != run:
            made = cls(path, read)
            made.run = run
            kept = _PROCESS_HASHES[(path, read)] = (run, made)
        return kept[1]

    def save(self) -> None:
        if self._dirty and self.path is not None:
            write_best_effort(self.path, json.dumps(self._entries, sort_keys=True).encode())
            self._dirty = False


SIZE_MISMATCH = "size:"


def size_mismatch(actual: int) -> str:
    """What `FileHashes.sha256` returns for a file whose size is not the pinned one: never a
    sha256 (so it never matches one), and it names the size for the report."""
    return f"{SIZE_MISMATCH}{actual}"


class JobTimes:
    """How long each job took last time, to start the longest first (the way ninja uses its
    log): with two workers, a long job started last leaves one core idle while it runs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        self._seconds: dict[str, float] = {
            str(k): float(v) for k, v in (data.items() if isinstance(data, dict) else ()) if _is_number(v)
        }

    def estimate(self, job: str) -> float | None:
        return self._seconds.get(job)

    def record(self, job: str, seconds: float) -> None:
        self._seconds[job] = round(seconds, 3)

    def save(self) -> None:
        write_best_effort(self.path, json.dumps(self._seconds, sort_keys=True).encode())


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def model_json(value: object, *, exclude_none: bool = False) -> str:
    """A pydantic model (or list of them) as JSON text, for a `result_key` part: pydantic's
    serializer is ~5× faster than `model_dump` + `json.dumps` on a lock entry. NaN and infinity
    are written as the constants `NaN` / `Infinity`, so no two values share a text (a key that
    differs only by field order is a cache miss, never a wrong hit)."""
    if _TO_JSON_KEEPS_NAN:
        try:
            return pydantic_core.to_json(value, inf_nan_mode="constants", exclude_none=exclude_none).decode()
        except pydantic_core.PydanticSerializationError:
            # pydantic before 2.13 does not build a deferred record's serializer on demand
            # (`defer_build`): build them all once, then serialize again
            _build_deferred_records()
            return pydantic_core.to_json(value, inf_nan_mode="constants", exclude_none=exclude_none).decode()
    # pydantic-core before 2.20 (pydantic 2.5, the declared floor) writes NaN as null: the slower
    # way, which keeps NaN apart from None
    return json.dumps(_python(value, exclude_none), default=str)


def _python(value: object, exclude_none: bool) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="python", exclude_none=exclude_none)
    if isinstance(value, list | tuple):
        return [_python(item, exclude_none) for item in value]
    return value


def _build_deferred_records() -> None:
    from baseline.models.base import Record

    pending: list[type[BaseModel]] = [Record]
    while pending:
        record = pending.pop()
        pending += record.__subclasses__()
        if record is not Record:
            record.model_rebuild(force=True)


def _keeps_nan() -> bool:
    try:
        return pydantic_core.to_json(float("nan"), inf_nan_mode="constants") == b"NaN"
    except TypeError:  # no such argument
        return False


_TO_JSON_KEEPS_NAN = _keeps_nan()


def result_key(parts: dict[str, Any]) -> str:
    """A content hash of everything a model's results depend on, baseline's own code included."""
    canonical = json.dumps(
        {"baseline": __version__, "code": code_stamp(), **parts}, sort_keys=True, default=str
    )
    return sha256_bytes(canonical.encode())


@functools.cache
def code_stamp() -> str:
    """Size and mtime of baseline's own files: an edited gate must not reuse old results."""
    package = Path(__file__).resolve().parents[1]  # the whole package, not this subpackage
    stamps = sorted(
        (p.relative_to(package).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
        for p in package.rglob("*")
        if p.suffix in (".py", ".toml", ".json")
    )
    return sha256_bytes(json.dumps(stamps).encode())


_RESULTS = TypeAdapter(list[GateResult])


class ResultCache:
    def __init__(self, directory: Path, read: bool = True) -> None:
        self.directory = directory
        self.read = read
        """False for `--no-cache`: every lookup misses, and fresh results are still stored (as
        pytest's `--cache-clear`), so the next plain run is answered from them."""
        self._texts: dict[str, str] = {}
        """Every entry this run read or wrote, as stored (for `save_batch`)."""
        self._batch: dict[str, str] = {}
        self.keys_used: list[str] = []
        """The keys this run looked up, in order: the entries `save_batch` keeps."""

    def preload(self, batch: str) -> None:
        """Read the entries of the last run of the same lock from one file (`save_batch`, in a
        `batches` folder beside this one): opening 3,000 entry files took ~0.2 s of a
        1,000-model cached verify."""
        if not self.read:
            return
        try:
            loaded = json.loads((self.directory.parent / "batches" / f"{batch}.json").read_bytes())
        except (OSError, ValueError):
            return
        if isinstance(loaded, dict):
            self._batch = {str(k): v for k, v in loaded.items() if isinstance(v, str)}

    def may_answer(self) -> bool:
        """False when no lookup can hit: `--no-cache`, or no result was ever stored here."""
        return self.read and self.directory.is_dir()

    def get(self, key: str) -> list[GateResult] | None:
        self.keys_used.append(key)
        if not self.read:
            return None
        text = self._batch.get(key)
        try:
            if text is None:
                text = (self.directory / f"{key}.json").read_text()
            # parsed and validated in one step by pydantic's own JSON reader: 3,000 lookups of a
            # 1,000-model zoo took 0.3 s through `json.loads` and then `model_validate`
            results = _RESULTS.validate_json(text)
        except (OSError, ValueError):  # missing, truncated, `null` or from another version: a miss
            return None
        self._texts[key] = text
        return results

    def put_document(self, name: str, text: str) -> bool:
        """Another cached document beside the results (a lock job, see `locker.memo`)."""
        return write_best_effort(self.directory / f"{name}.json", text.encode())

    def put(self, key: str, results: list[GateResult]) -> bool:
        document = _document(results)
        if document is None:
            return False
        self._texts[key] = document
        return write_best_effort(self.directory / f"{key}.json", document.encode())

    def write(self, key: str, results: list[GateResult]) -> str | None:
        """`put` for a forked worker (`baseline.executors.processes`): it writes its own
        entries, beside the other workers, and hands the text back to the caller (`adopt`).
        None: not stored (the results hold an error)."""
        document = _document(results)
        if document is not None:
            write_best_effort(self.directory / f"{key}.json", document.encode())
        return document

    def adopt(self, key: str, document: str) -> None:
        """An entry another process wrote with `write`: part of this run's batch (`save_batch`)."""
        self._texts[key] = document

    def save_batch(self, batch: str, keys: list[str]) -> None:
        """Keep this run's entries in one file for the next run's `preload`, unless they are the
        ones it already holds. Each entry stays in its own file too (other locks, other runs)."""
        entries = {key: self._texts[key] for key in keys if key in self._texts}
        if entries != self._batch:
            write_best_effort(
                self.directory.parent / "batches" / f"{batch}.json", json.dumps(entries).encode()
            )


def _document(results: list[GateResult]) -> str | None:
    """A cache entry's text; None for results with an error (a crash may not repeat)."""
    if any(result.status is Status.ERROR for result in results):
        return None
    # json keeps NaN (an overflowing layer's cosine) where pydantic's JSON would write null
    return json.dumps([result.model_dump(mode="python") for result in results])


class ParsedLock:
    """A lock's parsed TOML, kept as JSON under the sha256 of the lock's bytes.

    The pure-Python TOML reader takes ~0.6 s for the 2.5 MB lock of 1,000 models; pydantic reads
    and validates the same document from JSON in ~0.06 s (`json.loads` alone takes as long).
    The lock is still validated in full on every run; only the text-to-dict step is remembered,
    and only for documents JSON holds exactly (a TOML date would come back as a string, so such
    a lock is not kept). One entry per lock file: the sha256 on the first line, then the JSON.
    """

    def __init__(self, directory: Path, lock_path: Path, read: bool = True) -> None:
        self.path = directory / f"lock-{sha256_bytes(str(lock_path.resolve()).encode())[:16]}.json"
        self.read = read

    def text(self, digest: str) -> bytes | None:
        """The JSON of the lock whose bytes have this sha256, if it is the one kept."""
        if not self.read:
            return None
        try:
            stored, _, text = self.path.read_bytes().partition(b"\n")
        except OSError:
            return None
        return text if stored == digest.encode() and text else None

    def get(self, digest: str) -> dict[str, Any] | None:
        text = self.text(digest)
        try:
            data = json.loads(text) if text is not None else None
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def put(self, digest: str, data: dict[str, Any]) -> None:
        if not _json_exact(data):
            return
        write_best_effort(self.path, digest.encode() + b"\n" + json.dumps(data).encode())

    def is_canonical(self, digest: str) -> bool:
        """Whether the lock text of this sha256 is known to be what `render_lock` makes of it
        (rendering 1,000 models takes ~1.5 s; `lock --check` needs to know the text is canonical)."""
        try:
            return self.read and self.path.with_suffix(".canonical").read_text() == digest
        except OSError:
            return False

    def mark_canonical(self, digest: str) -> None:
        write_best_effort(self.path.with_suffix(".canonical"), digest.encode())


def _json_exact(value: object) -> bool:
    """Whether `json` gives `value` back as it is: only dicts of str keys, lists, str, int,
    float and bool (TOML has no null)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_exact(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_json_exact(item) for item in value)
    return isinstance(value, str | int | float | bool)


def write_best_effort(path: Path, data: bytes) -> bool:
    """Write a cache file; a cache that cannot be written (a read-only checkout, a full disk)
    only makes the next run slower, so it never fails the verification."""
    try:
        write_atomic(path, data, durable=False)
    except WriteError:
        return False
    return True
