"""Measure which ONNX operators RKNN-Toolkit2 compiles, per target, with the real toolkit.

    python scripts/measure_op_support.py [--toolkit 2.5.0] [--targets rk3588,rk3566,rv1106]
                                         [--limit N] [--only REGEX] [--out PATH]

Every single-operator model in ONNX's own node tests (skipping the `_expanded` function
variants), plus a few generated models of common NPU ops with constant weights, is loaded,
built and exported for each target through baseline's toolkit worker (no simulation, no
board). The outcome of every build is kept, and aggregated per op type and target into
`baseline/data/op_support/rknn-toolkit2-<version>.json`, which `baseline.static_check` reads:

    ops[op_type][target] = {"status": "supported" | "partial" | "unsupported" | ..., ...}

Test models make every operand a graph input, although in exported models weights, shapes,
axes and sizes are constants. When such a build fails, the model is built again with every
input but the first frozen into an initializer (from the test's own data); an op that only
compiles that way is counted as compiled and marked in `compiled_with_constant_inputs`.
Targets that cannot build without quantization (measured: the toolkit refuses
`do_quantization=False` for rv1106) are built w8a8, calibrated on the test's own inputs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, version_converter

from baseline.toolchain.client import ToolkitWorker, WorkerFailure
from baseline.toolchain.diagnostics import explain, parse_log
from baseline.toolchain.provision import ensure_toolchain

REPO = Path(__file__).resolve().parent.parent
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


# ---------------------------------------------------------------------------------------------
# Collecting models


def main_opset(model: onnx.ModelProto) -> int:
    """The model's default-domain opset (0 when it imports none)."""
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)


def node_test_dir() -> Path:
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"


def shipped_node_tests() -> Iterator[tuple[str, onnx.ModelProto, list[Any]]]:
    """(name, model, inputs) for each node test shipped as files in the onnx package."""
    for directory in sorted(node_test_dir().glob("*/")):
        model_path = directory / "model.onnx"
        if not model_path.is_file():
            continue
        inputs: list[Any] = []
        for path in sorted((directory / "test_data_set_0").glob("input_*.pb"), key=_pb_index):
            tensor = TensorProto()
            try:
                tensor.ParseFromString(path.read_bytes())
                inputs.append(numpy_helper.to_array(tensor))
            except Exception:  # a sequence / optional value: the model is not applicable anyway
                inputs.append(None)
        yield directory.name, onnx.load(model_path), inputs


def _pb_index(path: Path) -> int:
    return int(path.stem.rsplit("_", 1)[1])


def generated_node_tests() -> Iterator[tuple[str, onnx.ModelProto, list[Any]]]:
    """The same tests built in memory by onnx's generators (wheels >= 1.20 ship no files)."""
    from onnx.backend.test.case import node

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = node.collect_testcases()
    for case in sorted(cases, key=lambda c: c.name):
        if case.model is None:
            continue
        inputs = [as_array(value) for value in case.data_sets[0][0]] if case.data_sets else []
        yield case.name, case.model, inputs


