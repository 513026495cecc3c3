"""Issue 33: what a verdict rests on ("unknown" when only node tests back it), rules narrowed
by real exports, and the graph-level rules (an unread graph input, an attention block whose
query is a bare MatMul)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import baseline
from baseline.static_check import check_model
from baseline.static_check.evidence import NODE_TESTS, NOT_EXPORTED, RULES, THIN, UNISOLATED, evidence
from tests.test_static_check_rules import X, errors, model, toolkit_compiles, weights

FLOAT = TensorProto.FLOAT


def test_every_rule_the_checker_can_emit_says_what_it_rests_on() -> None:
    source = "".join(
        path.read_text() for path in (Path(baseline.__file__).parent / "static_check").glob("*.py")
    )
    emitted = set(re.findall(r'StaticFinding\(\s*"([a-z0-9-]+)",\s*"error"', source))
    emitted |= set(re.findall(r'StaticFinding\(\s*"([a-z0-9-]+)",\s*"error" if', source))
    assert {"integer-clip", "attention-bare-query", "layernorm-constant-parameters"} <= emitted
    assert emitted - set(RULES) == set()
    assert all(entry.cites for entry in RULES.values())
    assert evidence("no-such-rule").kind == NODE_TESTS  # unlisted: the weakest kind


def int8_clip(tmp_path: Path, with_nonzero: bool = False, dtype: type = np.int32) -> Path:
    """A Clip of an integer input: int32 rests on node tests only, int8 on torch exports too."""
    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["y" if not with_nonzero else "c"])]
    if with_nonzero:
        nodes.append(helper.make_node("NonZero", ["c"], ["y"]))
    constants: dict[str, np.ndarray] = {"lo": np.array(0, dtype), "hi": np.array(5, dtype)}
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return model(
        tmp_path,
        nodes,
        {"x": [1, 8]},
        constants,
        input_type=elem,
        output_type=TensorProto.INT64 if with_nonzero else elem,
        name=f"clip-{with_nonzero}-{np.dtype(dtype)}.onnx",
    )


def test_an_error_backed_by_node_tests_only_gives_unknown_with_the_reason(tmp_path: Path) -> None:
    alone = check_model(int8_clip(tmp_path))
    assert "integer-clip" in {f.rule for f in alone.errors()}
    assert alone.verdict == "unknown" and not alone.predicted_compile
    assert "integer-clip" in alone.reason and "node tests only" in alone.reason
    # beside a refusal by name (NonZero: "will cause the graph to be a dynamic graph") it fails
    both = check_model(int8_clip(tmp_path, with_nonzero=True))
    assert both.verdict == "fails" and both.reason == ""
    # int8: torch.onnx.export of an int8 clamp crashes every target too, so it decides alone
    assert check_model(int8_clip(tmp_path, dtype=np.int8)).verdict == "fails"


def test_an_op_refused_by_name_decides_a_crash_alone_does_not(tmp_path: Path) -> None:
    # rv1106 refuses a pre-quantized model in its quantized build by name (and a QDQ export too)
    quantize = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])
    dequantize = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])
    constants: dict[str, np.ndarray] = {"s": np.array(0.1, np.float32), "z": np.array(0, np.uint8)}
    qdq = check_model(model(tmp_path, [quantize, dequantize], X, constants, opset=13), target="rv1106")
    refused = [f for f in qdq.errors() if f.rule == "op-refused"]
    assert refused and all(f.decisive for f in refused) and qdq.verdict == "fails"
    # rv1106's Or of two masks is a SIGABRT alone (as Not was, which compiles inside torch
    # exports): a crash of a single-op model gives unknown, not "fails". The masks come from float
    # inputs (the bool Or the output): a graph with no float tensor at all is another, measured
    # cause (quantized-integer-only), decisive
    masks = [
        helper.make_node("Greater", ["x", "zero"], ["a"]),
        helper.make_node("Greater", ["z", "zero"], ["b"]),
        helper.make_node("Or", ["a", "b"], ["y"]),
    ]
    zero = {"zero": np.array(0, np.float32)}
    path = model(tmp_path, masks, {"x": [1, 8], "z": [1, 8]}, zero, opset=13, output_type=TensorProto.BOOL)
    or_report = check_model(path, target="rv1106")
    assert "op-refused" in {f.rule for f in or_report.errors()} and or_report.verdict == "unknown"
    bools = model(
        tmp_path,
        [helper.make_node("Or", ["x", "z"], ["y"])],
        {"x": [1, 8], "z": [1, 8]},
        input_type=TensorProto.BOOL,
        name="or-bools.onnx",
    )
    integer_only = check_model(bools, target="rv1106")
    assert "quantized-integer-only" in {f.rule for f in integer_only.errors()}
    assert integer_only.verdict == "fails"


def layernorm(tmp_path: Path, epsilon: bool) -> Path:
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1)
    if epsilon:  # what torch.onnx.export writes
        node.attribute.append(helper.make_attribute("epsilon", 1e-5))
    constants = {"scale": weights(8) + 1, "bias": weights(8)}
    return model(tmp_path, [node], {"x": [1, 16, 8]}, constants, name=f"ln-{epsilon}.onnx")


def test_rules_narrowed_to_what_real_exports_showed_failing(tmp_path: Path) -> None:
    assert "layernorm-constant-parameters" in errors(layernorm(tmp_path, epsilon=False))
    assert "layernorm-constant-parameters" not in errors(layernorm(tmp_path, epsilon=True))
    # int64 Clip (torch's clamp of an index) compiles; int8 is still refused
    int64 = model(
        tmp_path,
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
        {"x": [1, 8]},
        {"lo": np.array(1, np.int64), "hi": np.array(5, np.int64)},
        input_type=TensorProto.INT64,
        name="clip64.onnx",
    )
    assert "integer-clip" not in errors(int64)
    # 5-D ReduceMean, ReduceSum and ReduceMax compile (torch exports at opsets 13, 17); a 3-D
    # MaxPool stays an error of real exports (fails)
    mean = helper.make_node("ReduceMean", ["x"], ["y"], axes=[2], keepdims=1)
    total = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)
    largest = helper.make_node("ReduceMax", ["x"], ["y"], axes=[2], keepdims=1)
    pool = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2], strides=[2, 2, 2])
    five = {"x": [1, 2, 4, 4, 4]}
    assert "rank-above-4" not in errors(model(tmp_path, [mean], five, opset=13, name="mean.onnx"))
    summed = model(tmp_path, [total], five, {"axes": np.array([2], np.int64)}, opset=13, name="sum.onnx")
    assert "rank-above-4" not in errors(summed)
    assert "rank-above-4" not in errors(model(tmp_path, [largest], five, opset=13, name="max.onnx"))
    pooled = check_model(model(tmp_path, [pool], five, opset=13, name="pool.onnx"))
    assert "rank-above-4" in {f.rule for f in pooled.errors()} and pooled.verdict == "fails"
    # a depthwise Conv3d compiles (torch exports); another grouping is still refused (node tests)
    for groups, weight in ((2, [2, 1, 3, 3, 3]), (1, [2, 2, 3, 3, 3])):
        conv = helper.make_node("Conv", ["x", "w"], ["y"], group=groups, pads=[1] * 6)
        conv_path = model(tmp_path, [conv], five, {"w": weights(*weight)}, opset=13, name=f"c{groups}.onnx")
        assert "grouped-conv-3d" not in errors(conv_path)
    grouped = helper.make_node("Conv", ["x", "w"], ["y"], group=2, pads=[1] * 6)
    regrouped = {"x": [1, 4, 4, 4, 4]}
    grouped_path = model(
        tmp_path, [grouped], regrouped, {"w": weights(4, 2, 3, 3, 3)}, opset=13, name="g.onnx"
    )
    assert "grouped-conv-3d" in errors(grouped_path)


def cubic(tmp_path: Path, of_constant: bool) -> Path:
    sizes = {"sizes": np.array([1, 8, 8, 8], np.int64), "table": weights(1, 8, 4, 4)}
    resize = helper.make_node(
        "Resize", ["table" if of_constant else "x", "", "", "sizes"], ["grown"], mode="cubic"
    )
    add = helper.make_node("Add", ["x", "grown"] if of_constant else ["grown", "grown"], ["y"])
    inputs = {"x": [1, 8, 8, 8] if of_constant else [1, 8, 4, 4]}
    return model(tmp_path, [resize, add], inputs, sizes, opset=13, name=f"cubic-{of_constant}.onnx")


def test_cubic_resize_of_a_constant_folds(tmp_path: Path) -> None:
    assert "resize-cubic" not in errors(cubic(tmp_path, of_constant=True))
    computed = check_model(cubic(tmp_path, of_constant=False))
    assert "resize-cubic" in {f.rule for f in computed.errors()} and computed.verdict == "fails"


def unused_input(tmp_path: Path, symbolic: bool) -> Path:
    path = model(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], {**X, "unused": [1, 4]}, name="u.onnx")
    if symbolic:
        loaded = onnx.load(path)
        loaded.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
        onnx.save(loaded, path)
    return path


def test_a_graph_input_no_node_reads(tmp_path: Path) -> None:
    static = unused_input(tmp_path, symbolic=False)
    found = {f.rule: f.severity for f in check_model(static).findings}
    assert found["unused-graph-input"] == "warning"  # rk3588 drops it and compiles
    assert "unused-graph-input" in errors(static, target="rv1106", quantized=True)
    # symbolic dims: baseline fixes them through load_onnx(inputs=[...]), which refuses it
    symbolic = check_model(unused_input(tmp_path, symbolic=True), shapes={"x": [1, 8, 16, 16]})
    assert "unused-graph-input" in {f.rule for f in symbolic.errors()} and symbolic.verdict == "fails"
    assert "unused-graph-input" not in {f.rule for f in check_model(cubic(tmp_path, False)).findings}


def attention(tmp_path: Path, query_bias: bool, identities: bool = True) -> Path:
    nodes = [helper.make_node("MatMul", ["x", f"w{n}"], [f"{n}_raw" if n == "q" else n]) for n in "qkv"]
    if query_bias:
        nodes.append(helper.make_node("Add", ["q_raw", "bq"], ["q"]))
    else:
        nodes.append(helper.make_node("Identity" if identities else "Relu", ["q_raw"], ["q"]))
    nodes += [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Div", ["scores", "scale"], ["scaled"]),
        helper.make_node("Softmax", ["scaled"], ["probs"], axis=-1),
        helper.make_node("Identity", ["probs"], ["probs_id"]),
        helper.make_node("MatMul", ["probs_id", "v"], ["y"]),
    ]
    constants = {f"w{n}": weights(16, 16) for n in "qkv"}
    constants |= {"bq": weights(16), "scale": np.array(4.0, np.float32)}
    name = f"attention-{query_bias}-{identities}.onnx"
    return model(tmp_path, nodes, {"x": [1, 8, 16]}, constants, opset=7 if identities else 13, name=name)


def test_attention_with_a_bare_query_projection(tmp_path: Path) -> None:
    bare = attention(tmp_path, query_bias=False)
    report = check_model(bare)
    assert "attention-bare-query" in {f.rule for f in report.errors()} and report.verdict == "fails"
    assert "attention-bare-query" in errors(bare, target="rv1106", quantized=True)
    assert "attention-bare-query" not in errors(bare, target="rk3566")  # its compiler builds it
    assert "attention-bare-query" not in errors(attention(tmp_path, query_bias=True))
    # a query that is not a bare projection (a Relu of it) is another pattern
    assert "attention-bare-query" not in errors(attention(tmp_path, query_bias=False, identities=False))


@pytest.mark.toolkit
def test_toolkit_confirms_the_attention_and_layernorm_rules(tmp_path: Path) -> None:
    bare, biased = attention(tmp_path, query_bias=False), attention(tmp_path, query_bias=True)
    assert not toolkit_compiles(bare) and toolkit_compiles(bare, "rk3566")
    assert toolkit_compiles(biased)
    assert not toolkit_compiles(layernorm(tmp_path, epsilon=False))
    assert toolkit_compiles(layernorm(tmp_path, epsilon=True))


def test_a_dequantized_layernorm_is_unknown_not_compiles(tmp_path: Path) -> None:
    """smart-turn v3.2 (QDQ, SIGSEGV): the cause is not isolated, so the verdict is unknown."""
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
        helper.make_node("LayerNormalization", ["d", "scale", "bias"], ["y"], axis=-1, epsilon=1e-5),
    ]
    constants: dict[str, np.ndarray] = {
        "s": np.array(0.1, np.float32),
        "z": np.array(0, np.uint8),
        "scale": weights(8) + 1,
        "bias": weights(8),
    }
    report = check_model(model(tmp_path, nodes, {"x": [1, 16, 8]}, constants, name="qdq-ln.onnx"))
    assert [f.rule for f in report.errors()] == ["layernorm-of-dequantized"]
    assert report.verdict == "unknown" and "unisolated" in report.reason
    assert check_model(layernorm(tmp_path, epsilon=True)).verdict == "compiles"


def multihead(tmp_path: Path, identity: bool, heads: bool = True) -> Path:
    """q @ kᵀ → Softmax → (Identity) → @ v over [1, 2, 8, 8] heads (or [1, 8, 8] without)."""
    shape = [1, 2, 8, 8] if heads else [1, 8, 8]
    nodes = [
        helper.make_node("MatMul", ["q", "k"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["probs"], axis=-1),
    ]
    probs = "probs"
    if identity:
        nodes.append(helper.make_node("Identity", ["probs"], ["probs_id"]))
        probs = "probs_id"
    nodes.append(helper.make_node("MatMul", [probs, "v"], ["y"]))
    inputs = {"q": shape, "k": shape, "v": shape}
    return model(tmp_path, nodes, inputs, opset=11, name=f"mh-{identity}-{heads}.onnx")


def test_an_identity_after_a_multihead_softmax(tmp_path: Path) -> None:
    """PP-OCRv5's SVTR blocks as paddle2onnx writes them (IndexError on rk3588 and rv1106)."""
    found = check_model(multihead(tmp_path, identity=True))
    assert "attention-softmax-identity" in {f.rule for f in found.errors()} and found.verdict == "fails"
    assert "attention-softmax-identity" in errors(multihead(tmp_path, True), target="rv1106", quantized=True)
    assert "attention-softmax-identity" not in errors(multihead(tmp_path, True), target="rk3566")
    assert "attention-softmax-identity" not in errors(multihead(tmp_path, identity=False))
    assert "attention-softmax-identity" not in errors(multihead(tmp_path, True, heads=False))  # 3-D compiles


