"""Which pixel normalisation a CNN was trained with, measured from its first BatchNormalization.

A BatchNormalization keeps the per-channel mean and variance of what reached it in training
(`running_mean`, `running_var`). Where the image input goes straight into a Conv whose output
feeds one (PaddleOCR's exports, older PyTorch exports such as CenterFace's: 44 of the 103 image
models of the development corpus), onnxruntime runs that Conv alone on the person's photos,
normalised by each preset, and the preset whose output statistics fit the stored ones clearly
best is what the model was trained on. With 4 COCO photos, 38 of the 44 are decided, each the
preset its package's own preprocessing uses (PP-OCR detectors ImageNet, recognisers and the
v2.0 direction classifier -1..1, CenterFace 0..255); the recognisers whose 0-1 and -1..1 fits lie
within 2× of each other stay a guess (PP-OCRv2's recogniser fits 0-1 1.6× better although
PaddleOCR feeds it -1..1: an affine shift the network tolerates, which photos cannot settle).

A fused model (onnxsim, most detectors) has no statistics left: the preset stays a guess.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import onnx
from onnx import helper, numpy_helper

from baseline.files.images import image_files, load_pixels
from baseline.models.intent import ImageSet
from baseline.project.paths import ProjectPaths

if TYPE_CHECKING:
    import numpy as np

FIT_LIMIT = 1.0
"""Median over channels of the Gaussian KL divergence from the photos' Conv output to the stored
statistics: above this, no preset is what the model saw (measured fits were 0.05-0.99)."""
MARGIN = 2.0
"""The runner-up preset fits at least this many times worse, or the measurement decides nothing:
at 1.5 PP-OCRv2's recogniser was decided 0-1 (0.32 against -1..1's 0.51), the one decision of 44
against its package's preprocessing; PP-OCRv3/v5 recognisers decide -1..1 at 3x (0.18 vs 0.55)."""
MAX_PHOTOS = 4
MAX_CONV_WEIGHTS = 1 << 20
"""Elements of the first Conv's weight: a stem is a few thousand; a larger one is not measured."""


@dataclass(frozen=True)
class Measured:
    preset: str
    layer: str
    """The BatchNormalization whose statistics decided it."""
    fits: dict[str, float]
    """Every preset's fit (lower is closer), best first."""

    def runner_up(self) -> tuple[str, float]:
        return next((name, fit) for name, fit in self.fits.items() if name != self.preset)

    def summary(self) -> str:
        name, fit = self.runner_up()
        best = self.fits[self.preset]
        return (
            f"the first BatchNormalization ({self.layer!r}) matches photos normalised {self.preset} "
            f"(divergence {best:.2g}; next best {name}, {fit:.2g})"
        )


@dataclass(frozen=True)
class _Stem:
    input: str
    conv: onnx.NodeProto
    weights: list[onnx.TensorProto]
    mean: np.ndarray
    var: np.ndarray
    layer: str
    opset: int
    ir_version: int


def measure_normalisation(
    model: onnx.ModelProto,
    image_input: str,
    shape: list[int],
    root: Path,
    images: str,
    presets: dict[str, tuple[list[float], list[float], str]],
) -> Measured | None:
    """The preset the first BatchNormalization's statistics say, or None where the model has no
    such layer after its first Conv, the photos cannot be read, or no preset fits clearly."""
    stem = _stem(model, image_input)
    if stem is None or len(shape) != 4 or shape[1] != 3:
        return None
    files = image_files(ProjectPaths(root).resolve, images, "--images", limit=MAX_PHOTOS)[:MAX_PHOTOS]
    pixels = _pixels(files, shape[2], shape[3], images)
    fits = {name: _fit(stem, pixels, mean, std) for name, (mean, std, _) in presets.items()}
    ranked = dict(sorted(fits.items(), key=lambda item: item[1]))
    best, second = list(ranked.values())[:2]
    if not math.isfinite(best) or best > FIT_LIMIT or second < MARGIN * best:
        return None
    return Measured(next(iter(ranked)), stem.layer, ranked)


