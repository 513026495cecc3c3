"""Backends run a model on fixtures: onnxruntime (the golden), the RKNN simulator, a board.

They are registered by name with what they can do (`Capabilities`) and imported lazily, so
planning a verification and `baseline --help` never pay for onnxruntime or the toolkit, and a
missing dependency becomes an install hint. Every other layer asks a backend's capabilities
instead of comparing its name.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass

from baseline.backends.base import Backend, BackendJob, BackendRun, Capabilities
from baseline.errors import BackendUnavailable, ConfigError

GOLDEN = "onnxruntime"
"""The backend every other backend is compared with."""
SIMULATOR = "rknn-sim"
"""The toolkit's simulator: what `baseline matrix` converts and runs with each toolkit version."""


@dataclass(frozen=True)
class BackendEntry:
    module: str
    attribute: str
    install_hint: str
    capabilities: Capabilities


REGISTRY: dict[str, BackendEntry] = {
    GOLDEN: BackendEntry(
        "baseline.backends.onnxrt", "OnnxRuntimeBackend", "pip install onnxruntime", Capabilities()
    ),
    SIMULATOR: BackendEntry(
        "baseline.backends.rknn_sim",
        "RknnSimBackend",
        "baseline toolchain install",
        Capabilities(converts=True, uses_toolkit=True),
    ),
    "rknn-device": BackendEntry(
        "baseline.backends.rknn_sim",
        "RknnDeviceBackend",
        "baseline toolchain install",
        Capabilities(converts=True, uses_toolkit=True, needs_board=True),
    ),
    "rknnlite": BackendEntry(
        "baseline.backends.rknnlite",
        "RknnLiteBackend",
        "baseline capture",
        Capabilities(needs_board=True, reads_captures=True, runs_pinned_artifact=True),
    ),
}
_instances: dict[str, Backend] = {}
_instances_guard = threading.Lock()


def capabilities(name: str) -> Capabilities:
    """What the backend registered as `name` does, without importing it."""
    return _entry(name).capabilities


def converter(backends: list[str]) -> str | None:
    """The backend whose conversion the compilable and artifact gates judge: the first listed
    that converts (the simulator, or a board run through the toolkit), None if none does."""
    return next((name for name in backends if capabilities(name).converts), None)


def uses_toolkit(backends: list[str]) -> bool:
    return any(capabilities(name).uses_toolkit for name in backends)


def needs_board(backends: list[str]) -> bool:
    return any(capabilities(name).needs_board for name in backends)


def get_backend(name: str) -> Backend:
    """The backend registered as `name`; one instance per process, so workers are reused.

    Parallel jobs ask for it at the same time: without the guard each thread made its own
    simulator, and the one that lost the race was collected with its scratch folder while its
    caller still had to read the `.rknn` built there (`lock --jobs 2` on a fresh project)."""
    with _instances_guard:
        if name not in _instances:
            _instances[name] = _create(name)
        return _instances[name]


def _create(name: str) -> Backend:
    entry = _entry(name)
    try:
        module = importlib.import_module(entry.module)
    except ImportError as error:
        raise BackendUnavailable(
            f"backend {name!r} is not available ({error}); install it: {entry.install_hint}"
        ) from None
    backend: Backend = getattr(module, entry.attribute)()
    backend.capabilities = entry.capabilities  # declared here, beside the registration
    return backend


def _entry(name: str) -> BackendEntry:
    entry = REGISTRY.get(name)
    if entry is None:
        known = ", ".join(sorted(REGISTRY))
        raise ConfigError(f"unknown backend {name!r}; known backends: {known}")
    return entry


__all__ = [
    "GOLDEN",
    "REGISTRY",
    "SIMULATOR",
    "Backend",
    "BackendJob",
    "BackendRun",
    "Capabilities",
    "capabilities",
    "converter",
    "get_backend",
    "needs_board",
    "uses_toolkit",
]