def as_array(value: Any) -> Any:
    """Test inputs come as arrays, numpy scalars or TensorProtos; sequences stay as they are."""
    if isinstance(value, TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


def collect_node_tests() -> tuple[list[OpModel], str]:
    """ONNX's single-node test models grouped by their op, without `_expanded` variants."""
    if node_test_dir().is_dir():
        source, tests = "onnx/backend/test/data/node/*/model.onnx", shipped_node_tests()
    else:
        source, tests = "onnx.backend.test.case.node.collect_testcases()", generated_node_tests()
    models = []
    for name, model, inputs in tests:
        if "_expanded" in name or len(model.graph.node) != 1:
            continue
        node = model.graph.node[0]
        models.append(OpModel(name, node.op_type, node.domain, "onnx-node", model, inputs))
    return models, source


# ---------------------------------------------------------------------------------------------
# Generated models of common NPU ops: float32 NCHW inputs, constant weights and parameters


def _single_op_model(
    name: str,
    op: str,
    inputs: dict[str, list[int]],
    constants: dict[str, np.ndarray],
    operands: list[str],
    opset: int = 17,
    outputs: int = 1,
    **attributes: Any,
) -> OpModel:
    rng = np.random.default_rng(len(name))
    graph_inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()]
    names = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, operands, names, name=op.lower(), **attributes)
    graph = helper.make_graph(
        [node],
        name,
        graph_inputs,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names],
        [numpy_helper.from_array(value, key) for key, value in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    samples = [rng.standard_normal(shape).astype(np.float32) for shape in inputs.values()]
    return OpModel(name, op, "", "generated", model, samples)


def _weights(*shape: int) -> np.ndarray:
    return (np.random.default_rng(sum(shape)).standard_normal(shape) * 0.1).astype(np.float32)


def _ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _floats(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def generated_models() -> list[OpModel]:
    """Common NPU ops the way exporters emit them: everything but the activations constant."""
    x = {"x": [1, 8, 16, 16]}
    conv = {"W": _weights(16, 8, 3, 3), "B": _weights(16)}
    seq = {"x": [4, 1, 8]}  # sequence, batch, features
    lstm = {"W": _weights(1, 64, 8), "R": _weights(1, 64, 16), "B": _weights(1, 128)}
    gru = {"W": _weights(1, 48, 8), "R": _weights(1, 48, 16), "B": _weights(1, 96)}
    rnn = {"W": _weights(1, 16, 8), "R": _weights(1, 16, 16), "B": _weights(1, 32)}
    m = _single_op_model
    return [
        m("gen_conv_3x3", "Conv", x, conv, ["x", "W", "B"], pads=[1, 1, 1, 1]),
        m("gen_conv_3x3_stride2", "Conv", x, conv, ["x", "W", "B"], pads=[1, 1, 1, 1], strides=[2, 2]),
        m("gen_conv_1x1", "Conv", x, {"W": _weights(32, 8, 1, 1)}, ["x", "W"]),
        m("gen_conv_depthwise", "Conv", x, {"W": _weights(8, 1, 3, 3)}, ["x", "W"], group=8, pads=[1] * 4),
        m("gen_conv_dilated", "Conv", x, conv, ["x", "W", "B"], dilations=[2, 2], pads=[2, 2, 2, 2]),
        m(
            "gen_convtranspose_2x2_stride2",
            "ConvTranspose",
            x,
            {"W": _weights(8, 4, 2, 2)},
            ["x", "W"],
            strides=[2, 2],
        ),
        m(
            "gen_convtranspose_4x4_stride2",
            "ConvTranspose",
            x,
            {"W": _weights(8, 8, 4, 4)},
            ["x", "W"],
            strides=[2, 2],
            pads=[1, 1, 1, 1],
        ),
        m(
            "gen_gemm_transb",
            "Gemm",
            {"x": [1, 64]},
            {"B": _weights(32, 64), "C": _weights(32)},
            ["x", "B", "C"],
            transB=1,
        ),
        m("gen_matmul_constant", "MatMul", {"x": [1, 16, 64]}, {"W": _weights(64, 32)}, ["x", "W"]),
        m("gen_matmul_two_inputs", "MatMul", {"a": [1, 4, 16, 32], "b": [1, 4, 32, 16]}, {}, ["a", "b"]),
        m(
            "gen_resize_nearest_scales",
            "Resize",
            x,
            {"scales": _floats(1, 1, 2, 2)},
            ["x", "", "scales"],
            mode="nearest",
        ),
        m(
            "gen_resize_linear_sizes",
            "Resize",
            x,
            {"sizes": _ints(1, 8, 32, 32)},
            ["x", "", "", "sizes"],
            mode="linear",
        ),
        m(
            "gen_resize_linear_align_corners",
            "Resize",
            x,
            {"scales": _floats(1, 1, 2, 2)},
            ["x", "", "scales"],
            mode="linear",
            coordinate_transformation_mode="align_corners",
        ),
        m(
            "gen_concat_channels",
            "Concat",
            {"a": [1, 8, 16, 16], "b": [1, 4, 16, 16]},
            {},
            ["a", "b"],
            axis=1,
        ),
        m("gen_reshape_constant", "Reshape", x, {"shape": _ints(1, 8, 256)}, ["x", "shape"]),
        m("gen_transpose_nhwc", "Transpose", x, {}, ["x"], perm=[0, 2, 3, 1]),
        m("gen_softmax_channels", "Softmax", x, {}, ["x"], axis=1),
        m("gen_softmax_last", "Softmax", x, {}, ["x"], axis=-1),
        m("gen_sigmoid", "Sigmoid", x, {}, ["x"]),
        m("gen_maxpool_2x2_stride2", "MaxPool", x, {}, ["x"], kernel_shape=[2, 2], strides=[2, 2]),
        m("gen_maxpool_3x3_pad1", "MaxPool", x, {}, ["x"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        m("gen_averagepool_2x2_stride2", "AveragePool", x, {}, ["x"], kernel_shape=[2, 2], strides=[2, 2]),
        m("gen_averagepool_3x3_pad1", "AveragePool", x, {}, ["x"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        m("gen_globalaveragepool", "GlobalAveragePool", x, {}, ["x"]),
        m("gen_globalmaxpool", "GlobalMaxPool", x, {}, ["x"]),
        m(
            "gen_batchnormalization",
            "BatchNormalization",
            x,
            {"s": _weights(8) + 1, "b": _weights(8), "mean": _weights(8), "var": np.abs(_weights(8)) + 1},
            ["x", "s", "b", "mean", "var"],
        ),
        m("gen_relu", "Relu", x, {}, ["x"]),
        m("gen_leakyrelu", "LeakyRelu", x, {}, ["x"], alpha=0.1),
        m("gen_clip_relu6", "Clip", x, {"lo": np.float32(0), "hi": np.float32(6)}, ["x", "lo", "hi"]),
        m("gen_hardswish", "HardSwish", x, {}, ["x"]),
        m("gen_add_channel_bias", "Add", x, {"b": _weights(1, 8, 1, 1)}, ["x", "b"]),
        m("gen_mul_two_inputs", "Mul", {"a": [1, 8, 16, 16], "b": [1, 8, 16, 16]}, {}, ["a", "b"]),
        m(
            "gen_slice_constant",
            "Slice",
            x,
            {"s": _ints(0, 2), "e": _ints(4, 14), "a": _ints(1, 2)},
            ["x", "s", "e", "a"],
        ),
        m("gen_split_constant", "Split", x, {"sizes": _ints(4, 4)}, ["x", "sizes"], axis=1, outputs=2),
        m("gen_lstm", "LSTM", seq, lstm, ["x", "W", "R", "B"], hidden_size=16, outputs=3),
        m("gen_gru", "GRU", seq, gru, ["x", "W", "R", "B"], hidden_size=16, outputs=2),
        m("gen_rnn", "RNN", seq, rnn, ["x", "W", "R", "B"], hidden_size=16, outputs=2),
        m("gen_pad_constant", "Pad", x, {"pads": _ints(0, 0, 1, 1, 0, 0, 1, 1)}, ["x", "pads"]),
    ]


# ---------------------------------------------------------------------------------------------
# Normalizing what the toolkit can be asked


def prepare(case: OpModel, directory: Path) -> Prepared:
    """Skip what RKNN cannot be asked, bring the opset down to 19, write model and dataset files."""
    prepared = Prepared(case, main_opset(case.model), first_input_dtype(case.model))
    model = case.model
    reason = not_applicable_reason(model, case.inputs)
    if reason:
        prepared.skipped, prepared.reason = NOT_APPLICABLE, reason
        return prepared
    if prepared.opset == 0:  # ai.onnx.ml / training ops alone: the toolkit needs a default opset
        model = with_default_opset(model)
        prepared.normalized.append(f"default opset {MAX_OPSET} added")
    elif prepared.opset > MAX_OPSET:
        try:
            model = lower_opset(model, prepared.normalized)
        except Exception as error:
            reason = re.sub(r"^\S+\.h:\d+: [\w:]+: ", "", first_line(error))  # onnx's source location
            prepared.skipped, prepared.reason = OPSET_TOO_NEW, short(reason)
            return prepared
    if model.ir_version > MAX_IR:
        prepared.normalized.append(f"ir {model.ir_version}->{MAX_IR}")
        model.ir_version = MAX_IR
    directory.mkdir(parents=True, exist_ok=True)
    prepared.path = directory / "model.onnx"
    onnx.save(model, prepared.path)
    prepared.dataset = write_dataset(case.inputs, directory / "calibration")
    if len(model.graph.input) > 1:
        prepared.frozen_path = directory / "frozen.onnx"
        onnx.save(freeze_inputs(model, case.inputs), prepared.frozen_path)
        prepared.frozen_dataset = write_dataset(case.inputs[:1], directory / "calibration-frozen")
    return prepared


def first_input_dtype(model: onnx.ModelProto) -> str:
    if not model.graph.input or not model.graph.input[0].type.HasField("tensor_type"):
        return ""
    return str(helper.tensor_dtype_to_np_dtype(model.graph.input[0].type.tensor_type.elem_type))


def not_applicable_reason(model: onnx.ModelProto, inputs: list[Any]) -> str:
    """Why RKNN cannot even be asked (non-tensor or no inputs, missing data), or ""."""
    if not model.graph.input:
        return "no graph inputs"
    for value in model.graph.input:
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type":
            return f"input {value.name!r} has a {kind.replace('_type', '')} type, not a tensor type"
        if value.type.tensor_type.elem_type == TensorProto.STRING:
            return f"input {value.name!r} is a string tensor"
    if len(inputs) != len(model.graph.input) or any(not isinstance(a, np.ndarray) for a in inputs):
        return "the test's input data does not match its graph inputs"
    return ""


def lower_opset(model: onnx.ModelProto, notes: list[str]) -> onnx.ModelProto:
    """The model at opset 19: onnx's version converter, else a re-stamp for a few known ops.

    The converter has no down-adapter for some ops whose newer version only added types or
    renamed attribute values; for those (RESTAMPABLE) the opset number is lowered, the
    values renamed back, and the result kept only when the full checker accepts it.
    """
    opset = main_opset(model)
    try:
        lowered = version_converter.convert_version(model, MAX_OPSET)
        onnx.checker.check_model(lowered)
        notes.append(f"opset {opset}->{MAX_OPSET}")
        return lowered
    except Exception as converter_error:
        if model.graph.node[0].op_type not in RESTAMPABLE:
            raise
        try:
            restamped = restamp(model)
            onnx.checker.check_model(restamped, full_check=True)
        except Exception:
            raise converter_error from None
        notes.append(f"opset {opset}->{MAX_OPSET} (re-stamped; the converter has no adapter)")
        return restamped


def restamp(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy declaring opset 19, with the node's attribute values renamed to that version's."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for entry in copy.opset_import:
        if entry.domain in ("", "ai.onnx"):
            entry.version = MAX_OPSET
    copy.ir_version = min(copy.ir_version, MAX_IR)
    node = copy.graph.node[0]
    for attribute in node.attribute:
        renames = RESTAMPABLE[node.op_type].get(attribute.name, {})
        if attribute.type == onnx.AttributeProto.STRING and attribute.s.decode() in renames:
            attribute.s = renames[attribute.s.decode()].encode()
    return copy


def with_default_opset(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy importing the default domain at opset 19 too (the toolkit converts that domain)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.opset_import.append(helper.make_opsetid("", MAX_OPSET))
    return copy


def freeze_inputs(model: onnx.ModelProto, inputs: list[np.ndarray]) -> onnx.ModelProto:
    """The model with every graph input but the first turned into an initializer of its test value."""
    frozen = onnx.ModelProto()
    frozen.CopyFrom(model)
    graph = frozen.graph
    kept, constants = graph.input[:1], list(zip(graph.input[1:], inputs[1:], strict=True))
    for value, array in constants:
        graph.initializer.append(numpy_helper.from_array(np.asarray(array), value.name))
    del graph.input[:]
    graph.input.extend(kept)
    return frozen


def finite(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind != "f":
        return array
    return np.asarray(np.nan_to_num(array, nan=0.0, posinf=0.0, neginf=0.0))


def write_dataset(inputs: list[np.ndarray], directory: Path) -> Path | None:
    """dataset.txt with one calibration sample (one .npy per input) for quantized targets.

    NaN and Inf (several tests feed them on purpose) become 0: they would break calibration,
    not the op. None when numpy cannot store an input without pickle (bfloat16, float8,
    int4 ...): a quantized build of such a model is then sent without a dataset and fails.
    """
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, array in enumerate(inputs):
        path = directory / f"input{index}.npy"
        try:
            np.save(path, finite(np.asarray(array)), allow_pickle=False)
        except ValueError:
            return None
        paths.append(str(path))
    dataset = directory / "dataset.txt"
    dataset.write_text(" ".join(paths) + "\n")
    return dataset


# ---------------------------------------------------------------------------------------------
# Building


@dataclass
class TargetSettings:
    """How one target is built, and the warnings its plain Conv probe already gets."""

    platform: str
    quantization: dict[str, str] | None = None
    note: str = ""
    common_warnings: list[str] = field(default_factory=list)


class Builder:
    """One toolkit worker building models for one target; crashes restart it on the next build."""

    def __init__(self, worker: ToolkitWorker, settings: TargetSettings, scratch: Path) -> None:
        self.worker = worker
        self.settings = settings
        self.scratch = scratch

    def build(self, onnx_path: Path, dataset: Path | None) -> Build:
        """Load, build and export one model; never simulate (no "inputs"), never a board."""
        workdir = Path(tempfile.mkdtemp(prefix=f"{self.settings.platform}-", dir=self.scratch))
        request: dict[str, Any] = {
            "op": "build",
            "onnx": str(onnx_path),
            "platform": self.settings.platform,
            "workdir": str(workdir),
            "quantization": self.settings.quantization,
            "export": str(workdir / "model.rknn"),
        }
        if self.settings.quantization is not None:
            request["dataset"] = str(dataset) if dataset else None
        try:
            reply = self.worker.request(request, timeout=REQUEST_TIMEOUT)
        except WorkerFailure as failure:
            return Build(CRASHES, crash_message(failure), crash_rule(str(failure)))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        result = classify(reply.response, reply.log)
        result.warnings = [w for w in result.warnings if w not in self.settings.common_warnings]
        return result


def crash_message(failure: WorkerFailure) -> str:
    """The worker's death, with the last error the compiler printed before it, if any."""
    logged = [d for d in parse_log("\n".join(failure.log_tail)) if d.level == "E" and d.severity != "benign"]
    message = str(failure)
    if logged:
        message += f"; last logged: {logged[-1].message}"
    return short(clean_message(message))


def crash_rule(message: str) -> str:
    if "did not answer" in message:
        return "timeout"
    match = re.search(r"killed by (SIG\w+)", message)
    return match.group(1).lower() if match else "worker-died"


def classify(response: dict[str, Any], log: str) -> Build:
    """compiles / fails, with the root cause (and its rule) and the non-benign warnings."""
    diagnostics = parse_log(log)
    warned = sorted({warning_name(d) for d in diagnostics if d.level == "W" and d.severity != "benign"})
    if response["ok"]:
        return Build(COMPILES, warnings=warned)
    error = (response.get("error") or "").strip()
    cause = explain(error)
    if cause.rule == "unknown" and re.fullmatch(r"\w+ returned -?\d+", error):
        # "build returned -1": the reason is in the log, in its first non-benign error line
        logged = [d for d in diagnostics if d.level == "E" and d.severity != "benign"]
        if logged:
            cause = logged[0]
            error = cause.message
    if cause.rule == "unknown" and FOLDED_MESSAGE.search(error):
        return Build(FOLDED, short(clean_message(error)), "constant-outputs", warned)
    return Build(FAILS, short(clean_message(error)), cause.rule, warned)


def warning_name(diagnostic: Any) -> str:
    """The rule of a known warning; an unknown one by its message, names and numbers masked."""
    if diagnostic.rule != "unknown":
        return str(diagnostic.rule)
    message = re.sub(r"'[^']*'|\"[^\"]*\"", "'*'", diagnostic.message)
    return "unknown: " + short(re.sub(r"\b\d+\b", "N", message))[:120]


def clean_message(message: str) -> str:
    """A failure message without run-specific paths, so the table is reproducible."""
    message = re.sub(r"(/[\w.+-]+)+/(model|frozen)\.onnx", r"\2.onnx", message)
    return re.sub(r"/tmp/[\w./+-]+", "<tmp>", message)


def first_line(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def short(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= MESSAGE_CHARS else message[: MESSAGE_CHARS - 1] + "…"


def probe_target(worker: ToolkitWorker, platform: str, scratch: Path) -> TargetSettings:
    """fp16 unless the toolkit refuses to build this target without quantization (rv1106).

    The probe is a plain 3x3 Conv; the warnings it gets come with every build for this
    target (e.g. the I/O dtype change of a quantized build), so op entries leave them out.
    """
    prepared = prepare(generated_models()[0], scratch / f"probe-{platform}")
    assert prepared.path is not None
    settings = TargetSettings(platform)
    result = Builder(worker, settings, scratch).build(prepared.path, prepared.dataset)
    if result.outcome == FAILS and QUANTIZED_ONLY in result.error:
        settings = TargetSettings(platform, QUANTIZED, f"w8a8: the toolkit says {result.error!r}")
        result = Builder(worker, settings, scratch).build(prepared.path, prepared.dataset)
    if result.outcome != COMPILES:
        raise SystemExit(f"{platform}: even a plain Conv does not build: {result.error}")
    settings.common_warnings = result.warnings
    return settings


def measure(builder: Builder, prepared: Prepared) -> list[Build]:
    """The builds of one model, the one that gives the verdict first.

    A model that fails or crashes as tested is built again with every input but the first
    constant. That build decides when it compiles (or folds), when it crashes after a plain
    failure, or when the first failure was only that a shape input was not constant;
    otherwise the build as tested decides.
    """
    assert prepared.path is not None
    tested = unfold(builder.build(prepared.path, prepared.dataset), prepared)
    if tested.outcome not in (FAILS, CRASHES) or prepared.frozen_path is None:
        return [tested]
    frozen = unfold(builder.build(prepared.frozen_path, prepared.frozen_dataset), prepared)
    frozen.constant_inputs = True
    if frozen.outcome in (COMPILES, FOLDED):
        return [frozen, tested]
    if tested.outcome == CRASHES:
        return [tested, frozen]
    if frozen.outcome == CRASHES or tested.rule == "non-constant-shape-input":
        return [frozen, tested]
    return [tested, frozen]


def unfold(result: Build, prepared: Prepared) -> Build:
    """A "folded" build of an op on a float activation is a failure (see FOLDED)."""
    if result.outcome == FOLDED and prepared.case.op not in SHAPE_OF and prepared.dtype.startswith("float"):
        result.outcome = FAILS
    return result


def run_target(
    builder: Builder, prepared: list[Prepared], results: dict[str, list[Build]], progress: Progress
) -> None:
    for item in prepared:
        if item.skipped is None:
            results[item.case.name] = measure(builder, item)
        progress.step(builder.settings.platform)


class Progress:
    """A line every `every` models per target, so a long run shows it is alive."""

    def __init__(self, total: int, every: int = 100) -> None:
        self.total, self.every = total, every
        self.done: Counter[str] = Counter()
        self.start = time.monotonic()
        self.lock = threading.Lock()

    def step(self, target: str) -> None:
        with self.lock:
            self.done[target] += 1
            count = self.done[target]
            if count % self.every == 0 or count == self.total:
                elapsed = time.monotonic() - self.start
                print(f"  {target}: {count}/{self.total} models, {elapsed:.0f} s", flush=True)


# ---------------------------------------------------------------------------------------------
# Aggregating and writing


def op_entry(items: list[Prepared], results: dict[str, list[Build]]) -> dict[str, Any]:
    """One op on one target: counts of verdicts, status, example errors, rules and warnings."""
    builds = [results[p.case.name] for p in items if p.skipped is None]
    built = [b[0] for b in builds]
    failures = [b for b in built if b.outcome in (FAILS, CRASHES)]
    entry: dict[str, Any] = {
        "tests": len(items),
        "built": len(built),
        "compiled": sum(b.outcome == COMPILES for b in built),
        "compiled_with_constant_inputs": sum(b.outcome == COMPILES and b.constant_inputs for b in built),
        "failed": sum(b.outcome == FAILS for b in built),
        "crashed": sum(b.outcome == CRASHES for b in built),
        "crashes_seen": sum(any(b.outcome == CRASHES for b in model) for model in builds),
        "folded": sum(b.outcome == FOLDED for b in built),
        "not_applicable": sum(p.skipped == NOT_APPLICABLE for p in items),
        "opset_too_new": sum(p.skipped == OPSET_TOO_NEW for p in items),
        "errors": list(dict.fromkeys(b.error for b in failures))[:EXAMPLES],
        "error_rules": sorted({b.rule for b in failures}),
        "warnings": sorted({w for b in built for w in b.warnings}),
    }
    entry["status"] = status(entry)
    float32 = [results[p.case.name][0] for p in items if p.skipped is None and p.dtype == "float32"]
    entry["float32_built"] = len(float32)
    entry["float32_compiled"] = sum(b.outcome == COMPILES for b in float32)
    entry["float32_status"] = verdict(
        entry["float32_compiled"], sum(b.outcome in (FAILS, CRASHES) for b in float32)
    )
    return entry


def verdict(compiled: int, failed: int) -> str:
    """supported (all compiled) / partial (some) / unsupported (none) / untested (no builds)."""
    if not compiled + failed:
        return "untested"
    return "supported" if not failed else "partial" if compiled else "unsupported"


def status(entry: dict[str, Any]) -> str:
    """supported / partial / unsupported over the decisive builds (folded ones decide nothing)."""
    if entry["compiled"] + entry["failed"] + entry["crashed"]:
        return verdict(entry["compiled"], entry["failed"] + entry["crashed"])
    if entry["folded"]:
        return FOLDED
    skipped = {k for k in ("not_applicable", "opset_too_new") if entry[k]}
    return skipped.pop().replace("_", "-") if len(skipped) == 1 else "untested"


def aggregate(
    prepared: list[Prepared], results: dict[str, dict[str, list[Build]]], targets: list[str]
) -> dict[str, dict[str, Any]]:
    by_op: dict[str, list[Prepared]] = defaultdict(list)
    for item in prepared:
        by_op[item.case.op].append(item)
    return {op: {t: op_entry(items, results[t]) for t in targets} for op, items in sorted(by_op.items())}


def model_records(
    prepared: list[Prepared], results: dict[str, dict[str, list[Build]]], targets: list[str]
) -> dict[str, Any]:
    records = {}
    for item in prepared:
        record: dict[str, Any] = {
            "dtype": item.dtype,
            "dynamic": dynamic_positions(item.case.model),
            "op": item.case.op,
            "opset": item.opset,
            "source": item.case.source,
        }
        if item.case.domain:
            record["domain"] = item.case.domain
        if item.normalized:
            record["normalized"] = item.normalized
        if item.skipped:
            record["skipped"] = [item.skipped, item.reason]
        else:
            record["results"] = {t: [b.compact() for b in results[t][item.case.name]] for t in targets}
        records[item.case.name] = record
    return records


def findings(ops: dict[str, dict[str, Any]], targets: list[str]) -> dict[str, Any]:
    """Cross-cutting facts a reader (or a static checker) wants without walking every op."""
    statuses = {op: {t: e["status"] for t, e in entry.items()} for op, entry in ops.items()}

    def ops_where(predicate: Any) -> dict[str, list[str]]:
        found = {op: [t for t in targets if predicate(entry[t])] for op, entry in ops.items()}
        return {op: found_targets for op, found_targets in found.items() if found_targets}

    return {
        "counts": {t: dict(sorted(Counter(s[t] for s in statuses.values()).items())) for t in targets},
        "crash_the_compiler": ops_where(lambda e: e["crashes_seen"]),
        "differ_between_targets": {op: s for op, s in statuses.items() if len(set(s.values())) > 1},
        "folded_alone": sorted(op for op, s in statuses.items() if FOLDED in s.values()),
        "need_constant_inputs": ops_where(lambda e: e["compiled_with_constant_inputs"]),
        "opset_too_new_only": sorted(op for op, s in statuses.items() if set(s.values()) == {OPSET_TOO_NEW}),
    }


def dumps(value: Any, inline_depth: dict[str, int], depth: int = 0, key: str = "") -> str:
    """JSON with sorted keys, nested objects on one line below `inline_depth[top-level key]`."""
    if not isinstance(value, dict) or not value or depth >= inline_depth.get(key, 99):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    pad = " " * (depth + 1)
    items = [
        f"{pad}{json.dumps(k)}: {dumps(v, inline_depth, depth + 1, key or k)}"
        for k, v in sorted(value.items())
    ]
    return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Stable and diffable: one line per op and target, one line per model."""
    text = dumps(data, {"ops": 3, "models": 2, "findings": 2}) + "\n"
    json.loads(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def print_summary(ops: dict[str, dict[str, Any]], targets: list[str], seconds: float) -> None:
    print(f"{len(ops)} op types")
    for target in targets:
        counts = Counter(entry[target]["status"] for entry in ops.values())
        builds = sum(entry[target]["built"] for entry in ops.values())
        text = ", ".join(f"{count} {name}" for name, count in sorted(counts.items()))
        print(f"  {target}: {text} ({builds} models built)")
    print(f"total {seconds:.0f} s")


# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--toolkit", default=DEFAULT_TOOLKIT, help="RKNN-Toolkit2 version (default 2.5.0)")
    parser.add_argument("--targets", default=",".join(DEFAULT_TARGETS), help="comma-separated platforms")
    parser.add_argument("--limit", type=int, default=None, help="measure only the first N models")
    parser.add_argument("--only", default=None, help="measure only models whose name matches this regex")
    parser.add_argument("--out", type=Path, default=None, help="output JSON (default: the data directory)")
    parser.add_argument(
        "--annotate-inputs",
        action="store_true",
        help="only add dynamic input positions to the existing table",
    )
    parser.add_argument("--scratch", type=Path, default=None, help="scratch directory (default: a temp dir)")
    return parser.parse_args(argv)


def dynamic_positions(model: onnx.ModelProto) -> list[int]:
    """The node's input positions fed by graph inputs as tested (frozen: only the first of them)."""
    names = {value.name for value in model.graph.input}
    return [i for i, name in enumerate(model.graph.node[0].input) if name and name in names]


def annotate_inputs(path: Path) -> None:
    """Add each model record's dynamic input positions to an existing table without building again."""
    data = json.loads(path.read_text(encoding="utf-8"))
    models, _ = collect_node_tests()
    for case in [*models, *generated_models()]:
        if case.name in data["models"]:
            data["models"][case.name].pop("inputs", None)
            data["models"][case.name]["dynamic"] = dynamic_positions(case.model)
    write_json(path, data)


def select_models(args: argparse.Namespace) -> tuple[list[OpModel], str]:
    models, source = collect_node_tests()
    models = [*models, *generated_models()]
    if args.only:
        models = [m for m in models if re.search(args.only, m.name)]
    return (models[: args.limit] if args.limit else models), source


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.monotonic()
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    out = args.out or REPO / "baseline" / "data" / "op_support" / f"rknn-toolkit2-{args.toolkit}.json"
    if args.annotate_inputs:
        annotate_inputs(out)
        return 0
    models, source = select_models(args)
    print(f"{len(models)} models from {source} and generated; targets {', '.join(targets)}", flush=True)
    scratch_context = (
        contextlib.nullcontext(str(args.scratch)) if args.scratch else tempfile.TemporaryDirectory()
    )
    with scratch_context as scratch_name:
        scratch = Path(scratch_name)
        scratch.mkdir(parents=True, exist_ok=True)
        prepared = [prepare(m, scratch / "models" / f"{i:05d}") for i, m in enumerate(models)]
        toolchain = ensure_toolchain(args.toolkit)
        workers = {t: ToolkitWorker(toolchain) for t in targets}
        try:
            settings = {t: probe_target(workers[t], t, scratch) for t in targets}
            results: dict[str, dict[str, list[Build]]] = {t: {} for t in targets}
            progress = Progress(len(prepared))
            threads = [
                threading.Thread(
                    target=run_target,
                    args=(Builder(workers[t], settings[t], scratch), prepared, results[t], progress),
                )
                for t in targets
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            versions = next(iter(workers.values())).versions
        finally:
            for worker in workers.values():
                worker.close()
    ops = aggregate(prepared, results, targets)
    data = {
        "schema": SCHEMA,
        "generated": {
            "toolkit": args.toolkit,
            "toolkit_commit": versions.get("rknn-toolkit2-commit", ""),
            "toolkit_onnx": versions.get("onnx", ""),
            "onnx": onnx.__version__,
            "node_tests": source,
            "targets": {
                t: {
                    "quantization": s.quantization["dtype"] if s.quantization else "fp16",
                    "note": s.note,
                    "common_warnings": s.common_warnings,
                }
                for t, s in settings.items()
            },
            "request_timeout_seconds": REQUEST_TIMEOUT,
            "command": shlex.join(["python", "scripts/measure_op_support.py", *sys.argv[1:]]),
        },
        "findings": findings(ops, targets),
        "ops": ops,
        "models": model_records(prepared, results, targets),
    }
    write_json(out, data)
    print(f"wrote {out} ({out.stat().st_size // 1024} KiB)")
    print_summary(ops, targets, time.monotonic() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
