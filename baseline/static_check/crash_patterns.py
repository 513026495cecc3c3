"""Patterns that crash RKNN-Toolkit2 2.5.0 inside one of its own passes, each cut from a real
model the eleventh held-out round passed and the toolkit refused, and reproduced by generated
probes (`bench/eleventh_misses.py`, outcomes in `bench/results/eleventh-misses-2.5.0-<target>.json`).
Each condition is as narrow as the conversions showed it: what was not converted is not said."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from baseline.static_check.findings import StaticFinding, node_place
from baseline.static_check.graph import GraphFacts, reader_nodes
from baseline.static_check.measured import QUANTIZED_TARGETS

ELEMENTWISE = ("Add", "Sub", "Mul", "Div")
DEFAULT_DOMAINS = ("", "ai.onnx")
PROBES = "bench/eleventh_misses.py"


def _attribute_int(node: onnx.NodeProto, name: str, default: int) -> int:
    return next((int(found.i) for found in node.attribute if found.name == name), default)


def _attribute_ints(node: onnx.NodeProto, name: str) -> list[int]:
    return next((list(found.ints) for found in node.attribute if found.name == name), [])


def _produced_by(name: str, op_type: str, facts: GraphFacts) -> onnx.NodeProto | None:
    """The `op_type` node computing `name`, when it has an input (a file may hold anything)."""
    node = facts.producers.get(name)
    return node if node is not None and node.op_type == op_type and node.input else None


# 1. elementwise-const-rank5: clashroyalebuildabot's number.onnx (a YOLOv5 exported at batch 10)


def _crashes_squeeze_nd(dims: list[int]) -> bool:
    """The shapes the probes failed with: rank 6 or more whatever the dims, or rank 5 with dims 0
    and 1 both other than 1 ([1, 3, ...] and [10, 1, ...] compiled; rank 4 compiled)."""
    if not dims or min(dims) <= 0:
        return False  # a dim shape inference left open: not measured, no finding
    return len(dims) >= 6 or (len(dims) == 5 and dims[0] != 1 and dims[1] != 1)


def _high_rank_operand(node: onnx.NodeProto, facts: GraphFacts) -> str | None:
    """The computed operand of an elementwise node whose other operand is a constant (an
    initializer or a Constant node), when its static shape is one the probes failed with."""
    if node.op_type not in ELEMENTWISE or len(node.input) != 2:
        return None
    for data, other in (node.input, reversed(node.input)):
        if other in facts.values and data not in facts.constant:
            return data if _crashes_squeeze_nd(facts.shapes.get(data, [])) else None
    return None


def elementwise_const_rank5(graph: onnx.GraphProto, facts: GraphFacts) -> list[StaticFinding]:
    """Add / Sub / Mul / Div of a rank-6+ tensor, or a rank-5 one whose dims 0 and 1 are both
    not 1, by a constant: the toolkit's fuse_ops rule `squeeze_nd_mul` fails on every target. A
    computed second operand and Pow compile; the constant's own shape does not matter."""
    for node in graph.node:
        data = _high_rank_operand(node, facts)
        if data is None:
            continue
        dims = facts.shapes[data]
        return [
            StaticFinding(
                "elementwise-const-rank5",
                "error",
                node_place(node),
                f"{node.op_type} of {data!r} {dims} by a constant: the toolkit's fuse_ops rule "
                "squeeze_nd_mul fails on it with \"AttributeError: 'IRGraph' object has no attribute "
                "'node_use_target_const'\" on every target",
                "export at batch 1 (the same head at batch 1 compiles), or keep dim 0 or dim 1 of a "
                "rank-5 tensor at 1 and the arithmetic at rank 5 or less",
                "measured: clashroyalebuildabot's number.onnx (a YOLOv5 at batch 10, eleventh round) "
                "fails so at Mul_235 [10, 3, 8, 8, 2] x 2 on rk3588, rk3566, rv1106; generated Add, "
                "Sub, Mul, Div by a constant of any shape fail at [10, 3, 8, 8, 2], [3, 10, 8, 8, 2], "
                "[2, 2, 2, 2, 2] and at rank 6 (even [1, 1, 8, 8, 2, 2]); [1, 3, 8, 8, 2], "
                f"[10, 1, 8, 8, 2], rank 4, Pow, or two computed operands compile ({PROBES} number)",
            )
        ]
    return []


# 2. yolov8-dfl-split: mustatil's Houses300.onnx (Ultralytics 8.4.69)


def _reshape_of_4d(name: str, facts: GraphFacts) -> bool:
    reshape = _produced_by(name, "Reshape", facts)
    return reshape is not None and facts.ranks.get(reshape.input[0]) == 4


