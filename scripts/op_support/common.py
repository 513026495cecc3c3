"""What every step of the op-table measurement shares: the toolkit's limits, the outcomes,
and the records of one single-op model (its case, its prepared files, its builds)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

REPO = Path(__file__).resolve().parent.parent.parent
DEFAULT_TOOLKIT = "2.5.0"
DEFAULT_TARGETS = ("rk3588", "rk3566", "rv1106")
MAX_OPSET = 19  # "Unsupport onnx opset N, need <= 19" (rknn-toolkit2 2.x)
MAX_IR = 9  # the IR version that goes with opset 19; the toolkit's onnx may read no newer
REQUEST_TIMEOUT = 60.0
QUANTIZED = {"dtype": "w8a8", "algorithm": "normal", "method": "channel"}
QUANTIZED_ONLY = "not support do_quantization = False"  # the toolkit's message for such targets
SCHEMA = 1
MESSAGE_CHARS = 240
EXAMPLES = 3
# Ops the version converter cannot take below their newest version although their opset-19
# form differs only in types or attribute spelling: op -> attribute -> {new value: old value}.
RESTAMPABLE: dict[str, dict[str, dict[str, str]]] = {
    "GlobalMaxPool": {},  # 22 added bfloat16
    "ConstantOfShape": {},  # 20, 21 added types
    "GridSample": {"mode": {"linear": "bilinear", "cubic": "bicubic"}},  # 20 renamed the modes
}

COMPILES, FAILS, CRASHES = "compiles", "fails", "crashes"
# The op's graph folds away to constants and the toolkit refuses a model with constant outputs
# only (Shape, Size ... tested alone): an artifact of testing one op, not a verdict on it.
# Only ops of shapes or of non-float parameters may fold: a float activation in, constant
# out (CenterCropPad) is the toolkit mis-evaluating the op, i.e. a failure.
FOLDED = "folded"
FOLDED_MESSAGE = re.compile(r"All outputs .* of model are constants")
SHAPE_OF = {"Shape", "Size"}
NOT_APPLICABLE, OPSET_TOO_NEW = "not-applicable", "opset-too-new"


@dataclass
class OpModel:
    """One single-operator model and one sample of its inputs (graph-input order)."""

    name: str
    op: str
    domain: str
    source: str  # "onnx-node" | "generated"
    model: onnx.ModelProto
    inputs: list[Any]


@dataclass
class Prepared:
    """A model ready to build, or the reason it cannot be asked of the toolkit at all."""

    case: OpModel
    opset: int
    dtype: str  # of the first graph input, the activation in a real model
    normalized: list[str] = field(default_factory=list)
    skipped: str | None = None  # not-applicable | opset-too-new
    reason: str = ""
    path: Path | None = None
    frozen_path: Path | None = None
    dataset: Path | None = None
    frozen_dataset: Path | None = None


@dataclass
class Build:
    """The outcome of one build: compiles / fails / crashes, the root cause and the warnings."""

    outcome: str
    error: str = ""
    rule: str = ""
    warnings: list[str] = field(default_factory=list)
    constant_inputs: bool = False  # built with every input but the first frozen

    def compact(self) -> list[Any]:
        """[variant, outcome, error, rule, warnings] as stored per model and target."""
        variant = "constant-inputs" if self.constant_inputs else "as-tested"
        return [variant, self.outcome, self.error, self.rule, self.warnings]


def main_opset(model: onnx.ModelProto) -> int:
    """The model's default-domain opset (0 when it imports none)."""
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)


def first_line(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def short(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= MESSAGE_CHARS else message[: MESSAGE_CHARS - 1] + "…"
