"""How a verification reports its jobs as they finish, shared by the library and the CLI."""

from __future__ import annotations

from collections.abc import Callable

JobProgress = Callable[[int, int, str], None]
"""Called as jobs finish (gate checks done, total, label) and once more when all are done."""

CACHED_SUFFIX = " (cached)"
"""Ends the label of a job answered from the cache rather than run."""
