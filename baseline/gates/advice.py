"""Advice by cause: what the person reading a failed check in a pull request should do.

A gate knows its numbers; the advice depends on why they moved. Two causes are never a
tolerance to loosen, and every gate that may see them asks here:

- the model itself changed since the lock (its ONNX hash is not the pinned one): comparing
  today's model with the locked one is no accuracy question, so the choice is to accept the
  change (`baseline accept`) or to revert it;
- a build's outputs turned NaN or Inf: no tolerance makes that acceptable accuracy; an fp16
  build overflowed (activations past fp16's 65504), and the remedy is in the model or the build.

A build that agrees less with onnxruntime than its tolerance allows is an accuracy question:
the remedy comes first (for a quantized build, `baseline explore` converts the remedies and names
the best; for a float one, the layer where it diverges), a tolerance to loosen last, and only
"if this accuracy is acceptable".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baseline.verification.cache import SIZE_MISMATCH

if TYPE_CHECKING:
    from baseline.gates.contract import GateInputs
    from baseline.models.lock import ModelLock
    from baseline.models.results import GateResult, LayerError

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


def unjudged(result: GateResult, inputs: GateInputs) -> GateResult:
    """A check that could not run (no outputs) after the model file changed: the change is the cause,
    so it gets the advice every other row of that model gives, not a bare "no outputs" (a zeroed
    head conv made the toolkit drop CenterFace's heatmap output, and those rows said only that)."""
    if result.hint is not None or not model_changed(inputs):
        return result
    return result.but(hint=changed_model(inputs.model))


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


EXACT_ALONE = 0.9999
"""A layer fed onnxruntime's inputs that reproduces its output at this cosine has no error of its
own to fix (the toolkit's `single` column)."""


def inaccurate(
    model: ModelLock, target: str | None, layer: LayerError | None, loosen: str, *, changed: bool
) -> str:
    """The advice for a build less accurate than its tolerance: the remedy for its precision,
    then the tolerance that would accept it (`loosen`, ending "if this accuracy is acceptable").
    `changed`: the model's file is not the pinned one, so the change is what lost the accuracy."""
    cause = "the changed model's build" if changed else "the build"
    where = "" if layer is None else f" from layer [{layer.op}] {layer.name} on"
    if model.quantized(target):
        remedy = f"{cause} loses accuracy to quantization{where}: {_explore(model, target)}"
    elif layer is not None and layer.single_cosine >= EXACT_ALONE:
        # team run 20: a PP-OCRv6 detector's closing Sigmoid, exact on its own, was named the
        # place to fix: fp16 rounding accumulated over the whole graph, no layer to fix
        remedy = (
            f"{cause} diverges from onnxruntime by fp16 error that accumulates over the graph: no "
            f"layer diverges on its own (the first below the floor, [{layer.op}] {layer.name}, has "
            f"cosine {layer.single_cosine:.5f} alone)"
        )
    else:
        remedy = f"{cause} diverges from onnxruntime{where}: fix the model or the conversion there"
    return f"{remedy}; {loosen}"


def quantization_broke(model: ModelLock, target: str | None) -> str:
    """The advice for a changed model whose float outputs still match the lock while its quantized
    build's moved: accepting would ship the loss, reverting would drop a change that behaves."""
    return (
        f"the changed model still behaves in onnxruntime (its outputs are within the lock's drift "
        f"tolerance) but this int8 build's outputs moved: the change broke quantization. "
        f"{_explore(model, target)}; the consistency row of this target names the first divergent "
        "layer. Accept the change only once a remedy holds"
    )


def _explore(model: ModelLock, target: str | None) -> str:
    return (
        f"`baseline explore {model.name} --target {target}` converts the remedies (algorithms, "
        "per-layer scales, float16 layers, wider dtypes) and names the best"
    )


def changed_artifact(model: ModelLock, changed: bool) -> str:
    """The advice for a `.rknn` that differs from the pinned one: an ONNX change is accepted or
    reverted like any other; the same ONNX built differently means the conversion or the toolkit
    environment moved, which `baseline lock` pins when intended."""
    if changed:
        return changed_model(model)
    return (
        f"the same {model.onnx.path} built differently (conversion settings or the toolkit's "
        "environment): if that is intended, run `baseline lock` to pin the new artifact"
    )
