"""Facts about the graph the rules read: fixed input shapes, inferred ranks and types, and
which tensors the toolkit folds to constants."""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from baseline.errors import InputError
from baseline.files.onnx_facts import graph_inputs

DATA_DEPENDENT = {
    "NonZero": "its output shape depends on the data",
    "NonMaxSuppression": "its output shape depends on the data",
    "Unique": "its output shape depends on the data",
    "Compress": "its output shape depends on the data",
    "Loop": "control flow is not supported",
    "If": "control flow is not supported",
    "Scan": "control flow is not supported",
}


def fix_input_shapes(model: onnx.ModelProto, shapes: Mapping[str, list[int]]) -> None:
    for value in graph_inputs(model):
        if value.name in shapes and value.type.tensor_type.HasField("shape"):
            dims = value.type.tensor_type.shape.dim
            for dim, size in zip(dims, shapes[value.name], strict=False):
                dim.Clear()
                dim.dim_value = size


def infer_shapes(
    model: onnx.ModelProto, path: Path, whole: Callable[[], onnx.ModelProto] | None = None
) -> onnx.ModelProto:
    """`model` with inferred shapes and types. The static check passes a model whose weights
    carry no bytes (`load_weightless`) and `whole`, which loads it with them.

    onnx serialises the model for its C++ inference and parses the result back: with the
    weights, for a 54 MB CNN, ~0.25 s and two more copies of them, which no shape-inference
    function reads. Without them the result is inference's on the whole model but for those
    bytes (tested, and on the 2,023 models of the bench corpus)."""
    inferred = _infer(model, path)
    if whole is not None and [t.name for t in inferred.graph.initializer] != [
        t.name for t in model.graph.initializer
    ]:
        # never seen: inference keeps the initializers as they are; if it ever did not, the
        # weights it dropped could matter, so infer on the whole model
        return _infer(whole(), path)
    return inferred


def _infer(model: onnx.ModelProto, path: Path) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as error:  # onnx raises InferenceError / ValidationError, both bare
        raise InputError(f"{path}: shape inference failed ({str(error).splitlines()[0]})") from None


@dataclass(frozen=True)
class GraphFacts:
    """Per tensor: rank and element type after shape inference, and whether it folds to a constant."""

    ranks: dict[str, int]
    dtypes: dict[str, int]
    constant: set[str]
    shapes: dict[str, list[int]]  # dims, 0 where unknown; initializers included
    consumed: frozenset[str] = frozenset()  # read by a node or a graph output
    # initializers (weights without their bytes: `load_weightless`) and Constant nodes' values
    values: dict[str, onnx.TensorProto] = field(default_factory=dict)
    producers: dict[str, onnx.NodeProto] = field(default_factory=dict)  # tensor -> the node computing it
    readers: dict[str, list[str]] = field(default_factory=dict)  # tensor -> op types that read it

    def producer_op(self, name: str) -> str | None:
        """The op type that computes `name`; None for a graph input or an initializer."""
        node = self.producers.get(name)
        return None if node is None else node.op_type

    def ints(self, node: onnx.NodeProto, attribute: str, index: int) -> list[int] | None:
        """A list of integers a node takes either way the opsets wrote it: its `attribute`
        (Pad's pads before opset 11, ReduceMean's axes before 18) or its constant input at
        `index`; None when neither is there, or the value is a weight read without its bytes."""
        for found in node.attribute:
            if found.name == attribute:
                return list(found.ints)
        if len(node.input) <= index or node.input[index] not in self.values:
            return None
        try:
            return [int(v) for v in onnx.numpy_helper.to_array(self.values[node.input[index]]).ravel()]
        except (ValueError, TypeError):
            return None


