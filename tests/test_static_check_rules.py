"""Issue 17's rules, one tiny `onnx.helper` model each (no toolkit), plus a few confirmed
against the real toolkit (`@pytest.mark.toolkit`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import baseline
from baseline.static_check import check_model
from baseline.static_check.known_failures import parameters_from_graph
from baseline.static_check.measured import measured_builds

FLOAT = TensorProto.FLOAT


def model(
    tmp_path: Path,
    nodes: list[onnx.NodeProto],
    inputs: dict[str, list[int]],
    constants: dict[str, np.ndarray] | None = None,
    opset: int = 17,
    input_type: int = FLOAT,
    outputs: tuple[str, ...] = ("y",),
    name: str = "m.onnx",
    output_type: int | None = None,
) -> Path:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, input_type, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(o, output_type or input_type, None) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in (constants or {}).items()],
    )
    path = tmp_path / name
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8), path)
    return path


def errors(path: Path, **kwargs: object) -> set[str]:
    return {f.rule for f in check_model(path, **kwargs).errors()}  # type: ignore[arg-type]


def weights(*shape: int) -> np.ndarray:
    return (np.random.default_rng(0).standard_normal(shape) * 0.1).astype(np.float32)


X = {"x": [1, 8, 16, 16]}


def test_constant_outputs_are_refused(tmp_path: Path) -> None:
    shape = model(tmp_path, [helper.make_node("Shape", ["x"], ["y"])], X, input_type=FLOAT, outputs=())
    graph = onnx.load(shape)
    graph.graph.output.append(helper.make_tensor_value_info("y", TensorProto.INT64, None))
    onnx.save(graph, shape)
    assert "constant-outputs" in errors(shape)


def test_normalisation_parameters_from_the_graph(tmp_path: Path) -> None:
    stats = {"s": weights(8) + 1, "b": weights(8), "m": weights(8), "v": np.abs(weights(8)) + 1}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])
    frozen = model(tmp_path, [node], X, stats, name="frozen.onnx")
    computed = model(tmp_path, [node], {**X, "s": [8], "b": [8], "m": [8], "v": [8]}, name="computed.onnx")
    assert check_model(frozen).verdict == "compiles"
    assert "parameter-not-constant" in errors(computed)


def test_prelu_slope_as_input(tmp_path: Path) -> None:
    path = model(tmp_path, [helper.make_node("PRelu", ["x", "slope"], ["y"])], {**X, "slope": [1, 8, 1, 1]})
    assert "parameter-not-constant" in errors(path)


def test_computed_parameters_decide_where_torch_writes_them(tmp_path: Path) -> None:
    """PRelu's computed slope fails inside torch exports too, so it decides; a Clip's computed
    bound does not (torch writes Max / Min, which compile), so it stays unknown."""
    slope = model(tmp_path, [helper.make_node("PRelu", ["x", "slope"], ["y"])], {**X, "slope": [1, 8, 1, 1]})
    assert check_model(slope).verdict == "fails"
    prelu = parameters_from_graph(helper.make_node("PRelu", ["x", "s"], ["y"]), "n", set())
    clip = parameters_from_graph(helper.make_node("Clip", ["x", "lo", "hi"], ["y"]), "n", set())
    assert [f.decisive for f in prelu] == [True] and [f.decisive for f in clip] == [False]


def test_clip_bounds_computed_and_integer_clip(tmp_path: Path) -> None:
    bounds = model(tmp_path, [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], {**X, "lo": [], "hi": []})
    assert "clip-bounds-computed" in errors(bounds)
    integer = model(
        tmp_path,
        [helper.make_node("Clip", ["x"], ["y"])],
        {"x": [3, 4]},
        input_type=TensorProto.INT8,
        name="i.onnx",
    )
    assert "integer-clip" in errors(integer)


def test_reduction_axes_and_cumsum_axis_must_be_constant(tmp_path: Path) -> None:
    reduce = model(
        tmp_path, [helper.make_node("ReduceSum", ["x", "axes"], ["y"])], {**X, "axes": [1]}, name="r.onnx"
    )
    assert "non-constant-shape-input" in errors(reduce)
    cumsum = model(
        tmp_path, [helper.make_node("CumSum", ["x", "axis"], ["y"])], {**X, "axis": []}, name="c.onnx"
    )
    cumsum_model = onnx.load(cumsum)
    cumsum_model.graph.input[1].type.tensor_type.elem_type = TensorProto.INT64
    onnx.save(cumsum_model, cumsum)
    assert "non-constant-shape-input" in errors(cumsum)


def test_recurrent_with_an_unnamed_output(tmp_path: Path) -> None:
    constants = {"W": weights(1, 48, 8), "R": weights(1, 48, 16)}
    node = helper.make_node("GRU", ["x", "W", "R"], ["", "h"], hidden_size=16)
    path = model(tmp_path, [node], {"x": [4, 1, 8]}, constants, opset=19, outputs=("h",))
    assert "recurrent-unnamed-output" in errors(path)


def gru_reading_state(tmp_path: Path, read_sequence: bool, op: str = "GRU") -> Path:
    """A recurrent op whose last state Y_h feeds a Relu; Y is a graph output or read by nothing."""
    gates = {"GRU": 3, "RNN": 1, "LSTM": 4}[op]
    constants = {"W": weights(1, gates * 16, 8), "R": weights(1, gates * 16, 16)}
    nodes = [
        helper.make_node(op, ["x", "W", "R"], ["seq", "h"], hidden_size=16),
        helper.make_node("Relu", ["h"], ["y"]),
    ]
    outputs = ("y", "seq") if read_sequence else ("y",)
    return model(tmp_path, nodes, {"x": [4, 1, 8]}, constants, opset=14, outputs=outputs, name=f"{op}.onnx")


def test_recurrent_with_an_unused_sequence_output(tmp_path: Path) -> None:
    # SpeechMOS plcmos_v2's second GRU: Y read by nothing, Y_h concatenated ("KeyError: ''")
    assert "recurrent-unused-sequence" in errors(gru_reading_state(tmp_path, read_sequence=False))
    assert "recurrent-unused-sequence" in errors(gru_reading_state(tmp_path, False, op="RNN"))
    assert "recurrent-unused-sequence" not in errors(gru_reading_state(tmp_path, read_sequence=True))
    assert "recurrent-unused-sequence" not in errors(gru_reading_state(tmp_path, False, op="LSTM"))


def layernorm(tmp_path: Path, computed: tuple[str, ...] = (), bias: bool = True) -> Path:
    parameters = {"scale": weights(8) + 1, "bias": weights(8)} if bias else {"scale": weights(8) + 1}
    node = helper.make_node("LayerNormalization", ["x", *parameters], ["y"], axis=-1)
    inputs = {"x": [1, 16, 8], **{name: [8] for name in computed}}
    constants = {k: v for k, v in parameters.items() if k not in computed}
    return model(tmp_path, [node], inputs, constants, name=f"ln-{'-'.join(computed)}-{bias}.onnx")


def test_layernorm_with_constant_parameters(tmp_path: Path) -> None:
    assert "layernorm-constant-parameters" in errors(layernorm(tmp_path))
    assert "layernorm-constant-parameters" in errors(layernorm(tmp_path, bias=False))
    assert "layernorm-constant-parameters" not in errors(layernorm(tmp_path, computed=("bias",)))


def convinteger(tmp_path: Path, computed: tuple[str, ...], zero_point: bool = True) -> Path:
    values = {"w": np.ones((2, 1, 3, 3), np.uint8), "zx": np.array(1, np.uint8)}
    names = ["x", "w", "zx"] if zero_point else ["x", "w"]
    node = helper.make_node("ConvInteger", names, ["y"])
    inputs = {"x": [1, 1, 8, 8], **{n: list(values[n].shape) for n in computed}}
    constants = {n: values[n] for n in names[1:] if n not in computed}
    # the output declares ConvInteger's int32 (onnx 1.14's shape inference refuses a mismatch)
    path = model(
        tmp_path,
        [node],
        inputs,
        constants,
        opset=10,
        input_type=TensorProto.UINT8,
        name="ci.onnx",
        output_type=TensorProto.INT32,
    )
    return path


def test_convinteger_with_constant_weights(tmp_path: Path) -> None:
    # the frozen test_convinteger_without_padding: SIGSEGV; as tested (all inputs) it compiles
    assert "convinteger-constant-weights" in errors(convinteger(tmp_path, ()))
    assert "convinteger-constant-weights" in errors(convinteger(tmp_path, (), zero_point=False))
    assert "convinteger-constant-weights" not in errors(convinteger(tmp_path, ("zx",)))


def test_constant_of_shape_needs_its_value(tmp_path: Path) -> None:
    def add_zeros(**value: onnx.TensorProto) -> Path:
        nodes = [
            helper.make_node("ConstantOfShape", ["s"], ["z"], **value),
            helper.make_node("Add", ["x", "z"], ["y"]),
        ]
        return model(tmp_path, nodes, {"x": [1, 4, 8]}, {"s": np.array([1, 4, 8], np.int64)}, opset=11)

    assert "constant-of-shape-default" in errors(add_zeros())
    assert errors(add_zeros(value=numpy_helper.from_array(np.zeros(1, np.float32)))) == set()


def test_dropout_with_a_constant_training_mode(tmp_path: Path) -> None:
    def dropout(training: bool) -> Path:
        constants = {"r": np.array(0.5, np.float32), "t": np.array(training)}
        node = helper.make_node("Dropout", ["x", "r", "t"], ["y"], seed=0)
        return model(tmp_path, [node], {"x": [1, 4, 8]}, constants, opset=13, name=f"d{training}.onnx")

    assert "dropout-training-mode" in errors(dropout(True))  # SIGABRT
    # a torch export in training mode aborts too: the rule decides alone
    assert check_model(dropout(True)).verdict == "fails"
    assert errors(dropout(False)) == set()


def test_convtranspose_3d_needs_constant_weights(tmp_path: Path) -> None:
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"])
    shape = {"x": [1, 1, 3, 4, 5]}
    frozen = model(tmp_path, [node], shape, {"w": weights(1, 2, 3, 3, 3)}, opset=11, name="f.onnx")
    computed = model(tmp_path, [node], {**shape, "w": [1, 2, 3, 3, 3]}, opset=11, name="c.onnx")
    assert "rank-above-4" not in errors(frozen)  # test_convtranspose_3d frozen compiles
    assert "rank-above-4" in errors(computed)  # as tested: SIGABRT
    assert check_model(computed).verdict == "unknown"  # no exporter probe wrote computed weights


def test_six_dim_transpose_fails_on_rk3566_and_rv1106(tmp_path: Path) -> None:
    node = helper.make_node("Transpose", ["x"], ["y"], perm=[0, 1, 4, 2, 5, 3])  # PixelShuffle's
    path = model(tmp_path, [node], {"x": [1, 4, 2, 2, 8, 8]})
    assert "transpose-6d" in errors(path, target="rk3566")
    assert "transpose-6d" in errors(path, target="rv1106", quantized=True)
    assert "transpose-6d" not in errors(path, target="rk3588")
    shuffle = [  # PixelShuffle as exported: the toolkit fuses it, and it compiles
        helper.make_node("Reshape", ["x", "s6"], ["x6"]),
        helper.make_node("Transpose", ["x6"], ["t"], perm=[0, 1, 4, 2, 5, 3]),
        helper.make_node("Reshape", ["t", "s4"], ["y"]),
    ]
    shapes = {"s6": np.array([1, 4, 2, 2, 8, 8], np.int64), "s4": np.array([1, 4, 16, 16], np.int64)}
    fused = model(tmp_path, shuffle, {"x": [1, 16, 8, 8]}, shapes, name="shuffle.onnx")
    assert "transpose-6d" not in errors(fused, target="rk3566")


def test_rv1106_refuses_computed_scalars(tmp_path: Path) -> None:
    path = model(tmp_path, [helper.make_node("Pow", ["x", "e"], ["y"])], {"x": [3], "e": []})
    assert "quantized-scalar-input" in errors(path, target="rv1106")
    assert "quantized-scalar-input" not in errors(path, target="rk3588")
    frozen = model(
        tmp_path, [helper.make_node("Pow", ["x", "e"], ["y"])], {"x": [3]}, {"e": np.array(2.0, np.float32)}
    )
    assert "quantized-scalar-input" not in errors(frozen, target="rv1106")


def test_rv1106_refuses_long_io_names(tmp_path: Path) -> None:
    def relu(output: str) -> Path:
        return model(tmp_path, [helper.make_node("Relu", ["x"], [output])], X, outputs=(output,))

    assert "io-name-too-long" in errors(relu("y" * 128), target="rv1106")
    assert "io-name-too-long" not in errors(relu("y" * 127), target="rv1106")
    assert "io-name-too-long" not in errors(relu("y" * 128), target="rk3588")


def test_rv1106_refuses_an_inverse_one_sided_dft(tmp_path: Path) -> None:
    def dft(onesided: int) -> Path:
        node = helper.make_node("DFT", ["x"], ["y"], axis=1, inverse=1, onesided=onesided)
        return model(tmp_path, [node], {"x": [1, 6, 10, 2]}, opset=19, name=f"dft{onesided}.onnx")

    assert "quantized-spectrum" in errors(dft(onesided=1), target="rv1106")
    assert "quantized-spectrum" not in errors(dft(onesided=0), target="rv1106")
    assert "quantized-spectrum" not in errors(dft(onesided=1), target="rk3588")


def test_rv1106_refuses_a_spaced_ellipsis_diagonal_einsum(tmp_path: Path) -> None:
    def einsum(equation: str, name: str) -> Path:
        node = helper.make_node("Einsum", ["x"], ["y"], equation=equation)
        return model(tmp_path, [node], {"x": [3, 5, 5]}, opset=12, name=name)

    spaced = einsum("...ii ->...i", "spaced.onnx")  # test_einsum_batch_diagonal's equation
    assert "quantized-einsum-spaced-ellipsis" in errors(spaced, target="rv1106")
    assert "quantized-einsum-spaced-ellipsis" not in errors(spaced, target="rk3588")
    for equation in ("...ii->...i", "...ij ->...ji", "bii ->bi"):  # measured to compile on rv1106
        assert "quantized-einsum-spaced-ellipsis" not in errors(einsum(equation, "ok.onnx"), target="rv1106")


def test_a_spaced_ellipsis_diagonal_read_by_a_node_fails_every_target(tmp_path: Path) -> None:
    """torch.einsum('...ii ->...i') then × 2 fails rk3588 and rk3566 too
    (torch_einsum_diagonal_arrowspace_op*), and it decides there alone; as the graph output (the
    node test) it compiles there."""
    two = {"two": np.array(2.0, np.float32)}
    for shape in ([3, 5, 5], [1, 2, 4, 4]):
        read = [
            helper.make_node("Einsum", ["x"], ["e"], equation="...ii ->...i"),
            helper.make_node("Mul", ["e", "two"], ["y"]),
        ]
        path = model(tmp_path, read, {"x": shape}, two, opset=13, name=f"read{len(shape)}.onnx")
        for target in ("rk3588", "rk3566"):
            assert check_model(path, target=target).verdict == "fails"
            assert "quantized-einsum-spaced-ellipsis" in errors(path, target=target)
    output = model(
        tmp_path,
        [helper.make_node("Einsum", ["x"], ["y"], equation="...ii ->...i")],
        {"x": [1, 2, 4, 4]},
        opset=13,
        name="output.onnx",
    )
    assert "quantized-einsum-spaced-ellipsis" not in errors(output, target="rk3588")


def test_averagepool_3d_with_dilations(tmp_path: Path) -> None:
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2, 2], dilations=[2, 2, 2])
    assert "avgpool-3d-dilations" in errors(model(tmp_path, [node], {"x": [1, 1, 8, 8, 8]}))


def test_eyelike_with_a_double_dtype(tmp_path: Path) -> None:
    node = helper.make_node("EyeLike", ["x"], ["y"], dtype=TensorProto.DOUBLE)
    # the output is declared double as the attribute says (onnx 1.14 refuses a mismatch)
    path = model(tmp_path, [node], {"x": [4, 4]}, output_type=TensorProto.DOUBLE)
    assert "float64-dtype-attribute" in errors(path)


def test_opposite_errors_fixed(tmp_path: Path) -> None:
    """Measured to compile: opset-9 Scan is left to the table, a constant Compress condition
    fixes the shape, computed ReduceL1 axes compile (test_reduce_l1_keep_dims_random)."""
    compress = helper.make_node("Compress", ["x", "keep"], ["y"], axis=1)
    frozen = model(tmp_path, [compress], X, {"keep": np.array([1, 0] * 4, dtype=bool)}, name="c.onnx")
    assert "data-dependent-op" not in errors(frozen)
    l1 = helper.make_node("ReduceL1", ["x", "axes"], ["y"], keepdims=1)
    path = model(tmp_path, [l1], {**X, "axes": [1]}, opset=18, name="l1.onnx")
    l1_model = onnx.load(path)
    l1_model.graph.input[1].type.tensor_type.elem_type = TensorProto.INT64
    onnx.save(l1_model, path)
    assert "non-constant-shape-input" not in errors(path)


def test_an_unmeasured_pattern_is_unknown_never_compiles(tmp_path: Path) -> None:
    # a Concat of int16 tensors: no single-op model of it was ever built
    path = model(
        tmp_path,
        [helper.make_node("Concat", ["x", "z"], ["y"], axis=0)],
        {"x": [2, 3], "z": [2, 3]},
        input_type=TensorProto.INT16,
    )
    report = check_model(path)
    assert report.verdict == "unknown" and not report.predicted_compile
    assert any("not measured" in f.message for f in report.findings if f.unknown)


def test_a_measured_refusal_is_an_error(tmp_path: Path) -> None:
    """The policy: every rk3588 model of an op and pattern failed → error, whatever the reason."""
    failed = {
        (op, tuple(sorted(b.dynamic)), b.dtype)
        for (op, target), builds in measured_builds("2.5.0").items()
        if target == "rk3588"
        for b in builds
        if b.outcome in ("fails", "crashes")
    }
    assert failed  # the table records failures per pattern
    node = helper.make_node("Max", ["x"], ["y"])  # test_max_one_input: SIGSEGV
    assert errors(model(tmp_path, [node], {"x": [3]})) == {"max-one-input"}


def test_measured_builds_match_every_computed_type(tmp_path: Path) -> None:
    """rv1106 (w8a8) compiles Pow of float32 by int32 but aborts on int32 by int32: the first
    input's type alone (int32 in test_pow_types_int32_float32, which compiled) is not enough."""

    def power(base: int, exponent: int) -> Path:
        graph = helper.make_graph(
            [helper.make_node("Pow", ["x", "e"], ["y"])],
            "g",
            [
                helper.make_tensor_value_info("x", base, [3]),
                helper.make_tensor_value_info("e", exponent, [3]),
            ],
            [helper.make_tensor_value_info("y", base, [3])],
        )
        path = tmp_path / f"pow{base}{exponent}.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8), path)
        return path

    int32, float32 = TensorProto.INT32, TensorProto.FLOAT
    refused = check_model(power(int32, int32), target="rv1106")
    assert [f.rule for f in refused.errors() if f.rule != "quantized-integer-only"] == ["op-refused"]
    # the refusal is a single-op SIGABRT, no real export: it cannot decide alone (issue 33); an
    # all-int32 graph is decided by the measured cause instead (no float tensor on rv1106)
    assert all(f.thin for f in refused.errors() if f.rule == "op-refused")
    assert refused.verdict == "fails" and "quantized-integer-only" in {f.rule for f in refused.errors()}
    assert check_model(power(float32, int32), target="rv1106").verdict == "compiles"
    assert check_model(power(int32, int32), target="rk3588").verdict == "compiles"


