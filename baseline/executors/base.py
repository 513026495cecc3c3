"""What the commands hand the executors: `Task`s and the `ExecutorOptions` that say where they run.

Here, below both executors (`baseline.executors` runs them in threads and loads
`ray_executor` only when Ray is chosen), so that each imports these without the other.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from baseline.errors import BackendUnavailable

EXECUTORS = ("local", "ray")
"""`local`: threads in this process (`--jobs N`); `ray`: Ray tasks (small jobs batched)."""


@dataclass(frozen=True)
class ExecutorOptions:
    """Where a command's jobs run (`--executor`, `--jobs`, `--address`)."""

    executor: str = "local"
    """One of `EXECUTORS`."""
    jobs: int = 1
    """With `local`: jobs run at once (threads, each toolkit job borrowing its own worker; or, for
    verify's onnxruntime-only jobs, forked processes: `baseline.executors.processes`)."""
    address: str | None = None
    """With `ray`: the cluster to join; None starts a local one."""

    def __post_init__(self) -> None:
        # checked when the options are made, so a missing Ray stops the command before any work
        if self.executor == "ray" and importlib.util.find_spec("ray") is None:
            raise BackendUnavailable(
                "--executor ray needs Ray, which is not installed here: "
                "pip install 'rknn-baseline[ray]' (or use --executor local)"
            )


@dataclass(frozen=True)
class Task:
    """One independent job: `call(*args)`, where `call` is importable on every node."""

    name: str
    """Shown in progress lines and as the Ray task's name, e.g. `verify classifier rknn-sim/rk3588`."""
    call: Callable[..., Any]
    args: tuple[Any, ...]
    resources: dict[str, float] = field(default_factory=dict)
    """Ray custom resources the job needs: one unit per board platform it runs on."""
    owner: str = ""
    """Whose job this is, for errors about it (e.g. `model 'detector' (rknnlite on rk3588)`)."""
    small: bool = False
    """Milliseconds of work (no toolkit, no board): Ray runs small tasks several to one Ray task,
    where its own per-task cost would otherwise outweigh the job."""


Done = Callable[[int, Any, float], None]
"""Called in the calling thread as each task finishes: (its index, its value, seconds it ran)."""
