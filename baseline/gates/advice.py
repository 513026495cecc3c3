"""Advice by cause: what the person reading a failed check in a pull request should do.

A gate knows its numbers; the advice depends on why they moved. Two causes are never a
tolerance to loosen, and every gate that may see them asks here:

- the model itself changed since the lock (its ONNX hash is not the pinned one): comparing
  today's model with the locked one is no accuracy question, so the choice is to accept the
  change (`baseline accept`) or to revert it;
- a build's outputs turned NaN or Inf: no tolerance makes that acceptable accuracy; an fp16
  build overflowed (activations past fp16's 65504), and the remedy is in the model or the build.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baseline.verification.cache import SIZE_MISMATCH

if TYPE_CHECKING:
    from baseline.gates.contract import GateInputs
    from baseline.models.lock import ModelLock
    from baseline.models.results import LayerError

ONNX_KEY = "onnx"
"""The lock key of the model file (`pinned_files`): a check that asks `model_changed` declares it."""

FP16_MAX = 65504.0


def model_changed(inputs: GateInputs) -> bool:
    """Whether the ONNX file on disk is not the one the lock pins (its size or its hash)."""
    actual = inputs.sha256(ONNX_KEY)
    return actual.startswith(SIZE_MISMATCH) or actual != inputs.model.onnx.sha256


def changed_model(model: ModelLock) -> str:
    """The advice for a model whose file changed since the lock: accept it, or revert it."""
    return (
        f"the model changed since the lock ({model.onnx.path} is not the pinned file): "
        f'`baseline accept {model.name} --reason "..."` if the change is intended, else revert it'
    )


def non_finite(where: str, layer: LayerError | None, quantized: bool) -> str:
    """The advice for outputs that turned NaN / Inf on a build: where it starts, and the remedy."""
    start = "the layer is not known" if layer is None else f"they start at layer [{layer.op}] {layer.name}"
    if quantized:
        return (
            f"{where} outputs NaN / Inf, which no tolerance makes acceptable; {start}. Check that "
            "layer's inputs and the calibration set (a NaN or Inf in a fixture or calibration image)"
        )
    return (
        f"{where} outputs NaN / Inf, which no tolerance makes acceptable; {start}. Activations past "
        f"fp16's {FP16_MAX:g} overflow: rescale or normalise them in the model, or quantize the "
        "target, keep that layer in higher precision, or run it on the CPU"
    )