def token_model(tmp_path: Path, cast_to: int) -> Path:
    """Token ids and an attention mask as int64 graph inputs, used as BERT-style encoders do: the
    mask unsqueezed and cast (to `cast_to`), ids > 0 cast to float, both scaling a float input."""
    inputs = [
        helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 8]),
        helper.make_tensor_value_info("mask", TensorProto.INT64, [1, 8]),
        helper.make_tensor_value_info("x", FLOAT, [1, 1, 8]),
    ]
    nodes = [
        helper.make_node("Unsqueeze", ["mask", "axis"], ["mask3"]),
        helper.make_node("Cast", ["mask3"], ["maskf"], to=cast_to),
        helper.make_node("Greater", ["ids", "zero"], ["kept"]),
        helper.make_node("Cast", ["kept"], ["keptf"], to=FLOAT),
        helper.make_node("Unsqueeze", ["keptf", "axis"], ["kept3"]),
        helper.make_node("Mul", ["x", "kept3"], ["y"]),
    ]
    if cast_to == FLOAT:
        nodes += [helper.make_node("Mul", ["y", "maskf"], ["z"])]
    constants = [
        numpy_helper.from_array(np.array([1], np.int64), "axis"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
    ]
    last = "z" if cast_to == FLOAT else "y"
    outputs = [helper.make_tensor_value_info(last, FLOAT, None)]
    if cast_to != FLOAT:
        outputs.append(helper.make_tensor_value_info("maskf", cast_to, None))
    graph = helper.make_graph(nodes, "tokens", inputs, outputs, constants)
    path = tmp_path / f"tokens-{cast_to}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_index_ops_on_token_inputs_compile_as_real_exports_showed(tmp_path: Path) -> None:
    """int64 Unsqueeze / Greater and their Casts to float: no single-op model built them with a
    computed input, torch exports of the same pattern compile on rk3588, rk3566 and rv1106."""
    floats = token_model(tmp_path, cast_to=FLOAT)
    for target, quantized in (("rk3588", False), ("rk3566", False), ("rv1106", True)):
        report = check_model(floats, target=target, quantized=quantized)
        assert "op-not-measured" not in {f.rule for f in report.findings}, target
        assert report.verdict == "compiles", target
    # a Cast to a type no export wrote (int16): still not measured, so unknown
    narrowed = check_model(token_model(tmp_path, cast_to=TensorProto.INT16))
    unmeasured = [f for f in narrowed.findings if f.rule == "op-not-measured"]
    assert unmeasured and all("(Cast)" in f.where for f in unmeasured)
    assert narrowed.verdict == "unknown"


def test_a_constant_of_shape_without_value_fails_on_real_evidence(tmp_path: Path) -> None:
    """swift-f0's load failure was bisected to it, so the rule decides alone."""
    assert evidence("constant-of-shape-default").kind != NODE_TESTS
    nodes = [
        helper.make_node("ConstantOfShape", ["s"], ["z"]),
        helper.make_node("Add", ["x", "z"], ["y"]),
    ]
    path = model(tmp_path, nodes, {"x": [1, 4, 8]}, {"s": np.array([1, 4, 8], np.int64)}, opset=11)
    report = check_model(path)
    assert report.verdict == "fails"
    assert "swift-f0" in next(f for f in report.errors() if f.rule == "constant-of-shape-default").source


@pytest.mark.toolkit
def test_toolkit_compiles_the_token_inputs_check_clears(tmp_path: Path) -> None:
    """The real compiler agrees with the cleared verdict (rk3588 and rk3566; rv1106 needs a
    quantized build, which bench/export_probes.py's labels cover)."""
    floats = token_model(tmp_path, cast_to=FLOAT)
    assert check_model(floats).verdict == "compiles"
    assert toolkit_compiles(floats) and toolkit_compiles(floats, "rk3566")


def test_rules_that_real_exports_confirmed_decide_alone(tmp_path: Path) -> None:
    """After the sixth round: torch exports of a grouped Conv3d, a computed PReLU slope, a 0-d
    graph input on rv1106 and a cast uint8 input fail for real, so these say "fails"."""
    grouped = helper.make_node("Conv", ["x", "w"], ["y"], group=2, pads=[1] * 6)
    conv3d = model(tmp_path, [grouped], {"x": [1, 4, 4, 4, 4]}, {"w": weights(4, 2, 3, 3, 3)}, opset=13)
    assert check_model(conv3d).verdict == "fails"
    prelu = model(
        tmp_path,
        [helper.make_node("PRelu", ["x", "slope"], ["y"])],
        {**X, "slope": [1, 8, 1, 1]},
        name="p.onnx",
    )
    assert check_model(prelu).verdict == "fails"
    # computed BatchNormalization statistics: a torch export crashes too (ints_computed_batchnorm)
    stats = {name: [8] for name in "sbmv"}
    batchnorm = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])
    assert check_model(model(tmp_path, [batchnorm], {**X, **stats}, name="bn.onnx")).verdict == "fails"
    # computed Clip bounds still rest on node tests only (torch writes Max / Min instead)
    clip = helper.make_node("Clip", ["x", "lo", "hi"], ["y"])
    bounds = {**X, "lo": [], "hi": []}
    assert check_model(model(tmp_path, [clip], bounds, name="clip.onnx")).verdict == "unknown"
    # a scalar graph input: rv1106 fails, rk3588 compiles
    scaled = model(
        tmp_path, [helper.make_node("Mul", ["x", "gain"], ["y"])], {"x": [1, 8], "gain": []}, name="g.onnx"
    )
    assert check_model(scaled, target="rv1106").verdict == "fails"
    assert check_model(scaled, target="rk3588").verdict == "compiles"