def _joined_reshapes(name: str, facts: GraphFacts) -> bool:
    """The DFL's source as 8.4.69 exports it: a Reshape of a 4-D map, or a Concat of such
    Reshapes. 8.3.2xx's DFL reads a Split of the joined box and class maps, and compiles."""
    if _reshape_of_4d(name, facts):
        return True
    concat = _produced_by(name, "Concat", facts)
    return concat is not None and all(_reshape_of_4d(joined, facts) for joined in concat.input)


def _dfl_source(transpose: onnx.NodeProto, facts: GraphFacts, opset: int) -> str | None:
    """For the DFL's second Transpose (perm [0, 3, 2, 1]): what its binning Reshape reads, when
    the chain before it is Reshape -> Transpose [0, 3, 1, 2] -> Softmax (last axis)."""
    softmax = _produced_by(transpose.input[0], "Softmax", facts)
    if softmax is None or _attribute_int(softmax, "axis", -1 if opset >= 13 else 1) not in (3, -1):
        return None
    first = _produced_by(softmax.input[0], "Transpose", facts)
    if first is None or _attribute_ints(first, "perm") != [0, 3, 1, 2]:
        return None
    binned = _produced_by(first.input[0], "Reshape", facts)
    return None if binned is None else binned.input[0]


def _split_in_halves(name: str, readers: dict[str, list[onnx.NodeProto]], facts: GraphFacts) -> bool:
    """Two or more Slices of axis 1, or a Split of axis 1, read `name` (dist2bbox's halves)."""
    nodes = readers.get(name, [])
    slices = [n for n in nodes if n.op_type == "Slice" and facts.ints(n, "axes", 3) == [1]]
    splits = [n for n in nodes if n.op_type == "Split" and _attribute_int(n, "axis", 0) == 1]
    return len(slices) >= 2 or bool(splits)


def _one_channel_conv(name: str, readers: dict[str, list[onnx.NodeProto]], facts: GraphFacts) -> list[str]:
    """The Reshapes of a 1-output-channel Conv that reads `name` (the DFL's projection)."""
    found = []
    for conv in readers.get(name, []):
        if conv.op_type != "Conv" or len(conv.input) < 2 or not conv.output:
            continue
        if facts.shapes.get(conv.input[1], [0])[:1] != [1]:
            continue
        found += [r.output[0] for r in readers.get(conv.output[0], []) if r.op_type == "Reshape"]
    return found


def yolov8_dfl_split(graph: onnx.GraphProto, facts: GraphFacts, opset: int) -> list[StaticFinding]:
    """The two-Transpose YOLOv8 DFL followed by its split into two halves, when the DFL reads a
    Reshape, or a Concat of Reshapes, of 4-D maps: fuse_ops rule `seperate_conv_rs_split` fails
    on every target. From a graph input, a Relu, a Concat of flat inputs or a Split, without the
    halves, or in the older one-Transpose layout, the probes compiled."""
    transposes = [
        node
        for node in graph.node
        if node.op_type == "Transpose"
        and node.input
        and node.output
        and _attribute_ints(node, "perm") == [0, 3, 2, 1]
    ]
    readers = reader_nodes(graph) if transposes else {}
    for transpose in transposes:
        source = _dfl_source(transpose, facts, opset)
        if source is None or not _joined_reshapes(source, facts):
            continue
        if not any(
            _split_in_halves(r, readers, facts)
            for r in _one_channel_conv(transpose.output[0], readers, facts)
        ):
            continue
        return [
            StaticFinding(
                "yolov8-dfl-split",
                "error",
                node_place(transpose),
                "a YOLOv8 DFL in the two-Transpose layout (Transpose [0, 3, 1, 2] -> Softmax -> "
                "Transpose [0, 3, 2, 1] -> Conv -> Reshape) reading reshaped 4-D maps, its result "
                "split in two halves: the toolkit's fuse_ops rule seperate_conv_rs_split fails with "
                '"IndexError: list index out of range" on every target',
                "export with Ultralytics 8.3.2xx (whose DFL reads a Split of the joined box and class "
                "maps, which compiles), or export the head without its decoding (dist2bbox on the CPU)",
                "measured: mustatil's Houses300.onnx (Ultralytics 8.4.69, eleventh round) fails so on "
                "rk3588, rk3566, rv1106, and its box branch cut before the halves, or with one half, "
                "compiles; generated DFLs fail reading a Reshape of a 4-D map or a Concat of such "
                "Reshapes (two Slices or a Split, opsets 12 and 17, two or three scales), and compile "
                "reading a graph input, a Relu, a Concat of flat inputs or a Split, without the "
                f"halves, or in the Transpose [0, 2, 1, 3] layout ({PROBES} houses); napari-macrophage's "
                "and ppllocr's 8.3.2xx exports compile",
            )
        ]
    return []


