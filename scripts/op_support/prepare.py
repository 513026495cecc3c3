"""Normalizing what the toolkit can be asked: skip, lower the opset, freeze, write datasets."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, version_converter

from op_support.common import (
    MAX_IR,
    MAX_OPSET,
    NOT_APPLICABLE,
    OPSET_TOO_NEW,
    RESTAMPABLE,
    OpModel,
    Prepared,
    first_line,
    main_opset,
    short,
)


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


def dynamic_positions(model: onnx.ModelProto) -> list[int]:
    """The node's input positions fed by graph inputs as tested (frozen: only the first of them)."""
    names = {value.name for value in model.graph.input}
    return [i for i, name in enumerate(model.graph.node[0].input) if name and name in names]


def value_types(model: onnx.ModelProto) -> dict[str, Any]:
    """The element type of each of the node's inputs ("" when absent) and of its first output,
    by numpy name: the checker matches a real node against the builds of the same types."""
    graph = model.graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.output, *graph.value_info]}
    types.update({t.name: t.data_type for t in graph.initializer})
    node = graph.node[0]
    return {
        "types": [_type_name(types.get(name, 0)) for name in node.input],
        "out_type": _type_name(types.get(node.output[0], 0)) if node.output else "",
    }


def _type_name(elem_type: int) -> str:
    if not elem_type:
        return ""
    try:
        return str(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):  # bfloat16, float8 ... have no numpy dtype
        return str(TensorProto.DataType.Name(elem_type)).lower()
