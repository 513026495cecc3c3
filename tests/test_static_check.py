"""The static checker on small graphs whose verdict is known from the real toolkit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from baseline.static_check import StaticFinding, check_model
from tests.conftest import REPO

FLOAT = TensorProto.FLOAT


def save(tmp_path: Path, nodes, inputs, outputs, initializers=(), opset: int = 13) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return path


def rules(report) -> dict[str, str]:
    return {f.rule: f.severity for f in report.findings}


def tensor(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, FLOAT, shape)


def test_symbolic_batch_is_an_error_until_a_shape_fixes_it(tmp_path: Path) -> None:
    path = save(
        tmp_path,
        [helper.make_node("Relu", ["x"], ["y"])],
        [tensor("x", ["N", 3, 8, 8])],
        [tensor("y", ["N", 3, 8, 8])],
    )
    assert rules(check_model(path)) == {"dynamic-input": "error"}
    assert check_model(path, shapes={"x": [1, 3, 8, 8]}).predicted_compile


def test_shape_inputs_must_be_constant(tmp_path: Path) -> None:
    scales = tensor("scales", [4])
    path = save(
        tmp_path,
        [helper.make_node("Resize", ["x", "", "scales"], ["y"])],
        [tensor("x", [1, 3, 8, 8]), scales],
        [tensor("y", None)],
    )
    report = check_model(path)
    assert not report.predicted_compile and "non-constant-shape-input" in rules(report)
    assert "Resize" in report.errors()[0].where


def test_shapes_computed_from_static_shapes_fold_to_constants(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["b1"]),
        helper.make_node("Concat", ["b1", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    constants = [
        numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "axes"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus_one"),
    ]
    path = save(tmp_path, nodes, [tensor("x", [1, 3, 8, 8])], [tensor("y", None)], constants)
    assert check_model(path).predicted_compile


def test_data_dependent_ops_and_new_opsets(tmp_path: Path) -> None:
    path = save(
        tmp_path,
        [helper.make_node("NonZero", ["x"], ["y"])],
        [tensor("x", [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
    )
    assert rules(check_model(path))["data-dependent-op"] == "error"
    new = save(
        tmp_path,
        [helper.make_node("Relu", ["x"], ["y"])],
        [tensor("x", [1, 4])],
        [tensor("y", [1, 4])],
        opset=20,
    )
    finding = check_model(new).errors()[0]
    assert finding.rule == "opset-max-19" and "opset_version=19" in finding.remedy
    # the way down is the exporter's own: charboundary's forest came from skl2onnx at opset 21
    sklearn = onnx.load(new)
    sklearn.producer_name = "skl2onnx"
    onnx.save(sklearn, new)
    remedy = check_model(new).errors()[0].remedy
    assert "target_opset={'': 19, 'ai.onnx.ml': 3}" in remedy and "torch" not in remedy


def test_rank_above_four_and_keepdims(tmp_path: Path) -> None:
    path = save(
        tmp_path,
        [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2])],
        [tensor("x", [1, 2, 4, 8, 8])],
        [tensor("y", None)],
    )
    assert rules(check_model(path))["rank-above-4"] == "error"
    reduce = save(
        tmp_path,
        [helper.make_node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=0)],
        [tensor("x", [1, 3, 4, 4])],
        [tensor("y", None)],
    )
    report = check_model(reduce)
    assert report.predicted_compile and rules(report)["reduce-keepdims-0"] == "warning"


def test_fp16_overflow_warns_from_reference_ranges(tmp_path: Path) -> None:
    path = save(
        tmp_path, [helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1, 4])], [tensor("y", [1, 4])]
    )
    report = check_model(path, output_ranges={"y": 1e11})
    assert report.predicted_compile and rules(report) == {"fp16-overflow": "warning"}


@pytest.mark.parametrize(("model", "code"), [("classifier", 0), ("detector", 0), ("nms_head", 1)])
def test_cli_check_without_the_toolkit(
    model: str, code: int, cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BASELINE_TOOLCHAINS", str(tmp_path / "no-toolkits-here"))
    exit_code, out, _ = cli(
        REPO, "check", f"fixtures/demo/{model}.onnx", "--target", "rk3588", "--format", "json"
    )
    report = json.loads(out)
    assert exit_code == code and report["predicted_compile"] is (code == 0)
    assert report["seconds"] < 1.0
    assert all(f["remedy"] for f in report["findings"])


def test_cli_check_bad_input(cli, tmp_path: Path) -> None:
    (tmp_path / "broken.onnx").write_bytes(b"\x00not onnx")
    code, _, err = cli(tmp_path, "check", "broken.onnx")
    assert code == 2 and "broken.onnx" in err and "re-export" in err


def test_the_targets_of_one_model_share_one_analysis_and_a_rewritten_file_gets_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from baseline.static_check import check, model_rules

    probes: list[str] = []
    probe = model_rules.runs_in_onnxruntime

    def counted(model: onnx.ModelProto, path: Path, *rest: object) -> list[StaticFinding]:
        probes.append(model.graph.node[0].op_type)
        return probe(model, path, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(check, "runs_in_onnxruntime", counted)
    relu = [helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [1, 3, 8, 8])], [tensor("y", [1, 3, 8, 8])]
    path = save(tmp_path, *relu)
    reports = [check_model(path, t, quantized=False) for t in ("rk3588", "rk3566", "rv1106")]
    assert probes == ["Relu"], "one onnxruntime session for the model, not one per target"
    assert [r.target for r in reports] == ["rk3588", "rk3566", "rv1106"]
    assert rules(reports[2]) != rules(reports[0])  # per-target rules still run: rv1106 fp16
    save(tmp_path, [helper.make_node("Sigmoid", ["x"], ["y"])], *relu[1:])  # same name and size
    assert check_model(path).nodes == 1 and probes == ["Relu", "Sigmoid"]
    assert check_model(path, shapes={"x": [1, 3, 8, 8]}) and probes[-1] == "Sigmoid"


def _model_with_weights() -> onnx.ModelProto:
    """A Conv weight (large float: set aside), Resize scales and a Reshape shape (small: read by
    inference), and other fields set everywhere, the weight's included."""
    from baseline.static_check.weightless import SET_ASIDE_FROM

    weight = numpy_helper.from_array(np.arange(4 * 64 * 3 * 3, dtype=np.float32).reshape(4, 64, 3, 3), "w")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), "scales")
    shape = numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "shape")
    assert np.prod(weight.dims) >= SET_ASIDE_FROM
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Resize", ["c", "", "scales"], ["r"]),
            helper.make_node("Reshape", ["r", "shape"], ["y"]),
        ],
        "g",
        [tensor("x", [1, 64, 8, 8])],
        [tensor("y", None)],
        initializer=[weight, scales, shape],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    model.doc_string, model.producer_name, model.graph.doc_string = "a model", "a test", "a graph"
    helper.set_model_props(model, {"author": "baseline"})
    model.graph.value_info.append(tensor("c", [1, 4, 8, 8]))
    model.graph.initializer[0].doc_string = "the weight's other fields are kept"
    return model