def graph_facts(inferred: onnx.ModelProto, original: onnx.ModelProto) -> GraphFacts:
    graph = inferred.graph
    values = [v for v in [*graph.value_info, *graph.input, *graph.output] if v.type.HasField("tensor_type")]
    given = _constant_values(original.graph)
    return GraphFacts(
        ranks={
            v.name: len(v.type.tensor_type.shape.dim) for v in values if v.type.tensor_type.HasField("shape")
        },
        dtypes={v.name: v.type.tensor_type.elem_type for v in values},
        constant=_constant_tensors(graph, inputs_static(original), given),
        shapes={
            **{
                v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
                for v in values
                if v.type.tensor_type.HasField("shape")
            },
            **{t.name: list(t.dims) for t in graph.initializer},
        },
        values=given,
        producers={name: node for node in graph.node for name in node.output},
        readers=_readers(graph),
        consumed=frozenset(
            [*(i for node in graph.node for i in node.input), *(o.name for o in graph.output)]
        ),
    )


def reader_nodes(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    """Tensor -> the nodes that read it (`GraphFacts.readers` keeps only their op types)."""
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    return readers


def _readers(graph: onnx.GraphProto) -> dict[str, list[str]]:
    readers: dict[str, list[str]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node.op_type)
    return readers


def _constant_values(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    values = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None:
                values[node.output[0]] = value
    return values


def static_shape(value: onnx.ValueInfoProto) -> bool:
    tensor = value.type.tensor_type
    return tensor.HasField("shape") and all(d.dim_value > 0 for d in tensor.shape.dim)


def _constant_tensors(graph: onnx.GraphProto, inputs_static: bool, given: Container[str]) -> set[str]:
    """Tensors the toolkit can fold to constants: initializers, Constant nodes, anything
    computed only from those, and the shape of any tensor whose shape is fixed — with static
    graph inputs, that is every tensor not downstream of a data-dependent op. `given`: the
    initializers' and Constant nodes' values (an If on one of them is not folded, `folded_if`)."""
    constant = {t.name for t in graph.initializer} | {""}
    static = {v.name for v in [*graph.input, *graph.value_info] if static_shape(v)}
    dynamic: set[str] = set()
    for node in graph.node:  # nodes are topologically sorted in a valid model
        folds = folded_nonzero(node, constant) or folded_if(node, constant, given)
        if (node.op_type in DATA_DEPENDENT and not folds) or any(i in dynamic for i in node.input):
            dynamic.update(node.output)
        shape_known = node.input and (
            node.input[0] in static or (inputs_static and node.input[0] not in dynamic)
        )
        if (
            node.op_type == "Constant"
            or (node.op_type in ("Shape", "Size") and shape_known)
            or ((node.op_type not in DATA_DEPENDENT or folds) and all(i in constant for i in node.input))
        ):
            constant.update(node.output)
    return constant


def folded_if(node: onnx.NodeProto, constant: set[str], given: Container[str]) -> bool:
    """An If whose condition is computed from shapes fixed once the inputs are (torch's
    `squeeze(dim)` on a dynamically sized map: `If(Shape(map)[dim] == 1)`): the toolkit evaluates
    it while folding and treats its output, and all that reads it, as constants (measured:
    bench/export_probes.py torch_if_squeeze_*). `given` holds the initializers and Constant
    nodes' outputs: an If on one of those fails otherwise ("KeyError: 'cond'",
    bench/rule_probes.py if_initializer / if_constant_node)."""
    return (
        node.op_type == "If" and bool(node.input) and node.input[0] in constant and node.input[0] not in given
    )


def folded_nonzero(node: onnx.NodeProto, constant: set[str]) -> bool:
    """A NonZero of a tensor that folds to a constant: the toolkit folds it too (its refusal is
    "The input 0 of NonZero need to be constant"). ribodetector's NonZero of ones the size of the
    batch dim compiled on every target (eighth round), as generated ones of a shape-fed mask or an
    initializer (bench/rule_probes.py nonzero); a NonZero of a computed mask fails."""
    return node.op_type == "NonZero" and bool(node.input) and node.input[0] in constant


def inputs_static(model: onnx.ModelProto) -> bool:
    return all(static_shape(value) for value in graph_inputs(model))
