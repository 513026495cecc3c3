"""One onnxruntime session per model file: the static gate's probe and the golden run share it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from baseline.backends.base import BackendJob
from baseline.backends.onnxrt import golden_run
from baseline.runtime import sessions
from baseline.static_check import check_model


def relu_model(path: Path, op: str = "Relu") -> Path:
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 4]) for n in "xy")
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def background_builds_done() -> None:
    """A static check's background build (`build_in_background`) may outlive its test: on a
    loaded machine one of the previous test's landed in the next test's list."""
    for thread in threading.enumerate():
        if thread.name == sessions.BUILDER:
            thread.join(timeout=60)


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The models a session was built for, in order."""
    background_builds_done()
    made: list[str] = []
    build = sessions.new_session

    def counted(model: str | bytes) -> object:
        made.append(model if isinstance(model, str) else "<bytes>")
        return build(model)

    monkeypatch.setattr(sessions, "new_session", counted)
    monkeypatch.setattr(sessions, "_last", None)
    yield made
    background_builds_done()


def test_the_static_probe_and_the_golden_run_build_one_session(tmp_path: Path, built: list[str]) -> None:
    path = relu_model(tmp_path / "m.onnx")
    inputs = {"x": np.array([[[-1.0, 2.0, -3.0, 4.0]]], dtype=np.float32)}
    assert check_model(path, shapes={"x": [1, 4]}).predicted_compile
    run = golden_run(BackendJob(model="m", onnx_path=path, inputs=inputs, output_names=["y"]))
    assert run.outputs is not None and run.outputs["y"].tolist() == [[[0.0, 2.0, 0.0, 4.0]]]
    assert built == [str(path)]


def test_a_rewritten_file_gets_a_new_session(tmp_path: Path, built: list[str]) -> None:
    path = relu_model(tmp_path / "m.onnx")
    inputs = {"x": np.array([[[-1.0, 2.0, -3.0, 4.0]]], dtype=np.float32)}
    golden_run(BackendJob(model="m", onnx_path=path, inputs=inputs, output_names=["y"]))
    relu_model(path, "Neg")  # same name, same size
    run = golden_run(BackendJob(model="m", onnx_path=path, inputs=inputs, output_names=["y"]))
    assert run.outputs is not None and run.outputs["y"].tolist() == [[[1.0, -2.0, 3.0, -4.0]]]
    assert len(built) == 2


def test_a_settled_file_is_keyed_by_its_stat_a_fresh_one_by_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper no longer hashes a 54 MB model per call; a file changed within the last
    seconds still is hashed, as its times may not have moved since the previous change."""
    from baseline.files import hashing

    path = tmp_path / "m.onnx"
    path.write_bytes(b"abc")
    assert hashing.file_key(path) == hashing.sha256_bytes(b"abc")
    monkeypatch.setattr(hashing, "SETTLED_AFTER", -1.0)
    key = hashing.file_key(path)
    assert key.startswith("stat:3:") and key == hashing.file_key(path)
    assert hashing.file_key(tmp_path / "missing.onnx") == ""


def test_a_scalar_input_is_fed_as_a_0_d_array(tmp_path: Path) -> None:
    """pymupdf-layout's graph network takes a scalar `k`: each sample of its fixtures was a numpy
    scalar, which onnxruntime refused ("Unable to handle object of type <class 'numpy.int64'>")."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    k = helper.make_tensor_value_info("k", TensorProto.INT64, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [
        helper.make_node("Cast", ["k"], ["kf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "kf"], ["y"]),
    ]
    path = tmp_path / "scalar.onnx"
    graph = helper.make_graph(nodes, "g", [x, k], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    inputs: dict[str, np.ndarray] = {"x": np.ones((2, 1, 4), np.float32), "k": np.array([2, 3], np.int64)}
    run = golden_run(BackendJob(model="m", onnx_path=path, inputs=inputs, output_names=["y"]))
    assert run.error is None and run.outputs is not None
    assert run.outputs["y"][:, 0, 0].tolist() == [2.0, 3.0]


TASHKEEL = ("text2tashkeel==0.1.0", "text2tashkeel/models/bilstm.int8.onnx")
"""A dynamically quantized BiLSTM whose outputs change with onnxruntime's thread count."""


def _threads(path: Path, threads: int) -> object:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.use_deterministic_compute = True
    options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def test_a_golden_run_is_the_same_on_a_machine_of_any_core_count() -> None:
    """onnxruntime's default pool has a thread per core, and the thread count changes the
    arithmetic: text2tashkeel's int8 BiLSTM (from its wheel) gives other logits with two threads
    than with one. The golden session has one thread on every machine, so a lock taken on a
    laptop and verified on a CI runner of other cores compares the same numbers."""
    from tests.tasks import conftest as corpus

    path = corpus.pypi_onnx(*TASHKEEL)
    ids = {"input_ids": np.random.default_rng(0).integers(1, 40, size=(2, 24), dtype=np.int64)}
    golden = sessions.new_session(str(path)).run(None, ids)[0]
    one, two = (_threads(path, count).run(None, ids)[0] for count in (1, 2))  # type: ignore[attr-defined]
    assert not np.array_equal(one, two), "the model's arithmetic depends on the thread count"
    assert golden.tobytes() == one.tobytes()