def uint8_pixels(tmp_path: Path, computed: bool) -> Path:
    """uint8 pixels cast to float and passed through Relu: the graph input itself, or a uint8
    tensor computed from it (a Max with a constant, which compiles on uint8)."""
    nodes = [helper.make_node("Cast", ["m" if computed else "x"], ["f"], to=FLOAT)]
    nodes.append(helper.make_node("Relu", ["f"], ["y"]))
    constants: dict[str, np.ndarray] = {}
    if computed:
        nodes.insert(0, helper.make_node("Max", ["x", "floor"], ["m"]))
        constants["floor"] = np.array([1], np.uint8)
    return model(
        tmp_path,
        nodes,
        {"x": [1, 3, 8, 8]},
        constants,
        opset=13,
        input_type=TensorProto.UINT8,
        output_type=FLOAT,
        name=f"u8-{computed}.onnx",
    )


def test_a_cast_uint8_graph_input_fails_on_every_target(tmp_path: Path) -> None:
    for target in ("rk3588", "rk3566", "rv1106"):
        report = check_model(uint8_pixels(tmp_path, computed=False), target=target)
        assert "uint8-input-cast" in {f.rule for f in report.errors()} and report.verdict == "fails"
    # a uint8 tensor computed in the graph was not exported: the rule does not reach it
    assert "uint8-input-cast" not in errors(uint8_pixels(tmp_path, computed=True))