def test_rv1106_needs_a_quantized_build(tmp_path: Path) -> None:
    path = model(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], X)
    assert "needs-quantized-build" in errors(path, target="rv1106", quantized=False)
    assert "needs-quantized-build" not in errors(path, target="rv1106", quantized=True)
    assert check_model(path, target="rk3588", quantized=True).verdict == "unknown"  # rk3588 w8a8 not measured


def test_cli_rv1106_fp16_says_quantize(cli, tmp_path: Path) -> None:
    model(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], X)
    code, out, _ = cli(tmp_path, "check", "m.onnx", "--target", "rv1106", "--format", "json")
    assert code == 1 and json.loads(out)["findings"][0]["rule"] == "needs-quantized-build"


TOOLKIT_PYTHON = Path.home() / ".cache/baseline/toolchains/rknn-toolkit2-2.5.0-py311/bin/python"
BUILD = """
import sys
from rknn.api import RKNN
rknn = RKNN(verbose=False)
rknn.config(target_platform=sys.argv[2] if len(sys.argv) > 2 else "rk3588")
ok = rknn.load_onnx(model=sys.argv[1]) == 0 and rknn.build(do_quantization=False) == 0
print("COMPILED" if ok else "FAILED")
"""


def toolkit_compiles(path: Path, target: str = "rk3588") -> bool:
    """The real verdict: a build in the toolkit's own environment, in a subprocess (it may crash)."""
    return "COMPILED" in toolkit_build(path, target).stdout


