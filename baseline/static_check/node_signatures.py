"""Op signatures: what about a node decides whether the toolkit compiles it, hashed.

A signature is the op type and a digest of its domain, which inputs are computed rather than
constant, the element type of each computed input and of its output, the rank of its first
input, and its attributes (tensor attributes by element type only). Two nodes with the same
signature are, to the toolkit's per-op passes, the same problem; the learned table
(`conversions`) keys its evidence by it. Runs in the ONNX helper (it needs the graph analysis).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path

import onnx

from baseline.hashing import sha256_file
from baseline.static_check.conversions import MAX_SIGNATURES, Entry, precision, write_entry
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


def record(
    root: Path,
    path: Path,
    shapes: Mapping[str, list[int]],
    model: str,
    toolkit: str,
    platform: str,
    quantized: bool,
    compiled: bool,
    log: str,
) -> None:
    """Write one conversion's outcome to the learned table (in the helper process)."""
    from baseline.static_check.check import analyse

    analysis = analyse(path, shapes)  # shared with the static check of the same model
    graph, facts = analysis.graph, analysis.facts
    nodes = compiled_nodes(graph, facts)
    failing = None if compiled else failing_node(graph, log)
    signatures = list(dict.fromkeys(signature(node, facts) for node in nodes))[:MAX_SIGNATURES]
    write_entry(
        root,
        Entry(
            onnx=sha256_file(path),
            model=model,
            toolkit=toolkit,
            platform=platform,
            precision=precision(quantized),
            compiled=compiled,
            error="" if compiled else (log.strip().splitlines() or ["crashed"])[0][:300],
            failing_node=(failing.name or failing.output[0]) if failing is not None else "",
            failing=(signature(failing, facts),) if failing is not None else (),
            signatures=tuple(signatures) if compiled else (),
        ),
    )
