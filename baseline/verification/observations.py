"""What the real toolkit did with a model on this machine, kept for `baseline check`.

The static check predicts from the graph; `verify` also converts for real. Where the two
disagree the real compiler is right (see `gates.static.outranked`), and the outcome is kept
here, in the project's cache, keyed by the ONNX file's sha256, the toolkit version, the
platform and the precision. `baseline check` on the same file then reports what was observed
beside its prediction instead of repeating a verdict the toolkit already contradicted.

Like every cache file it is believed as written (README, "Trust model"): it only changes what
`check` prints and its exit code, never a gate of `verify`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from baseline.verification.cache import write_best_effort

FILE_NAME = "compile-observations.json"
MAX_ENTRIES = 10_000
"""Oldest entries are dropped beyond this: a zoo of 1,000 models × a few targets fits."""


@dataclass(frozen=True)
class Observation:
    compiled: bool
    """Whether load, build and export succeeded."""
    predicted: str
    """The static check's verdict in the same run: compiles, fails or unknown."""
    rules: tuple[str, ...]
    """The static rules that fired (those that said "does not compile", when it did)."""
    model: str
    """The model's name in the lock that observed it (information only)."""


def observation_key(onnx_sha256: str, toolkit: str, platform: str, quantized: bool) -> str:
    return f"{onnx_sha256}:{toolkit}:{platform}:{'quantized' if quantized else 'float'}"


class CompileObservations:
    """The observations file of one cache folder, read once and written back when changed."""

    def __init__(self, root: Path) -> None:
        self.path = root / FILE_NAME
        self._entries = _read(self.path)
        self._dirty = False

    def get(self, key: str) -> Observation | None:
        entry = self._entries.get(key)
        if not isinstance(entry, dict):
            return None
        try:
            return Observation(
                compiled=bool(entry["compiled"]),
                predicted=str(entry["predicted"]),
                rules=tuple(str(rule) for rule in entry["rules"]),
                model=str(entry["model"]),
            )
        except (KeyError, TypeError):  # an entry another version wrote: no observation
            return None

    def put(self, key: str, observation: Observation) -> None:
        entry = {**asdict(observation), "rules": list(observation.rules)}
        if self._entries.get(key) == entry:
            return
        self._entries.pop(key, None)  # re-inserted last: the newest survive the bound
        self._entries[key] = entry
        while len(self._entries) > MAX_ENTRIES:
            del self._entries[next(iter(self._entries))]
        self._dirty = True

    def save(self) -> None:
        if self._dirty:
            write_best_effort(self.path, json.dumps(self._entries, indent=0).encode())
            self._dirty = False


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
