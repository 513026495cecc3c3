"""Task-level comparisons of golden and candidate outputs: what the model does, not what its tensors hold.

Plain numpy. `compare_task(spec, golden, candidate)` is the entry; the modules below it
hold the decoders and metrics, each usable on its own. Names are imported on first use, so
`baseline.tasks.locking` (which `verify` needs on every run) never pays for numpy.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "compare_task": "baseline.tasks.compare",
    "compare_part": "baseline.tasks.parts",
    "part_statistics": "baseline.tasks.parts",
    "slice_part": "baseline.tasks.parts",
    "split_parts": "baseline.tasks.parts",
    "stats_with_parts": "baseline.tasks.parts",
    "part_channels": "baseline.tasks.parts",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'baseline.tasks' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