def toolkit_build(path: Path, target: str) -> subprocess.CompletedProcess[str]:
    if not TOOLKIT_PYTHON.is_file():
        pytest.skip("RKNN-Toolkit2 2.5.0 is not provisioned")
    return subprocess.run(
        [str(TOOLKIT_PYTHON), "-c", BUILD, str(path), target],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=path.parent,
    )


def thin_error(path: Path, rule: str) -> bool:
    """`rule` fires as an error that rests on node tests only, so the verdict is unknown."""
    report = check_model(path)
    return rule in {f.rule for f in report.errors()} and report.verdict == "unknown"


@pytest.mark.toolkit
def test_toolkit_confirms_computed_batchnorm_fails(tmp_path: Path) -> None:
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])
    path = model(tmp_path, [node], {**X, "s": [8], "b": [8], "m": [8], "v": [8]})
    # a single-op model confirms the rule, and so does a torch export with computed statistics
    # (bench/export_probes.py ints_computed_batchnorm_op*): it decides alone (issue 33)
    report = check_model(path)
    assert "parameter-not-constant" in {f.rule for f in report.errors()} and report.verdict == "fails"
    assert not toolkit_compiles(path)


@pytest.mark.toolkit
def test_toolkit_confirms_unnamed_recurrent_output_fails(tmp_path: Path) -> None:
    constants = {"W": weights(1, 48, 8), "R": weights(1, 48, 16)}
    node = helper.make_node("GRU", ["x", "W", "R"], ["", "h"], hidden_size=16)
    path = model(tmp_path, [node], {"x": [4, 1, 8]}, constants, opset=19, outputs=("h",))
    assert thin_error(path, "recurrent-unnamed-output") and not toolkit_compiles(path)


