"""Faults injected into real ONNX files with onnx's API, for the battery (`bench/battery.py`) and
the toolkit test slice. Each edits weights only (same graph, same I/O), as a retrained or
mis-exported model would, and returns what it did in words for the report.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

FP16_MAX = 65504.0


def _constants(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    """Weights by name, whether the exporter stored them as initializers or Constant nodes."""
    found = {tensor.name: tensor for tensor in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            found[node.output[0]] = node.attribute[0].t
    return found


def _edit(model: onnx.ModelProto, name: str, change: Callable[[np.ndarray], np.ndarray]) -> None:
    tensor = _constants(model)[name]
    edited = change(numpy_helper.to_array(tensor).copy())
    tensor.CopyFrom(numpy_helper.from_array(edited.astype(numpy_helper.to_array(tensor).dtype), tensor.name))


def yolo_class_bias(path: Path, class_id: int, shift: float) -> str:
    """+`shift` on one class's logit bias in the three class convolutions of a YOLOv8 head."""
    model = onnx.load(str(path))
    for scale in range(3):

        def add(bias: np.ndarray) -> np.ndarray:
            bias[class_id] += shift
            return bias

        _edit(model, f"model.22.cv3.{scale}.2.bias", add)
    onnx.save(model, str(path))
    return f"class {class_id} logit bias +{shift:g} in model.22.cv3.*.2.bias"


def yolo_control(path: Path, shift: float = 0.003) -> str:
    """Not a fault: every class logit +`shift` (scores move by at most shift/4, no detection moves),
    as a retrain that changes nothing a user sees. Only integrity and artifact may notice it."""
    model = onnx.load(str(path))
    for scale in range(3):
        _edit(model, f"model.22.cv3.{scale}.2.bias", lambda bias: bias + np.float32(shift))
    onnx.save(model, str(path))
    return f"every class logit bias +{shift:g} in model.22.cv3.*.2.bias (a control: no detection moves)"


def yolo_box_shift(path: Path, step: float) -> str:
    """The DFL logits of the right-hand distance tilted towards far bins (bin j gets +step·j): every
    box's right edge moves out, as a wrong box-regression bias would do."""
    model = onnx.load(str(path))
    for scale in range(3):

        def tilt(bias: np.ndarray) -> np.ndarray:
            bias[32:48] += step * np.arange(16)  # DFL bins: left 0:16, top 16:32, right 32:48, bottom 48:64
            return bias

        _edit(model, f"model.22.cv2.{scale}.2.bias", tilt)
    onnx.save(model, str(path))
    return f"right-edge DFL bins tilted by +{step:g}·bin in model.22.cv2.*.2.bias"


def swapped_classifier_rows(path: Path) -> str:
    """The final layer's two class rows (weights and bias) swapped: 0° reads as 180°."""
    model = onnx.load(str(path))
    for name in ("fc_0.w_0", "fc_0.b_0"):
        _edit(model, name, lambda weights: weights[..., ::-1].copy())
    onnx.save(model, str(path))
    return "fc_0 weight and bias columns of the two classes swapped"


def swapped_ctc_rows(path: Path, first: int, second: int) -> str:
    """Two characters' columns of the recogniser's last linear layer swapped (CTC classes)."""
    model = onnx.load(str(path))

    def swap(weights: np.ndarray) -> np.ndarray:
        weights[..., [first, second]] = weights[..., [second, first]]
        return weights

    for name in ("linear_85.w_0", "linear_85.b_0"):
        _edit(model, name, swap)
    onnx.save(model, str(path))
    return f"CTC classes {first} and {second} swapped in linear_85"


def fp16_overflow(path: Path, factor: float) -> str:
    """PP-OCR det's last BatchNormalization scaled by `factor` and the ConvTranspose after its ReLU
    by 1/`factor`: the same function in float32 (ReLU is positively homogeneous), but the
    activations between the two exceed fp16's 65504."""
    model = onnx.load(str(path))
    for name in ("batch_norm_1.w_0", "batch_norm_1.b_0"):  # BN scale and offset
        _edit(model, name, lambda value: value * factor)
    _edit(model, "conv2d_transpose_1.w_0", lambda weights: weights / factor)
    onnx.save(model, str(path))
    return f"batch_norm_1 ×{factor:g}, conv2d_transpose_1 ×1/{factor:g} (ReLU between)"
