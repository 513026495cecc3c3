from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from baseline.errors import InputError
from baseline.files.onnx_facts import load_onnx_structure
from baseline.locker import pin_onnx
from baseline.project.layout import Project


def dynamic_model(path: Path, *, external: bool = False) -> Path:
    weight = numpy_helper.from_array(np.ones((4, 4), dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", None])],
        initializer=[weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="test")
    if external:
        onnx.save(
            model,
            str(path),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location="weights.bin",
            size_threshold=0,
        )
    else:
        onnx.save(model, str(path))
    return path


def test_facts_keep_symbolic_dims_and_skip_initializer_inputs(tmp_path: Path) -> None:
    path = dynamic_model(tmp_path / "m.onnx")
    pin = pin_onnx(Project.locate(tmp_path / "baseline.lock", root=tmp_path), path)
    assert [spec.name for spec in pin.inputs] == ["x"]
    assert pin.inputs[0].shape == ["batch", 4] and pin.outputs[0].shape == ["batch", "?"]
    assert pin.opsets == {"ai.onnx": 17} and pin.producer == "test"
    assert pin.path == "m.onnx" and pin.size == path.stat().st_size


def test_external_weights_are_not_read(tmp_path: Path) -> None:
    path = dynamic_model(tmp_path / "m.onnx", external=True)
    (tmp_path / "weights.bin").unlink()  # facts need only the graph
    assert load_onnx_structure(path).graph.input[0].name == "x"


@pytest.mark.parametrize("content", [b"", b"\x08\x07garbage that is not protobuf \xff\xff\xff", b"not onnx"])
def test_corrupt_onnx_is_one_line_input_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(InputError, match="bad.onnx") as caught:
        load_onnx_structure(path)
    assert "\n" not in str(caught.value)


def test_truncated_onnx(tmp_path: Path) -> None:
    good = dynamic_model(tmp_path / "m.onnx")
    truncated = tmp_path / "t.onnx"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(InputError, match="t.onnx.*re-export"):
        load_onnx_structure(truncated)