@pytest.mark.toolkit
def test_toolkit_refuses_an_fp16_rv1106_build(tmp_path: Path) -> None:
    path = model(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], X)
    run = toolkit_build(path, "rv1106")
    assert "FAILED" in run.stdout and "not support do_quantization = False" in run.stdout + run.stderr
    assert "needs-quantized-build" in errors(path, target="rv1106", quantized=False)


@pytest.mark.toolkit
def test_toolkit_confirms_unused_gru_sequence_fails(tmp_path: Path) -> None:
    (tmp_path / "read").mkdir()
    unused, read = gru_reading_state(tmp_path, False), gru_reading_state(tmp_path / "read", True)
    assert check_model(unused).verdict == "fails" and not toolkit_compiles(unused)
    assert check_model(read).verdict == "compiles" and toolkit_compiles(read)


@pytest.mark.toolkit
def test_toolkit_confirms_layernorm_rule(tmp_path: Path) -> None:
    frozen, bias_input = layernorm(tmp_path), layernorm(tmp_path, computed=("bias",))
    assert check_model(frozen).verdict == "fails" and not toolkit_compiles(frozen)
    assert check_model(bias_input).verdict == "compiles" and toolkit_compiles(bias_input)


@pytest.mark.toolkit
def test_toolkit_confirms_frozen_compress_compiles(tmp_path: Path) -> None:
    compress = helper.make_node("Compress", ["x", "keep"], ["y"], axis=1)
    path = model(tmp_path, [compress], X, {"keep": np.array([1, 0] * 4, dtype=bool)})
    assert check_model(path).verdict == "compiles" and toolkit_compiles(path)


