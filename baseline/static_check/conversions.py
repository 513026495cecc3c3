"""This machine's real conversions, as evidence for `baseline check` (issue 33).

Every conversion `lock` and `verify` run (`RunCache.kept_or_run`) is recorded here with the op
signatures of the model's nodes (`node_signatures`): compiled, the signatures of every node it
had; refused, the signature of the node its log names, if it names one. `check` consults this
table before the shipped op table: a node whose signature compiled here is cleared, one whose
signature failed here is an error, and the report says which of its verdicts came from here.

The table lives in the project's cache (`.baseline-cache/learned-conversions.json`). It is
bounded (the newest `MAX_ENTRIES` conversions, `MAX_SIGNATURES` per conversion) and, since
anyone who can write the cache folder can edit it, validated entry by entry when read: an entry
of the wrong shape is dropped, never trusted in part, and a file over `MAX_BYTES` is not read.
Recording never fails a run: any error is swallowed (the table is only a hint for `check`).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baseline.backends.base import BackendJob, BackendRun

FILE_NAME = "learned-conversions.json"
VERSION = 1
MAX_ENTRIES = 500
MAX_SIGNATURES = 5_000
MAX_BYTES = 32 * 1024 * 1024
RECORD_SECONDS = 120.0
"""The helper's limit for a model's signatures (shape inference of a large model)."""
LOG_CHARS = 4_000
"""Of the conversion's error and log tail, searched for the failing node's name."""

SIGNATURE = re.compile(r"^[A-Za-z0-9_.]{1,64}:[0-9a-f]{16}$")
TEXT_LIMIT = 300


def precision(quantized: bool) -> str:
    return "quantized" if quantized else "float"


@dataclass(frozen=True)
class Entry:
    """One real conversion of one file for one target."""

    onnx: str  # sha256 of the file
    model: str  # its name in the lock (information only)
    toolkit: str
    platform: str
    precision: str  # quantized | float
    compiled: bool
    error: str = ""
    failing_node: str = ""
    failing: tuple[str, ...] = ()  # signature(s) of the node the log names
    signatures: tuple[str, ...] = ()  # of every node, when it compiled

    def key(self) -> tuple[str, str, str, str]:
        return (self.onnx, self.toolkit, self.platform, self.precision)


@dataclass
class Learned:
    """The table's evidence for one toolkit, platform and precision, as `check` reads it."""

    compiled: dict[str, str] = field(default_factory=dict)  # signature -> a model that compiled
    failed: dict[str, tuple[str, str]] = field(default_factory=dict)  # signature -> (model, error)

    def __bool__(self) -> bool:
        return bool(self.compiled or self.failed)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value[:TEXT_LIMIT]


def _signatures(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_SIGNATURES:
        raise TypeError("not a bounded list")
    if not all(isinstance(s, str) and SIGNATURE.match(s) for s in value):
        raise TypeError("not a signature")
    return tuple(value)


def _entry(raw: Any) -> Entry:
    """An entry as written by `record`, or TypeError / KeyError (a tampered or foreign one)."""
    if not isinstance(raw, dict) or not isinstance(raw["compiled"], bool):
        raise TypeError("not an entry")
    if not re.fullmatch(r"[0-9a-f]{64}", raw["onnx"]) or raw["precision"] not in ("quantized", "float"):
        raise TypeError("not an entry")
    return Entry(
        onnx=raw["onnx"],
        model=_text(raw["model"]),
        toolkit=_text(raw["toolkit"]),
        platform=_text(raw["platform"]),
        precision=raw["precision"],
        compiled=raw["compiled"],
        error=_text(raw.get("error", "")),
        failing_node=_text(raw.get("failing_node", "")),
        failing=_signatures(raw.get("failing", [])),
        signatures=_signatures(raw.get("signatures", [])),
    )


def read_entries(root: Path) -> list[Entry]:
    """The table's valid entries, oldest first ([] when absent, too large or not a table)."""
    path = root / FILE_NAME
    try:
        if path.stat().st_size > MAX_BYTES:
            return []
        document = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return []
    if not isinstance(document, dict) or document.get("version") != VERSION:
        return []
    raw_entries = document.get("entries")
    entries = []
    for raw in raw_entries[-MAX_ENTRIES:] if isinstance(raw_entries, list) else []:
        try:
            entries.append(_entry(raw))
        except (TypeError, KeyError, re.error):
            continue  # dropped whole: a tampered entry is never believed in part
    return entries


def learned(root: Path | None, toolkit: str, platform: str, quantized: bool) -> Learned:
    """What this machine's conversions say for one toolkit, platform and precision."""
    found = Learned()
    if root is None:
        return found
    wanted = (toolkit, platform, precision(quantized))
    for entry in read_entries(root):
        if (entry.toolkit, entry.platform, entry.precision) != wanted:
            continue
        for signature in entry.signatures if entry.compiled else ():
            found.compiled[signature] = entry.model
        for signature in entry.failing if not entry.compiled else ():
            found.failed[signature] = (entry.model, entry.error)
    return found


def write_entry(root: Path, entry: Entry) -> None:
    """Add `entry`, replacing an older conversion of the same file for the same target; keep
    the newest `MAX_ENTRIES`. Serialised by a lock file: lock and verify convert in parallel."""
    from baseline.verification.cache import write_best_effort

    with _locked(root):
        entries = [e for e in read_entries(root) if e.key() != entry.key()]
        entries.append(entry)
        entries = entries[-MAX_ENTRIES:]
        data = _serialise(entries)
        while len(data) > MAX_BYTES and len(entries) > 1:  # oldest first, so the file stays readable
            entries = entries[len(entries) // 4 or 1 :]
            data = _serialise(entries)
        write_best_effort(root / FILE_NAME, data)


def _serialise(entries: list[Entry]) -> bytes:
    document = {
        "version": VERSION,
        "entries": [
            {**e.__dict__, "failing": list(e.failing), "signatures": list(e.signatures)} for e in entries
        ],
    }
    return json.dumps(document, separators=(",", ":")).encode()


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    import fcntl

    root.mkdir(parents=True, exist_ok=True)
    with (root / (FILE_NAME + ".lock")).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def record_conversion(root: Path, job: BackendJob, run: BackendRun) -> None:
    """Record a fresh conversion's outcome (called by the run cache after every real build).
    The signatures are computed in the ONNX helper (this process never imports onnx); nothing
    here may fail the run that converted, so every error is swallowed."""
    build = run.build
    if build is None or job.target is None or job.cut:
        return  # no conversion, or a cut graph (its nodes are not the file's)
    if build.crashed and "timed out" in (build.error or "").lower():
        return  # a hang says nothing about the graph
    try:
        from baseline.files.images import onnx_shape
        from baseline.runtime.isolated import run_limited

        # only what the toolkit said was wrong: info lines quote tensor names too, and a crash's
        # log tail names whatever was printed last, not the node that killed it
        errors = [d.message for d in build.diagnostics if d.severity in ("error", "unknown-error")]
        log = "" if build.crashed else "\n".join([build.error or "", *errors])
        run_limited(
            "baseline.static_check.learn:record",
            (
                root.absolute(),
                job.onnx_path.absolute(),
                {name: onnx_shape(array, job.feed(name)) for name, array in job.inputs.items()},
                job.model,
                job.toolkit.version if job.toolkit is not None else "",
                job.target.platform,
                job.target.quantization is not None,
                build.compiled,
                log[-LOG_CHARS:],
            ),
            RECORD_SECONDS,
            f"model {job.model!r}: recording the conversion for baseline check",
            "",
        )
    except Exception:  # never fails the run: the table is a hint for `check`, not a result
        return