def _without_weight_bytes(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.graph.initializer[0].ClearField("raw_data")
    return copy


def test_shape_inference_runs_without_the_weights_and_gives_onnx_s_shapes(tmp_path: Path) -> None:
    """The static check reads a model without its large float initializers' bytes; inference on
    it (shapes read from small initializers included) is onnx's own on the whole model but for
    those bytes."""
    from baseline.static_check.graph import infer_shapes
    from baseline.static_check.weightless import load_weightless

    model = _model_with_weights()
    onnx.save(model, str(tmp_path / "m.onnx"))
    expected = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    expected.graph.initializer[0].ClearField("raw_data")

    weightless, cleared = load_weightless(tmp_path / "m.onnx")
    inferred = infer_shapes(weightless, tmp_path / "m.onnx", whole=lambda: pytest.fail("not needed"))

    assert cleared and weightless == _without_weight_bytes(model)
    assert inferred.SerializeToString() == expected.SerializeToString()
    assert [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim] == [1, 4 * 16 * 16]


def test_the_weightless_reader_keeps_every_other_byte_as_onnx_parses_it(tmp_path: Path) -> None:
    """The reader walks the file's wire format itself: dims written packed or negative, fields
    out of order, unknown fields, a second graph field (protobuf merges it) all read as onnx
    reads them; what it does not walk (a group) is parsed whole; a file that is not ONNX gets
    onnx's one-line error."""
    from baseline.errors import InputError
    from baseline.static_check.weightless import load_weightless

    model = _model_with_weights()
    path = tmp_path / "m.onnx"

    def read_back(raw: bytes) -> tuple[onnx.ModelProto, bool]:
        path.write_bytes(raw)
        return load_weightless(path)

    def expected(raw: bytes) -> onnx.ModelProto:
        parsed = onnx.ModelProto()
        parsed.ParseFromString(raw)
        return _without_weight_bytes(parsed)

    plain = model.SerializeToString()
    # field 1 (dims) of the weight, which onnx writes unpacked first, written packed after raw_data
    weight = model.graph.initializer[0]
    unpacked_dims = b"".join(bytes([0x08, dim]) for dim in weight.dims)
    assert weight.SerializeToString().startswith(unpacked_dims)
    reordered = onnx.TensorProto()
    reordered.ParseFromString(
        weight.SerializeToString()[len(unpacked_dims) :] + b"\x0a\x04" + bytes(weight.dims)
    )
    assert reordered == weight
    unknown_field = b"\xa0\x06\x01"  # field 100, varint 1: kept by onnx as an unknown field
    second_graph = helper.make_graph([], "", [], [], doc_string="merged").SerializeToString()
    cases = {
        "plain": plain,
        "packed dims after the bytes": plain.replace(
            weight.SerializeToString(), reordered.SerializeToString()
        ),
        "unknown field": plain + unknown_field,
        "second graph field": plain + b"\x3a" + bytes([len(second_graph)]) + second_graph,
    }
    for case, raw in cases.items():
        assert read_back(raw) == (expected(raw), True), case

    negative = _model_with_weights()
    negative.graph.initializer[0].dims[0] = -4  # no longer a large weight: bytes kept
    assert read_back(negative.SerializeToString()) == (negative, False)

    group = plain + b"\xa3\x06\xa4\x06"  # an empty group (field 100): onnx skips it
    assert read_back(group) == (expected(group), True)

    for broken in (b"", plain[:-3], b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"):
        with pytest.raises(InputError, match="m.onnx: (not a valid ONNX model|holds no ONNX graph)"):
            read_back(broken)


def test_the_helper_warm_up_loads_what_a_first_check_needs() -> None:
    """`baseline.runtime.isolated.WARM_UP` names it: a helper runs it after it is ready, before the
    first call."""
    import sys

    from baseline.runtime import sessions
    from baseline.runtime.isolated import WARM_UP
    from baseline.static_check import check
    from baseline.static_check.measured import load_table

    assert WARM_UP == "baseline.static_check.check:warm_up"
    load_table.cache_clear()
    with sessions._guard:  # a hinted session is being built: the table waits for the first check
        check.warm_up()
    assert "onnxruntime" in sys.modules
    assert load_table.cache_info().currsize == 0
    check.warm_up()
    assert load_table.cache_info().currsize >= 1


def test_check_refuses_a_model_whose_external_data_is_missing_or_escapes(tmp_path: Path, cli) -> None:
    """`check` read the graph without its weights and predicted "compiles" for a model whose
    external data is missing; it refuses it as `lock` does, in one line."""
    model = onnx.load(str(REPO / "fixtures" / "demo" / "classifier.onnx"))
    target = tmp_path / "classifier.onnx"
    onnx.save(model, str(target), save_as_external_data=True, location="classifier.weights", size_threshold=0)
    (tmp_path / "classifier.weights").unlink()
    code, out, err = cli(tmp_path, "check", "classifier.onnx")
    assert code == 2 and "external data file 'classifier.weights'" in err and "Traceback" not in out + err, (
        out + err
    )


def long_chain(nodes: int) -> onnx.ModelProto:
    """`nodes` nodes in a chain of Relu, Add (reading the graph input, which every Add shares)
    and Unsqueeze + ReduceMax with keepdims=0 (a warning each): a hostile graph's shape."""
    made: list[onnx.NodeProto] = []
    previous = "x"
    while len(made) < nodes:
        index = len(made)
        made += [
            helper.make_node("Relu", [previous], [f"r{index}"], name=f"r{index}"),
            helper.make_node("Add", [f"r{index}", "x"], [f"a{index}"], name=f"a{index}"),
            helper.make_node("Unsqueeze", [f"a{index}", "axis"], [f"u{index}"], name=f"u{index}"),
            helper.make_node(
                "ReduceMax", [f"u{index}"], [f"m{index}"], name=f"m{index}", keepdims=0, axes=[0]
            ),
        ]
        previous = f"m{index}"
    graph = helper.make_graph(
        made,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [1, 4])],
        initializer=[numpy_helper.from_array(np.array([0], dtype=np.int64), "axis")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def python_steps(path: Path) -> int:
    """The Python lines `check_model(path)` runs on this thread (a loop's body once per turn,
    a comprehension's per item): a count that grows with the work done and is the same on
    every machine, unlike seconds. Scans in C (`x in a_list`) are not counted."""
    import sys
    from types import FrameType
    from typing import Any

    steps = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal steps
        steps += 1
        return trace

    sys.settrace(trace)
    try:
        check_model(path)
    finally:
        sys.settrace(None)
    return steps


def test_the_check_does_linear_work_in_the_nodes(tmp_path: Path) -> None:
    """Issue 31: a 100,000-node graph must not take quadratic time. Four times the nodes cost
    at most ~four times the steps (a per-node scan of every node would cost sixteen)."""
    sizes = (100, 400)
    for nodes in (8, *sizes):
        onnx.save(long_chain(nodes), tmp_path / f"chain{nodes}.onnx")
    python_steps(tmp_path / "chain8.onnx")  # the op table, onnxruntime: loaded once, not per node
    small, large = (python_steps(tmp_path / f"chain{nodes}.onnx") for nodes in sizes)
    assert large <= 4.4 * small, (small, large)


def test_check_prints_its_findings_in_one_go_and_escaped(tmp_path: Path, cli, monkeypatch) -> None:
    """A rich print per finding cost ~0.3 ms: 31 s for a graph with 100,000 findings. They are
    printed together (`Output.lines`), node names with control characters or markup as text."""
    from baseline.cli.output import Output

    nodes = [
        helper.make_node("Foo", [f"t{i}"], [f"t{i + 1}"], name=f"[bold]n{i}\x1b[31m", domain="evil")
        for i in range(30)
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("t30", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("evil", 1)]
    )
    model.ir_version = 8
    onnx.save(model, tmp_path / "custom.onnx")
    printed: list[str] = []
    monkeypatch.setattr(Output, "line", lambda self, text, width=None: printed.append(str(text)))
    code, out, err = cli(tmp_path, "check", "custom.onnx")
    assert code == 1 and "Traceback" not in out + err, out + err
    assert printed == [], "a print per line"
    lines = out.splitlines()  # a line per node, onnxruntime's refusal, the verdict
    assert len(lines) == 32 and all(
        line.startswith("ERROR   [custom-domain] node '[bold]n") for line in lines[:30]
    )
    assert lines[30].startswith("ERROR   [onnxruntime-rejects] model: ")
    assert "\\x1b[31m' (Foo): op from domain 'evil'" in lines[0] and "\x1b" not in out
    assert lines[-1].startswith("custom.onnx: 30 nodes, predicted NOT to compile for rk3588 with toolkit")