def test_index_and_mask_ops_real_exports_compiled_are_cleared(tmp_path: Path) -> None:
    """int64 lengths + 1 and a Gather of them, masks combined with Xor and Not: torch exports of
    these compile on every target, so they are no longer "not measured" (or rv1106's single-op
    Not / Xor aborts)."""
    lengths = [
        helper.make_node("Add", ["x", "one"], ["ends"]),
        helper.make_node("Gather", ["ends", "column"], ["y"], axis=1),
    ]
    constants = {"one": np.array(1, np.int64), "column": np.array(0, np.int64)}
    path = model(tmp_path, lengths, {"x": [1, 4]}, constants, opset=13, input_type=TensorProto.INT64)

    def masks(as_float: bool) -> Path:
        nodes = [
            helper.make_node("Xor", ["x", "flip"], ["mixed"]),
            helper.make_node("Not", ["mixed"], ["kept" if as_float else "y"]),
        ]
        if as_float:  # as every torch export used its masks
            nodes.append(helper.make_node("Cast", ["kept"], ["y"], to=FLOAT))
        flip = {"flip": np.array([True, False, True, False])}
        out = FLOAT if as_float else TensorProto.BOOL
        return model(
            tmp_path,
            nodes,
            {"x": [1, 4]},
            flip,
            opset=13,
            input_type=TensorProto.BOOL,
            output_type=out,
            name=f"masks-{as_float}.onnx",
        )

    for target in ("rk3588", "rk3566", "rv1106"):
        assert check_model(masks(as_float=True), target=target).verdict == "compiles"
    for target in ("rk3588", "rk3566"):
        assert check_model(path, target=target).verdict == "compiles"
    # graphs with no float tensor abort rv1106's quantizer (bench/rule_probes.py not_output and
    # r13_integer_only_add, this very int64 + 1): "fails" there, by that cause
    for integer_only in (path, masks(as_float=False)):
        report = check_model(integer_only, target="rv1106")
        assert report.verdict == "fails" and "quantized-integer-only" in {f.rule for f in report.errors()}
    assert check_model(masks(as_float=False), target="rk3588").verdict == "compiles"
    # an int64 Neg is in torch exports now (session 16, bench/export_probes.py unk_int_neg_*),
    # a bool Identity (the romanizer's) in none: torch drops a clone, so it stays "not measured"
    negated = model(
        tmp_path,
        [helper.make_node("Neg", ["x"], ["y"])],
        {"x": [1, 4]},
        opset=13,
        input_type=TensorProto.INT64,
        name="neg.onnx",
    )
    assert check_model(negated).verdict == "compiles"
    copied = model(
        tmp_path,
        [helper.make_node("Identity", ["x"], ["y"])],
        {"x": [1, 4]},
        opset=13,
        input_type=TensorProto.BOOL,
        name="identity.onnx",
    )
    report = check_model(copied)
    assert report.verdict == "unknown" and "op-not-measured" in {f.rule for f in report.findings}