# 3. duplicate-opset-import: fastGRAHSP's GALAGN128.onnx (two Keras MLPs merged by onnx.compose)


def _one_index(name: str, facts: GraphFacts) -> bool:
    value = facts.values.get(name)
    return value is not None and len(value.dims) <= 1 and all(d == 1 for d in value.dims)


def _one_wide_slice(node: onnx.NodeProto, facts: GraphFacts) -> bool:
    starts, ends = facts.ints(node, "starts", 1), facts.ints(node, "ends", 2)
    return (
        starts is not None and ends is not None and len(starts) == len(ends) == 1 and ends[0] - starts[0] == 1
    )


def _single_column(node: onnx.NodeProto, facts: GraphFacts) -> bool:
    """A Gather of one constant index, or a Slice one element wide (the probes' columns)."""
    if node.op_type == "Gather":
        return len(node.input) == 2 and _one_index(node.input[1], facts)
    return node.op_type == "Slice" and _one_wide_slice(node, facts)


def _columns_split(graph: onnx.GraphProto, facts: GraphFacts) -> onnx.NodeProto | None:
    """A Split, or the second of two single columns of one tensor: the toolkit makes those a
    Split whose unused pieces get no element type."""
    nodes: list[onnx.NodeProto] = list(graph.node)
    columns: dict[str, int] = {}
    for node in nodes:
        if node.op_type == "Split":
            return node
        if node.input and _single_column(node, facts):
            columns[node.input[0]] = columns.get(node.input[0], 0) + 1
            if columns[node.input[0]] == 2:
                return node
    return None


def duplicate_opset_import(
    model: onnx.ModelProto, graph: onnx.GraphProto, facts: GraphFacts
) -> list[StaticFinding]:
    """The default domain named more than once in `opset_import` (onnx.checker accepts it). Below
    opset 13 with a Split, or two single columns of one tensor, every target crashes; one entry
    per domain, or opset 13, compiles. Anything else with the repeat: a finding, not an error."""
    versions = [entry.version for entry in model.opset_import if entry.domain in DEFAULT_DOMAINS]
    if len(versions) < 2:
        return []
    fix = "keep one opset_import entry per domain (an onnx.compose merge writes one per model merged)"
    crashing = _columns_split(graph, facts) if max(versions) < 13 else None
    if crashing is None:
        return [
            StaticFinding(
                "duplicate-opset-import",
                "warning",
                "model",
                f"opset_import names the default domain {len(versions)} times (versions {versions})",
                fix,
                "measured: with a Split or two columns of one tensor below opset 13 it crashes every "
                f"target; with one column, or at opset 13, the probes compiled ({PROBES} galagn)",
            )
        ]
    return [
        StaticFinding(
            "duplicate-opset-import",
            "error",
            node_place(crashing),
            f"opset_import names the default domain {len(versions)} times at opset {max(versions)}, and "
            "this Split (or column Gathers / Slices the toolkit joins into one) leaves pieces with no "
            'element type: SIGSEGV on rk3588 / rk3566, "Should didnot run into this" on rv1106 '
            "(SIGFPE for an explicit Split)",
            fix,
            "measured: fastGRAHSP's GALAGN128.onnx (eleventh round; the default domain imported three "
            "times at opset 10) fails so on rk3588, rk3566, rv1106 and compiles with one entry per "
            "domain; generated column Gathers, Slices or a Split of one tensor fail with the domain "
            f"imported twice or three times at opsets 10-12, and compile with one import or at opset 13 "
            f"({PROBES} galagn)",
        )
    ]


# 4. gemm-column-product / gemm-column-sum: fusion-surrogates' qlknn_7_11.onnx (PyTorch MLP)


def _fully_connected(name: str, facts: GraphFacts, through: bool) -> str | None:
    """`name` as a Gemm / MatMul output, `through` a Mul / Add by constants (the per-column scale
    and shift the real model has; Sub and Div were not converted) if allowed."""
    node, seen = facts.producers.get(name), {name}
    while through and node is not None and node.op_type in ("Mul", "Add") and len(node.input) == 2:
        if node.input[1] not in facts.values or node.input[0] in facts.constant or node.input[0] in seen:
            return None  # a computed factor, or a cycle (an invalid file)
        name, node = node.input[0], facts.producers.get(node.input[0])
        seen.add(name)
    return name if node is not None and node.op_type in ("Gemm", "MatMul") else None


