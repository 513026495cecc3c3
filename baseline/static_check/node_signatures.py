"""Op signatures: what about a node decides whether the toolkit compiles it, hashed.

A signature is the op type and a digest of its domain, which inputs are computed rather than
constant, the element type of each computed input and of its output, the rank of its first
input, and its attributes (tensor attributes by element type only). Two nodes with the same
signature are, to the toolkit's per-op passes, the same problem; the learned table
(`conversions`) keys its evidence by it; `learn` writes it. Runs in the ONNX helper.
"""

from __future__ import annotations

import hashlib
import re

import onnx

from baseline.static_check.graph import GraphFacts
from baseline.static_check.measured import dtype_name, input_pattern

QUOTED = re.compile(r"""['"]([^'"\n]{1,200})['"]""")


def signature(node: onnx.NodeProto, facts: GraphFacts) -> str:
    pattern = input_pattern(node, facts.constant)
    types = [dtype_name(facts.dtypes.get(node.input[i])) for i in sorted(pattern) if i < len(node.input)]
    output = dtype_name(facts.dtypes.get(node.output[0])) if node.output else ""
    rank = facts.ranks.get(node.input[0], -1) if node.input else -1
    parts = [node.domain, repr(sorted(pattern)), repr(types), output, str(rank)]
    parts += [f"{a.name}={_attribute(a)}" for a in sorted(node.attribute, key=lambda a: a.name)]
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]
    return f"{node.op_type[:64]}:{digest}"


def _attribute(attribute: onnx.AttributeProto) -> str:
    if attribute.type == onnx.AttributeProto.TENSOR:
        return f"tensor<{attribute.t.data_type}>"  # the value would make every weight a new pattern
    if attribute.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
        return "graph"
    value = onnx.helper.get_attribute_value(attribute)
    return repr(value)[:200]


def compiled_nodes(graph: onnx.GraphProto, facts: GraphFacts) -> list[onnx.NodeProto]:
    """The nodes the toolkit compiles: not those that fold to constants."""
    return [node for node in graph.node if not all(name in facts.constant for name in node.output)]


def failing_node(graph: onnx.GraphProto, log: str) -> onnx.NodeProto | None:
    """The node a toolkit log names, in quotes, by its name or one of its outputs, or by either
    followed by a suffix the toolkit adds ("KeyError: '/q/MatMul_output_0_mm'")."""
    names: dict[str, onnx.NodeProto] = {}
    for node in graph.node:
        for name in (node.name, *node.output):
            if name:
                names.setdefault(name, node)
    for quoted in reversed(QUOTED.findall(log)):  # the last named is nearest the failure
        if quoted in names:
            return names[quoted]
        prefix = quoted.rsplit("_", 1)[0]
        if prefix != quoted and prefix in names:
            return names[prefix]
    return None