@pytest.mark.toolkit
def test_toolkit_confirms_the_cast_uint8_input_rule(tmp_path: Path) -> None:
    """The real compiler on the rule's own minimal model: Cast of a uint8 graph input, Relu."""
    assert not toolkit_compiles(uint8_pixels(tmp_path, computed=False))


def einsum_diagonal(tmp_path: Path, equation: str) -> Path:
    node = helper.make_node("Einsum", ["x"], ["y"], equation=equation)
    return model(tmp_path, [node], {"x": [1, 2, 4, 4]}, opset=13, name=f"e{len(equation)}.onnx")


def test_a_spaced_diagonal_einsum_fails_on_every_target(tmp_path: Path) -> None:
    """torch.einsum("... i i -> ... i") as torch exports it crashes every target (SIGSEGV); the
    same equation without spaces compiles."""
    spaced = einsum_diagonal(tmp_path, "... i i -> ... i")
    for target in ("rk3588", "rk3566", "rv1106"):
        report = check_model(spaced, target=target)
        assert "einsum-spaced-diagonal" in {f.rule for f in report.errors()} and report.verdict == "fails"
    assert "einsum-spaced-diagonal" not in errors(einsum_diagonal(tmp_path, "...ii->...i"))
    # the node test's form (a space before the arrow only) stays rv1106's own rule
    assert "einsum-spaced-diagonal" not in errors(einsum_diagonal(tmp_path, "...ii ->...i"), target="rv1106")