def _gemm_column(name: str, facts: GraphFacts, through: bool) -> tuple[str, int, bool] | None:
    """A column Gathered (axis 1, one constant index) from a Gemm / MatMul output, `through` a
    Clip after and constant elementwise ops before it if allowed: (that output, the index,
    whether the index is a scalar)."""
    seen = {name}
    while through and (clip := _produced_by(name, "Clip", facts)) is not None and clip.input[0] not in seen:
        name = clip.input[0]
        seen.add(name)
    gather = _produced_by(name, "Gather", facts)
    if gather is None or len(gather.input) != 2 or _attribute_int(gather, "axis", 0) != 1:
        return None
    index = facts.values.get(gather.input[1])
    if index is None or not _one_index(gather.input[1], facts):
        return None
    source = _fully_connected(gather.input[0], facts, through)
    try:
        value = int(onnx.numpy_helper.to_array(index).ravel()[0])
    except (ValueError, TypeError, IndexError):
        return None
    return None if source is None else (source, value, not index.dims)


def _column_pairs(
    graph: onnx.GraphProto, facts: GraphFacts, op: str, through: bool
) -> Iterator[tuple[onnx.NodeProto, bool]]:
    """`op` nodes joining two different columns of one Gemm / MatMul output, and whether both
    indices are scalars."""
    for node in graph.node:
        if node.op_type != op or len(node.input) != 2:
            continue
        left, right = (_gemm_column(name, facts, through) for name in node.input)
        if left and right and left[0] == right[0] and left[1] != right[1]:
            yield node, left[2] and right[2]


def gemm_column_product(
    graph: onnx.GraphProto, facts: GraphFacts, target: str, quantized: bool | None
) -> list[StaticFinding]:
    """Two columns of one Gemm / MatMul output multiplied, in a quantized build: rv1106's native
    compiler SIGSEGVs. With scalar indices every probe failed; with [1]-shaped ones some did and
    some compiled, so those say "unknown"."""
    if not (bool(quantized) or (quantized is None and target in QUANTIZED_TARGETS)):
        return []
    for node, scalar in _column_pairs(graph, facts, "Mul", through=True):
        return [
            StaticFinding(
                "gemm-column-product",
                "error" if scalar else "warning",
                node_place(node),
                "multiplies two columns Gathered from one Gemm / MatMul output in a quantized build: "
                + (
                    'the rv1106 compiler crashes (SIGSEGV after "auto set mini_rknn=True")'
                    if scalar
                    else "with [1]-shaped indices some such models crashed the rv1106 compiler, "
                    "others compiled"
                ),
                "compute the product on the CPU (output the Gemm's columns), or build without "
                "quantization where the target allows it (rk3588 / rk3566 compile it)",
                "measured: fusion-surrogates' qlknn_7_11.onnx (eleventh round, efeITG = flux[1] * "
                "clip(flux[0])) crashes rv1106 and compiles on rk3588 / rk3566; torch.onnx.export of "
                "nn.Linear -> y[:, 1] * y[:, 0] (opsets 13, 17) and generated Gemm or MatMul -> two "
                "scalar-index column Gathers -> Mul crash rv1106 (widths 16, 133, with or without the "
                "per-column scale and Clip); a Relu source, one column squared or doubled, the columns "
                "as outputs compile; [1]-shaped indices crash with the scale and Clip and compile "
                f"without them ({PROBES} qlknn)",
                unknown=not scalar,
            )
        ]
    return []


def gemm_column_sum(graph: onnx.GraphProto, facts: GraphFacts) -> list[StaticFinding]:
    """Two columns (scalar indices) of one Gemm / MatMul output added, directly: the toolkit
    makes each column Gather a 1x1 Conv and fuse_conv_conv_add fails on every target."""
    for node, scalar in _column_pairs(graph, facts, "Add", through=False):
        if not scalar:
            continue  # [1]-shaped indices compiled (gemm_gather_add_index_1d)
        return [
            StaticFinding(
                "gemm-column-sum",
                "error",
                node_place(node),
                "adds two columns Gathered with scalar indices from one Gemm / MatMul output: the "
                "toolkit makes each Gather a 1x1 Conv, and fuse_conv_conv_add fails with "
                "\"TypeError: 'NoneType' object is unsliceable\" on every target",
                "Gather each column with a [1]-shaped index tensor (generated, that Add compiled), "
                "or add them on the CPU",
                "measured: torch.onnx.export of nn.Linear -> y[:, 1] + y[:, 0] (opsets 13, 17) and "
                "generated Gemm or MatMul -> two scalar-index column Gathers -> Add fail so on rk3588, "
                "rk3566, rv1106; with [1]-shaped indices, or from a Relu, they compile "
                f"({PROBES} qlknn: torch_gemm_column_sum_*, gemm_gather_add, found beside qlknn_7_11's "
                "product)",
            )
        ]
    return []