def _stem(model: onnx.ModelProto, image_input: str) -> _Stem | None:
    """The Conv reading the image input directly and the BatchNormalization reading its output."""
    constants = _constants(model)
    conv = next((n for n in model.graph.node if n.op_type == "Conv" and n.input[:1] == [image_input]), None)
    if conv is None or not conv.output:
        return None
    readers = [n for n in model.graph.node if n.input[:1] == [conv.output[0]]]
    norm = next((n for n in readers if n.op_type == "BatchNormalization"), None)
    if norm is None or len(norm.input) < 5:
        return None
    weights = [constants.get(name) for name in conv.input[1:] if name]
    stats = [constants.get(name) for name in norm.input[3:5]]
    if any(t is None or _external(t) for t in (*weights, *stats)):
        return None
    if math.prod(weights[0].dims) > MAX_CONV_WEIGHTS:  # type: ignore[union-attr]
        return None
    try:  # the file's own bytes: a tensor whose data does not match its dims measures nothing
        mean, var = (numpy_helper.to_array(t).astype("float64").reshape(-1) for t in stats)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return None
    if mean.size != var.size:
        return None
    epsilon = next((a.f for a in norm.attribute if a.name == "epsilon"), 1e-5)
    layer = norm.name or norm.output[0]
    return _Stem(image_input, conv, weights, mean, var + epsilon, layer, _opset(model), model.ir_version)  # type: ignore[arg-type]


def _constants(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    """Initializers and Constant nodes' values, by name (paddle2onnx writes weights as either)."""
    found = {tensor.name: tensor for tensor in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None:
                found[node.output[0]] = value
    return found


def _external(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL


def _opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)


def _pixels(files: list[Path], height: int, width: int, images: str) -> np.ndarray:
    import numpy as np

    spec = ImageSet(path=images)
    return np.stack([load_pixels(file, height, width, spec) for file in files]).astype(np.float32)


def _fit(stem: _Stem, pixels: np.ndarray, mean: list[float], std: list[float]) -> float:
    """Median over channels of KL(photos' Conv output ‖ stored statistics), both as Gaussians."""
    import numpy as np

    normalised = (pixels - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    output = _run_conv(stem, np.ascontiguousarray(normalised.transpose(0, 3, 1, 2)))
    if output.ndim != 4 or output.shape[1] != stem.mean.size:
        return math.inf
    seen_mean = output.mean(axis=(0, 2, 3))
    seen_var = output.var(axis=(0, 2, 3)) + 1e-12
    usable = (stem.var > 0) & np.isfinite(stem.var) & np.isfinite(stem.mean)
    if not usable.any():
        return math.inf
    ratio = seen_var[usable] / stem.var[usable]
    shift = (seen_mean[usable] - stem.mean[usable]) ** 2 / stem.var[usable]
    divergence = 0.5 * (shift + ratio - 1 - np.log(ratio))
    return float(np.median(divergence))


def _run_conv(stem: _Stem, batch: np.ndarray) -> np.ndarray:
    import numpy as np
    import onnxruntime as ort

    inputs = [helper.make_tensor_value_info(stem.input, onnx.TensorProto.FLOAT, [None, 3, None, None])]
    outputs = [helper.make_tensor_value_info(stem.conv.output[0], onnx.TensorProto.FLOAT, None)]
    weights = []
    for name, tensor in zip([n for n in stem.conv.input[1:] if n], stem.weights, strict=True):
        copy = onnx.TensorProto()
        copy.CopyFrom(tensor)
        copy.name = name
        weights.append(copy)
    graph = helper.make_graph([stem.conv], "stem", inputs, outputs, weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", stem.opset)])
    model.ir_version = max(stem.ir_version, 4)  # the source's: its opset is one that IR allows
    options = ort.SessionOptions()
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return np.asarray(session.run(None, {stem.input: batch})[0], dtype=np.float64)
    except Exception:  # onnxruntime's own classes: a stem it cannot run measures nothing
        return np.zeros((0,))