QUANTIZED_BUILD = """
import sys
import numpy as np
from rknn.api import RKNN
np.save("input0.npy", np.random.default_rng(0).random([int(d) for d in sys.argv[3].split(",")], np.float32))
open("dataset.txt", "w").write("input0.npy\\n")
rknn = RKNN(verbose=False)
rknn.config(target_platform=sys.argv[2])
ok = rknn.load_onnx(model=sys.argv[1]) == 0 and rknn.build(do_quantization=True, dataset="dataset.txt") == 0
print("COMPILED" if ok else "FAILED")
"""


@pytest.mark.toolkit
def test_toolkit_confirms_rv1106_spaced_ellipsis_einsum(tmp_path: Path) -> None:
    if not TOOLKIT_PYTHON.is_file():
        pytest.skip("RKNN-Toolkit2 2.5.0 is not provisioned")
    for equation, compiles in (("...ii ->...i", False), ("...ii->...i", True)):
        folder = tmp_path / str(compiles)
        folder.mkdir()
        node = helper.make_node("Einsum", ["x"], ["y"], equation=equation)
        path = model(folder, [node], {"x": [3, 5, 5]}, opset=12)
        run = subprocess.run(
            [str(TOOLKIT_PYTHON), "-c", QUANTIZED_BUILD, str(path), "rv1106", "3,5,5"],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=folder,
        )
        assert ("COMPILED" in run.stdout) == compiles, run.stdout[-500:] + run.stderr[-500:]
        predicted = check_model(path, target="rv1106", quantized=True).verdict
        # the spaced form decides: torch.einsum keeps it, and its exports fail too (issue 33)
        assert predicted == ("compiles" if compiles else "fails")


@pytest.mark.toolkit
def test_toolkit_confirms_a_read_spaced_ellipsis_diagonal_fails_rk3588(tmp_path: Path) -> None:
    for read, compiles in ((True, False), (False, True)):
        folder = tmp_path / str(read)
        folder.mkdir()
        einsum = helper.make_node("Einsum", ["x"], ["e" if read else "y"], equation="...ii ->...i")
        nodes = [einsum, helper.make_node("Mul", ["e", "two"], ["y"])] if read else [einsum]
        constants = {"two": np.array(2.0, np.float32)} if read else None
        path = model(folder, nodes, {"x": [1, 2, 4, 4]}, constants, opset=13)
        assert toolkit_compiles(path) == compiles
        assert check_model(path).verdict == ("compiles" if compiles else "fails")


def test_op_table_records_dynamic_positions() -> None:
    # the installed package's table (the wheel's, under `nox -s wheel`), not the checkout's
    table = json.loads(
        (Path(baseline.__file__).parent / "data/op_support/rknn-toolkit2-2.5.0.json").read_text()
    )
    assert all("dynamic" in record for record in table["models"].values())
