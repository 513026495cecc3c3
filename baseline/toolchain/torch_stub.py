"""A stand-in for torch, installed as `torch` in RKNN-Toolkit2 environments by `--torch stub`.

`rknn.api` imports torch when it starts and, while importing, touches only `torch.nn.Module`,
`torch.no_grad` and `torch.Tensor` (measured on 2.2.0, 2.3.2 and 2.5.0). Loading an ONNX
model, fp16 and int8 builds of some graphs, export, the simulator and `accuracy_analysis` then
run without torch, which is 0.9 GB of an environment's 1.5 GB; other graphs' build passes call
it (`torch.arange`), as do `gdq` quantization and PyTorch models. This module defines the
import-time names and fails on any other use with the way to get the real torch.

Runs inside the toolkit's environment only; the module registers `torch.nn` only when it is
imported as `torch`, so importing it as part of baseline changes nothing.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any, TypeVar

__version__ = "0.0.0+baseline.stub"
NEEDS_REAL_TORCH = (
    "the toolkit called torch, but this RKNN-Toolkit2 environment has baseline's stand-in "
    "(--torch stub); rebuild it with the real one: baseline toolchain install VERSION --force"
)

F = TypeVar("F", bound=Callable[..., Any])


class TorchUnavailable(RuntimeError):
    """Something in the toolkit needed the real torch."""


class Tensor:
    """Never made: `isinstance(array, torch.Tensor)` is False, so inputs take the numpy path."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TorchUnavailable(NEEDS_REAL_TORCH)


class no_grad:  # torch's name
    """A no-op as a context manager and as a decorator (`@torch.no_grad()` at import time)."""

    def __enter__(self) -> no_grad:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, function: F) -> F:
        return function


class Module:
    """Subclassed at import time; making one means a PyTorch code path, which needs the real torch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TorchUnavailable(NEEDS_REAL_TORCH)


def __getattr__(name: str) -> Any:
    raise AttributeError(f"torch.{name}: {NEEDS_REAL_TORCH}")


def _nn_getattr(name: str) -> Any:
    raise AttributeError(f"torch.nn.{name}: {NEEDS_REAL_TORCH}")


nn = types.ModuleType("torch.nn")
nn.Module = Module  # type: ignore[attr-defined]
nn.__getattr__ = _nn_getattr  # type: ignore[method-assign]
if __name__ == "torch":
    sys.modules["torch.nn"] = nn
