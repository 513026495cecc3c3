"""Facts read from an ONNX file: opsets, IR version, producer and the I/O signature.

External weights are never loaded here: the header and graph structure are enough, and
a multi-GB model must not be read twice just to learn its input names.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from baseline.errors import InputError
from baseline.models.tensors import Dim, TensorSpec

LAYOUT_OPS = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity"})
"""Ops that move values without computing them (their rank changes, not the numbers)."""


def load_onnx_structure(path: Path) -> onnx.ModelProto:
    """Parse an ONNX file without its external data, with a one-line error if it is not ONNX."""
    try:
        model = onnx.load(str(path), load_external_data=False)
    except FileNotFoundError:
        raise InputError(f"{path}: ONNX file not found") from None
    except (DecodeError, ValueError, RuntimeError) as error:
        raise InputError(f"{path}: not a valid ONNX model ({_first_line(error)}); re-export it") from None
    if not model.graph.node and not model.graph.output:
        raise InputError(f"{path}: holds no ONNX graph; re-export it")
    return model


def check_external_data(model: onnx.ModelProto, path: Path) -> list[Path]:
    """Every external-data file the model names exists next to it, and none leaves its folder;
    the files, sorted (the weights the lock pins beside the model).

    Loop / If / Scan bodies hold initializers and Constant tensors of their own, which onnx
    and onnxruntime load just the same: they are checked too."""
    folder = path.resolve().parent
    files: set[Path] = set()
    for tensor in _all_tensors(model.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        location = next((entry.value for entry in tensor.external_data if entry.key == "location"), "")
        target = (folder / location).resolve()
        if not target.is_relative_to(folder):
            raise InputError(
                f"{path}: initializer {tensor.name!r} points outside the model's folder "
                f"({location!r}); refusing to read it"
            )
        if not target.is_file():
            raise InputError(
                f"{path}: external data file {location!r} of initializer {tensor.name!r} is "
                "missing; copy it next to the model"
            )
        files.add(target)
    return sorted(files)


def _all_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Initializers and tensor attributes of a graph and of every subgraph, without recursion
    (a crafted model may nest bodies deeper than Python's stack)."""
    graphs = [graph]
    while graphs:
        current = graphs.pop()
        yield from current.initializer
        for node in current.node:
            for attribute in node.attribute:
                yield from _attribute_tensors(attribute)
                graphs.extend([attribute.g] if attribute.HasField("g") else [])
                graphs.extend(attribute.graphs)


def _attribute_tensors(attribute: onnx.AttributeProto) -> list[onnx.TensorProto]:
    tensors = [attribute.t] if attribute.HasField("t") else []
    sparse = [
        t
        for s in [attribute.sparse_tensor]
        if attribute.HasField("sparse_tensor")
        for t in (s.values, s.indices)
    ]
    return [*tensors, *attribute.tensors, *sparse]


def _first_line(error: Exception) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def _dims(value_info: onnx.ValueInfoProto) -> list[Dim]:
    tensor_type = value_info.type.tensor_type
    if not tensor_type.HasField("shape"):
        return []
    return [
        dim.dim_value if dim.HasField("dim_value") and dim.dim_value > 0 else (dim.dim_param or "?")
        for dim in tensor_type.shape.dim
    ]


_NUMPY_NATIVE = {
    onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
    onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
    onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64,
    onnx.TensorProto.BOOL, onnx.TensorProto.STRING,
    onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128,
}  # fmt: skip
"""Element types numpy holds as themselves; older onnx releases map the others (bfloat16, float8,
4-bit) to a storage type such as float32, which would hide them from the fixture check."""


def _dtype(value_info: onnx.ValueInfoProto, path: Path) -> str:
    elem_type = value_info.type.tensor_type.elem_type
    known = elem_type in onnx.TensorProto.DataType.values() and elem_type != onnx.TensorProto.UNDEFINED
    if known and elem_type not in _NUMPY_NATIVE:
        return str(onnx.TensorProto.DataType.Name(elem_type)).lower()  # e.g. bfloat16, float8e4m3fn
    try:
        return str(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError):
        raise InputError(
            f"{path}: tensor {value_info.name!r} has element type {elem_type}, which has no "
            "numpy equivalent; only tensor inputs and outputs are supported"
        ) from None


def tensor_specs(values: list[onnx.ValueInfoProto], path: Path) -> list[TensorSpec]:
    return [TensorSpec(name=v.name, dtype=_dtype(v, path), shape=_dims(v)) for v in values]


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """Real inputs: older exporters also list every initializer as a graph input."""
    initializers = {tensor.name for tensor in model.graph.initializer}
    return [value for value in model.graph.input if value.name not in initializers]


def opset_imports(model: onnx.ModelProto) -> dict[str, int]:
    """Opset per domain; the default domain is spelled `ai.onnx`."""
    return {
        (entry.domain or "ai.onnx"): entry.version
        for entry in sorted(model.opset_import, key=lambda entry: entry.domain)
    }


def producer(model: onnx.ModelProto) -> str:
    return " ".join(part for part in (model.producer_name, model.producer_version) if part)
