"""Backends run a model on fixtures: onnxruntime (the golden), the RKNN simulator, a board.

They are registered by name and imported lazily, so `baseline --help` never pays for
onnxruntime or the toolkit, and a missing dependency becomes an install hint.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from baseline.backends.base import Backend, BackendJob, BackendRun
from baseline.errors import BackendUnavailable, ConfigError

GOLDEN = "onnxruntime"
"""The backend every other backend is compared with."""


@dataclass(frozen=True)
class BackendEntry:
    module: str
    attribute: str
    install_hint: str


REGISTRY: dict[str, BackendEntry] = {
    "onnxruntime": BackendEntry("baseline.backends.onnxrt", "OnnxRuntimeBackend", "pip install onnxruntime"),
    "rknn-sim": BackendEntry("baseline.backends.rknn_sim", "RknnSimBackend", "baseline toolchain install"),
    "rknn-device": BackendEntry(
        "baseline.backends.rknn_sim", "RknnDeviceBackend", "baseline toolchain install"
    ),
    "rknnlite": BackendEntry("baseline.backends.rknnlite", "RknnLiteBackend", "baseline capture"),
}
SIMULATOR = "rknn-sim"
TOOLKIT_BACKENDS = ("rknn-sim", "rknn-device")
"""Backends that run RKNN-Toolkit2 in its pinned environment."""
BOARD_BACKENDS = ("rknn-device", "rknnlite")
"""Backends that need the physical board of their target's platform."""
_instances: dict[str, Backend] = {}


def get_backend(name: str) -> Backend:
    """The backend registered as `name`; one instance per process, so workers are reused."""
    if name in _instances:
        return _instances[name]
    entry = REGISTRY.get(name)
    if entry is None:
        known = ", ".join(sorted(REGISTRY))
        raise ConfigError(f"unknown backend {name!r}; known backends: {known}")
    try:
        module = importlib.import_module(entry.module)
    except ImportError as error:
        raise BackendUnavailable(
            f"backend {name!r} is not available ({error}); install it: {entry.install_hint}"
        ) from None
    backend: Backend = getattr(module, entry.attribute)()
    _instances[name] = backend
    return backend


def is_per_target(name: str) -> bool:
    """Whether a backend's outputs depend on the target platform (everything but onnxruntime)."""
    return name != GOLDEN


__all__ = [
    "GOLDEN",
    "REGISTRY",
    "SIMULATOR",
    "Backend",
    "BackendJob",
    "BackendRun",
    "get_backend",
    "is_per_target",
]