def test_every_rule_names_real_export_evidence() -> None:
    """Issue 33: no rule rests on single-op node tests alone. Those whose failing form no
    exporter writes say which exports were probed instead (not-exported: still unknown alone)."""
    assert [rule for rule, entry in RULES.items() if entry.kind == NODE_TESTS] == []
    probe = re.compile(r"\b(torch|skl|ints|ort|value_info|yolov5_tail)_[a-z0-9_{},*]+")
    for rule, entry in RULES.items():
        if entry.kind in (NOT_EXPORTED, UNISOLATED):
            assert entry.kind in THIN, rule
            assert probe.search(entry.cites) or "pipecat" in entry.cites, rule


def pytorch_converted(name: str) -> Path:
    """A model of the onnx package's pytorch-converted suite: exports of an early PyTorch."""
    return (
        Path(onnx.__file__).parent / "backend" / "test" / "data" / "pytorch-converted" / name / "model.onnx"
    )


def test_legacy_broadcast_decides_on_pytorchs_own_opset6_exports() -> None:
    # a slope per channel, broadcast by axis at opset 6: fails on every target (real labels)
    multi = check_model(pytorch_converted("test_PReLU_1d_multiparam"))
    assert "legacy-broadcast" in {f.rule for f in multi.errors()} and multi.verdict == "fails"
    # one slope for every channel broadcasts the same either way, and compiles
    assert "legacy-broadcast" not in {
        f.rule for f in check_model(pytorch_converted("test_PReLU_1d")).errors()
    }


