"""The single-op models to measure: ONNX's node tests and a few generated NPU ops."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from op_support.common import OpModel


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
