"""Where `baseline verify` runs a model's gates: in this process (the default) or elsewhere.

Executors are imported only when chosen (`baseline verify --executor ray`), so the default
path never pays for them.
"""

from __future__ import annotations

EXECUTORS = ("local", "ray")
"""`local`: threads in this process (`--jobs N`); `ray`: one Ray task per model."""