def test_a_computed_one_element_gemm_bias_decides(tmp_path: Path) -> None:
    """torch.addmm with a bias computed from the input fails every target as the node tests do
    (torch_gemm_computed_bias_op*); a constant bias compiles."""
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], keepdims=0),
        helper.make_node("Reshape", ["m", "one"], ["c"]),
        helper.make_node("Gemm", ["x", "w", "c"], ["y"]),
    ]
    constants = {"one": np.array([1], np.int64), "w": weights(8, 4)}
    computed = model(tmp_path, nodes, {"x": [2, 8]}, constants, opset=13, name="computed.onnx")
    report = check_model(computed)
    assert "gemm-scalar-bias" in {f.rule for f in report.errors()} and report.verdict == "fails"
    constant = model(
        tmp_path,
        [helper.make_node("Gemm", ["x", "w", "c"], ["y"])],
        {"x": [2, 8]},
        {"w": weights(8, 4), "c": np.array([0.5], np.float32)},
        opset=13,
        name="constant.onnx",
    )
    assert "gemm-scalar-bias" not in errors(constant)


def float_equal(tmp_path: Path, both_computed: bool) -> Path:
    """A heat map's peaks (x == MaxPool(x)) or x == 0, the mask cast back to float: the ninth
    round's float Equal, which no single-op model had measured."""
    nodes = [helper.make_node("Relu", ["x"], ["r"])]
    constants: dict[str, np.ndarray] = {}
    if both_computed:
        nodes.append(helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Equal", ["r", "p"], ["e"]))
    else:
        constants["zero"] = np.array(0.0, np.float32)
        nodes.append(helper.make_node("Equal", ["r", "zero"], ["e"]))
    nodes.append(helper.make_node("Cast", ["e"], ["y"], to=FLOAT))
    return model(tmp_path, nodes, {"x": [1, 3, 8, 8]}, constants, opset=13, name=f"eq-{both_computed}.onnx")


def test_float_equal_is_cleared_by_the_torch_exports_that_compiled(tmp_path: Path) -> None:
    """torch.eq of two computed floats and of one and a constant compiled on every target
    (bench/export_probes.py r9_float_peaks_op*, r9_float_is_zero_op*: the exports table)."""
    for both in (True, False):
        for target in ("rk3588", "rk3566", "rv1106"):
            report = check_model(float_equal(tmp_path, both), target=target)
            assert "op-not-measured" not in {f.rule for f in report.findings}, (both, target)
            assert report.verdict == "compiles", (both, target)


def uint8_image(tmp_path: Path, reader: str) -> Path:
    """An HWC uint8 image input made CHW by a Transpose, then cast to float (as face aligners
    write it), or a Relu'd float image transposed (`reader` = "float")."""
    uint8 = reader != "float"
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1])]
    nodes.append(
        helper.make_node("Cast", ["t"], ["y"], to=FLOAT) if uint8 else helper.make_node("Relu", ["t"], ["y"])
    )
    return model(
        tmp_path,
        nodes,
        {"x": [8, 8, 3]},
        opset=13,
        input_type=TensorProto.UINT8 if uint8 else FLOAT,
        output_type=FLOAT,
        name=f"hwc-{reader}.onnx",
    )


def test_a_transposed_uint8_graph_input_fails_on_every_target(tmp_path: Path) -> None:
    for target in ("rk3588", "rk3566", "rv1106"):
        report = check_model(uint8_image(tmp_path, "uint8"), target=target)
        assert "uint8-input-transpose" in {f.rule for f in report.errors()} and report.verdict == "fails"
    # a float image transposed is not this rule's
    assert "uint8-input-transpose" not in errors(uint8_image(tmp_path, "float"))


def ml_model(tmp_path: Path, tree: bool) -> Path:
    """skl2onnx's StandardScaler as an ai.onnx.ml Scaler, alone or before a one-split
    TreeEnsembleClassifier (no ZipMap), as the ninth round's ExtraTrees pipeline."""
    nodes = [helper.make_node("Scaler", ["x"], ["s"], domain="ai.onnx.ml", offset=[0.5] * 4, scale=[2.0] * 4)]
    outputs = [helper.make_tensor_value_info("s", FLOAT, [1, 4])]
    if tree:
        nodes.append(
            helper.make_node(
                "TreeEnsembleClassifier",
                ["s"],
                ["label", "probabilities"],
                domain="ai.onnx.ml",
                classlabels_int64s=[0, 1],
                nodes_featureids=[0, 0, 0],
                nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"],
                nodes_nodeids=[0, 1, 2],
                nodes_treeids=[0, 0, 0],
                nodes_truenodeids=[1, 0, 0],
                nodes_falsenodeids=[2, 0, 0],
                nodes_values=[0.0, 0.0, 0.0],
                class_ids=[0, 1],
                class_nodeids=[1, 2],
                class_treeids=[0, 0],
                class_weights=[1.0, 1.0],
            )
        )
        outputs = [
            helper.make_tensor_value_info("label", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("probabilities", FLOAT, [1, 2]),
        ]
    graph = helper.make_graph(nodes, "skl", [helper.make_tensor_value_info("x", FLOAT, [1, 4])], outputs)
    opsets = [helper.make_opsetid("", 12), helper.make_opsetid("ai.onnx.ml", 1)]
    path = tmp_path / f"skl-{tree}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=opsets, ir_version=7), path)
    return path


def test_skl2onnx_scaler_and_tree_ensembles_are_judged(tmp_path: Path) -> None:
    """The Scaler compiled in skl2onnx exports on rk3588 / rk3566 (rv1106: KeyError, so still
    not judged there); every skl2onnx tree ensemble failed on every target."""
    for target in ("rk3588", "rk3566"):
        assert check_model(ml_model(tmp_path, tree=False), target=target).verdict == "compiles"
    assert check_model(ml_model(tmp_path, tree=False), target="rv1106").verdict == "unknown"
    for target in ("rk3588", "rk3566", "rv1106"):
        report = check_model(ml_model(tmp_path, tree=True), target=target)
        assert "ml-tree-ensemble" in {f.rule for f in report.errors()} and report.verdict == "fails"


@pytest.mark.toolkit
def test_toolkit_confirms_the_uint8_transpose_and_tree_rules(tmp_path: Path) -> None:
    assert not toolkit_compiles(uint8_image(tmp_path, "uint8"))
    assert not toolkit_compiles(ml_model(tmp_path, tree=True))
    assert toolkit_compiles(float_equal(tmp_path, both_computed=True))
