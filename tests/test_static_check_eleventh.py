"""Issue 33, the eleventh round's four false "compiles" cut after its one score (real 2.5.0
conversions, `bench/eleventh_misses.py`, outcomes in `bench/results/eleventh-misses-2.5.0-*.json`):
clashroyalebuildabot's YOLOv5 at batch 10 (a rank-5 Mul by a constant), mustatil's Ultralytics 8.4
DFL split in halves, fastGRAHSP's repeated default-domain import, and fusion-surrogates' product
of two Gemm columns on rv1106 (with the sum of two columns found beside it). Each test model is a
probe of the tables there, positive and negative."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from baseline.static_check import check_model
from baseline.static_check.evidence import REAL_EXPORT, evidence
from tests.test_static_check_rules import model, toolkit_compiles, weights

TARGETS = (("rk3588", False), ("rk3566", False), ("rv1106", True))


def verdicts(path: Path, **kwargs: object) -> set[str]:
    """The verdict on every target (each as `bench/agreement.py` builds it)."""
    return {check_model(path, target=t, quantized=q, **kwargs).verdict for t, q in TARGETS}  # type: ignore[arg-type]


def rules(path: Path, target: str = "rk3588", quantized: bool = False) -> dict[str, str]:
    """The new rules' findings: rule -> severity."""
    return {f.rule: f.severity for f in check_model(path, target=target, quantized=quantized).findings}


# 1. elementwise-const-rank5 (probes `number`)


def by_constant(
    tmp_path: Path, shape: list[int], op: str = "Mul", constant: list[int] | None = None, first: bool = False
) -> Path:
    """One elementwise op of a graph input by a constant (a scalar 2 unless shaped; `first`: the
    constant is the node's first operand)."""
    node = helper.make_node(op, ["k", "x"] if first else ["x", "k"], ["y"])
    constants = {"k": np.full(constant or [], 2.0, np.float32)}
    name = f"{op}-{'x'.join(map(str, shape))}-{constant}-{first}.onnx"
    return model(tmp_path, [node], {"x": shape}, constants, opset=13, name=name)


def test_a_batched_rank5_tensor_by_a_constant_fails_every_target(tmp_path: Path) -> None:
    batched = by_constant(tmp_path, [10, 3, 8, 8, 2])
    for target, quantized in TARGETS:
        report = check_model(batched, target=target, quantized=quantized)
        finding = next(f for f in report.errors() if f.rule == "elementwise-const-rank5")
        assert report.verdict == "fails" and "node_use_target_const" in finding.message
        assert "batch 1" in finding.remedy and "'y' (Mul)" in finding.where
    # Add, Sub, Div; the constant's shape; dims 0 and 1 swapped or both 2; rank 6 even with 1s
    for op in ("Add", "Sub", "Div"):
        assert verdicts(by_constant(tmp_path, [10, 3, 8, 8, 2], op)) == {"fails"}
    assert verdicts(by_constant(tmp_path, [10, 3, 8, 8, 2], constant=[1, 3, 1, 1, 1])) == {"fails"}
    for shape in ([3, 10, 8, 8, 2], [2, 2, 2, 2, 2], [10, 3, 8, 8, 1], [1, 1, 8, 8, 2, 2]):
        assert verdicts(by_constant(tmp_path, shape)) == {"fails"}
    # the constant first (k * x, k - x) fails too (mul5d_b10_const_first, sub5d_b10_const_first)
    for op in ("Mul", "Sub"):
        assert verdicts(by_constant(tmp_path, [10, 3, 8, 8, 2], op, first=True)) == {"fails"}


def test_batch_1_rank_4_pow_and_computed_operands_compile(tmp_path: Path) -> None:
    for shape in ([1, 3, 8, 8, 2], [10, 1, 8, 8, 2], [10, 3, 8, 2]):
        assert verdicts(by_constant(tmp_path, shape)) == {"compiles"}
    assert verdicts(by_constant(tmp_path, [10, 3, 8, 8, 2], "Pow")) == {"compiles"}
    two = model(
        tmp_path,
        [helper.make_node("Mul", ["x", "z"], ["y"])],
        {"x": [10, 3, 8, 8, 2], "z": [10, 3, 8, 8, 2]},
        opset=13,
        name="two.onnx",
    )
    assert verdicts(two) == {"compiles"}


def test_an_open_dim_is_not_an_elementwise_error(tmp_path: Path) -> None:
    open_batch = by_constant(tmp_path, [10, 3, 8, 8, 2])
    loaded = onnx.load(open_batch)
    loaded.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    onnx.save(loaded, open_batch)
    assert "elementwise-const-rank5" not in rules(open_batch)  # dynamic-input says the rest


# 2. yolov8-dfl-split (probes `houses`)


def dfl_head(
    tmp_path: Path, source: str = "concat", layout: str = "8.4", halves: str = "slices", opset: int = 12
) -> Path:
    """The YOLOv8 box branch on two small scales: its source (`concat` of Reshapes of 4-D maps,
    as 8.4.69; `reshape` of one map; `split` of joined box and class maps, as 8.3.2xx; `input`),
    the DFL (`8.4`: two Transposes; `8.0`: one) and its halves (`slices`, `split`, `one`, `none`)."""
    grids, nodes, inputs = (4, 2), [], {}
    constants: dict[str, np.ndarray] = {}
    channels = 65 if source == "split" else 64
    maps = grids[:1] if source == "reshape" else grids
    anchors = sum(g * g for g in maps)
    for i, grid in enumerate(maps):
        inputs[f"map{i}"] = [1, channels, grid, grid]
        constants[f"flat{i}"] = np.array([1, channels, -1], np.int64)
        nodes.append(helper.make_node("Reshape", [f"map{i}", f"flat{i}"], [f"flat_map{i}"]))
    boxes = "flat_map0" if source == "reshape" else "boxes"
    if source == "concat":
        nodes.append(helper.make_node("Concat", ["flat_map0", "flat_map1"], ["boxes"], axis=2))
    elif source == "split":
        nodes.append(helper.make_node("Concat", ["flat_map0", "flat_map1"], ["joined"], axis=2))
        nodes.append(helper.make_node("Split", ["joined"], ["boxes", "classes"], axis=1, split=[64, 1]))
    elif source == "input":
        nodes, constants, inputs = [], {}, {"boxes": [1, 64, anchors]}
    constants.update(
        {
            "bins": np.array([1, 4, 16, anchors], np.int64),
            "project": np.arange(16, dtype=np.float32).reshape(1, 16, 1, 1),
            "sides": np.array([1, 4, anchors], np.int64),
        }
    )
    nodes.append(helper.make_node("Reshape", [boxes, "bins"], ["binned"]))
    if layout == "8.4":
        nodes += [
            helper.make_node("Transpose", ["binned"], ["last"], perm=[0, 3, 1, 2]),
            helper.make_node("Softmax", ["last"], ["soft"], axis=3 if opset < 13 else -1),
            helper.make_node("Transpose", ["soft"], ["weighted"], perm=[0, 3, 2, 1]),
        ]
    else:
        nodes += [
            helper.make_node("Transpose", ["binned"], ["first"], perm=[0, 2, 1, 3]),
            helper.make_node("Softmax", ["first"], ["weighted"], axis=1),
        ]
    nodes += [
        helper.make_node("Conv", ["weighted", "project"], ["expected"]),
        helper.make_node("Reshape", ["expected", "sides"], ["distances"]),
    ]
    outputs: tuple[str, ...] = ("distances",)
    if halves in ("slices", "one"):
        constants.update({f"at{v}": np.array([v], np.int64) for v in (0, 2, 4)})
        constants["axis1"] = np.array([1], np.int64)
        nodes.append(helper.make_node("Slice", ["distances", "at0", "at2", "axis1"], ["left_top"]))
        outputs = ("left_top",)
        if halves == "slices":
            nodes.append(helper.make_node("Slice", ["distances", "at2", "at4", "axis1"], ["right_bottom"]))
            outputs = ("left_top", "right_bottom")
    elif halves == "split":
        nodes.append(helper.make_node("Split", ["distances"], ["left_top", "right_bottom"], axis=1))
        if opset < 13:  # equal halves need no sizes from opset 13
            nodes[-1].attribute.append(helper.make_attribute("split", [2, 2]))
        outputs = ("left_top", "right_bottom")
    name = f"dfl-{source}-{layout}-{halves}-{opset}.onnx"
    return model(tmp_path, nodes, inputs, constants, opset=opset, outputs=outputs, name=name)


def test_the_8_4_dfl_of_reshaped_maps_split_in_halves_fails_every_target(tmp_path: Path) -> None:
    concat = dfl_head(tmp_path)
    for target, quantized in TARGETS:
        report = check_model(concat, target=target, quantized=quantized)
        finding = next(f for f in report.errors() if f.rule == "yolov8-dfl-split")
        assert report.verdict == "fails" and "seperate_conv_rs_split" in finding.message
        assert "8.3.2xx" in finding.remedy and "(Transpose)" in finding.where
    # a Split for halves, and one map reshaped without a Concat (dfl84_concat_split, _reshape_slices)
    assert verdicts(dfl_head(tmp_path, halves="split")) == {"fails"}
    assert verdicts(dfl_head(tmp_path, source="reshape")) == {"fails"}
    # opset 17, the Softmax axis written -1 (dfl84_concat_slices_op17_axis_last)
    assert verdicts(dfl_head(tmp_path, opset=17)) == {"fails"}


def test_dfl_sources_layouts_and_halves_that_compiled(tmp_path: Path) -> None:
    # 8.3.2xx (a Split of the joined maps: napari-macrophage, ppllocr), a graph input, the older
    # layout, no halves, one half (dfl84_split_slices, _input_slices, dfl80_*, _concat_none, the cut)
    for source, layout, halves in (
        ("split", "8.4", "slices"),
        ("input", "8.4", "slices"),
        ("concat", "8.0", "slices"),
        ("concat", "8.0", "split"),
        ("concat", "8.4", "none"),
        ("concat", "8.4", "one"),
    ):
        path = dfl_head(tmp_path, source, layout, halves)
        assert "yolov8-dfl-split" not in rules(path) and verdicts(path) == {"compiles"}, path.name


# 3. duplicate-opset-import (probes `galagn`)


def columns(
    tmp_path: Path,
    op: str = "Gather",
    opset: int = 10,
    imports: int = 2,
    count: int = 2,
    scalar: bool = False,
) -> Path:
    """Columns 19, 20 (or 19 alone) of X [1, 23], each an output; `op` Gather ([1] indices, or
    scalars), Slice or one Split; the default domain imported `imports` times, as onnx.compose
    merges write it."""
    nodes, constants, outputs = [], {}, []
    if op == "Split":
        if opset < 13:
            nodes.append(helper.make_node("Split", ["X"], ["a", "b", "c"], axis=1, split=[19, 1, 3]))
        else:  # opset 13 moved the sizes to an input
            constants["sizes"] = np.array([19, 1, 3], np.int64)
            nodes.append(helper.make_node("Split", ["X", "sizes"], ["a", "b", "c"], axis=1))
        outputs = ["a", "b", "c"]
    for k, index in enumerate((19, 20)[:count] if op != "Split" else ()):
        if op == "Gather":
            constants[f"i{k}"] = np.array(index if scalar else [index], np.int64)
            nodes.append(helper.make_node("Gather", ["X", f"i{k}"], [f"col{k}"], axis=1))
        else:
            constants.update({f"s{k}": np.array([index], np.int64), f"e{k}": np.array([index + 1], np.int64)})
            constants[f"a{k}"] = np.array([1], np.int64)
            nodes.append(helper.make_node("Slice", ["X", f"s{k}", f"e{k}", f"a{k}"], [f"col{k}"]))
        outputs.append(f"col{k}")
    path = model(tmp_path, nodes, {"X": [1, 23]}, constants, opset=opset, outputs=tuple(outputs))
    loaded = onnx.load(path)
    loaded.opset_import.extend([helper.make_opsetid("", opset)] * (imports - 1))
    named = tmp_path / f"columns-{op}-{opset}-{imports}-{count}-{scalar}.onnx"
    onnx.save(loaded, named)
    return named


def test_two_columns_with_a_repeated_default_import_below_13_fail_every_target(tmp_path: Path) -> None:
    gathers = columns(tmp_path)
    for target, quantized in TARGETS:
        report = check_model(gathers, target=target, quantized=quantized)
        finding = next(f for f in report.errors() if f.rule == "duplicate-opset-import")
        assert report.verdict == "fails" and "2 times at opset 10" in finding.message
        assert "one opset_import entry per domain" in finding.remedy and "(Gather)" in finding.where
    for path in (
        columns(tmp_path, imports=3),
        columns(tmp_path, op="Slice"),
        columns(tmp_path, op="Split"),
        columns(tmp_path, opset=11),
        columns(tmp_path, opset=12),
        columns(tmp_path, scalar=True),
    ):
        assert verdicts(path) == {"fails"}, path.name


def test_one_import_one_column_or_opset_13_compile_the_repeat_is_said(tmp_path: Path) -> None:
    assert verdicts(columns(tmp_path, imports=1)) == {"compiles"}
    assert verdicts(columns(tmp_path, imports=1, scalar=True)) == {"compiles"}
    assert "duplicate-opset-import" not in rules(columns(tmp_path, op="Split", imports=1))
    for path in (
        columns(tmp_path, count=1),
        columns(tmp_path, opset=13),
        columns(tmp_path, op="Split", opset=13),
    ):
        assert rules(path)["duplicate-opset-import"] == "warning" and verdicts(path) == {"compiles"}


# 4. gemm-column-product, gemm-column-sum (probes `qlknn`)


def gemm_columns(
    tmp_path: Path,
    combine: str = "Mul",
    source: str = "Gemm",
    scalar: bool = True,
    scaled: bool = False,
    same: bool = False,
) -> Path:
    """x [1, 16] -> Gemm / MatMul / Relu to 8 values -> [a per-column scale and shift, a Clip of
    the second column] -> columns 1 and 0 Gathered (axis 1) -> `combine` (Mul, Add, or `none`:
    both outputs); `same`: column 1 by itself."""
    constants: dict[str, np.ndarray] = {"one": np.array(1, np.int64), "zero": np.array(0, np.int64)}
    if not scalar:
        constants = {name: value.reshape(1) for name, value in constants.items()}
    if source == "Gemm":
        constants.update({"w": weights(8, 16), "b": np.zeros(8, np.float32)})
        nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["fluxes"], transB=1)]
    elif source == "MatMul":
        constants["w"] = weights(16, 8)
        nodes = [helper.make_node("MatMul", ["x", "w"], ["fluxes"])]
    else:
        nodes = [helper.make_node("Relu", ["x"], ["fluxes"])]
    read = "fluxes"
    if scaled:
        constants.update(
            {"scale": np.linspace(0.1, 40, 8, dtype=np.float32), "floor": np.array(0, np.float32)}
        )
        nodes.append(helper.make_node("Mul", ["fluxes", "scale"], ["scaled"]))
        read = "scaled"
    nodes += [
        helper.make_node("Gather", [read, "one"], ["flux"], axis=1),
        helper.make_node("Gather", [read, "one" if same else "zero"], ["lead"], axis=1),
    ]
    gate = "lead"
    if scaled:
        nodes.append(helper.make_node("Clip", ["lead", "floor", ""], ["gate"]))
        gate = "gate"
    outputs: tuple[str, ...] = ("flux", gate)
    if combine != "none":
        nodes.append(helper.make_node(combine, ["flux", gate], ["y"]))
        outputs = ("y",)
    width = 8 if source == "Relu" else 16
    name = f"columns-{combine}-{source}-{scalar}-{scaled}-{same}.onnx"
    return model(tmp_path, nodes, {"x": [1, width]}, constants, opset=17, outputs=outputs, name=name)


def test_a_product_of_two_gemm_columns_fails_quantized_builds_only(tmp_path: Path) -> None:
    product = gemm_columns(tmp_path)
    report = check_model(product, target="rv1106", quantized=True)
    finding = next(f for f in report.errors() if f.rule == "gemm-column-product")
    assert report.verdict == "fails" and "SIGSEGV" in finding.message and "'y' (Mul)" in finding.where
    assert check_model(product, target="rk3588", quantized=False).verdict == "compiles"
    assert check_model(product, target="rk3566", quantized=False).verdict == "compiles"
    # through the per-column scale and a Clip (as qlknn_7_11), and from a MatMul
    for path in (gemm_columns(tmp_path, scaled=True), gemm_columns(tmp_path, source="MatMul")):
        assert check_model(path, target="rv1106", quantized=True).verdict == "fails"
    # not converted: the columns of a Gemm output minus a constant, so no finding
    shifted = onnx.load(gemm_columns(tmp_path, scaled=True))
    next(node for node in shifted.graph.node if node.output[0] == "scaled").op_type = "Sub"
    onnx.save(shifted, tmp_path / "shifted.onnx")
    assert "gemm-column-product" not in rules(tmp_path / "shifted.onnx", "rv1106", quantized=True)


def test_column_products_that_compiled_or_split_on_rv1106(tmp_path: Path) -> None:
    for path in (
        gemm_columns(tmp_path, source="Relu"),
        gemm_columns(tmp_path, combine="none"),
        gemm_columns(tmp_path, same=True),
    ):
        assert check_model(path, target="rv1106", quantized=True).verdict == "compiles", path.name
    # [1]-shaped indices: failed with the scale and Clip, compiled without, so unknown either way
    for scaled in (False, True):
        report = check_model(
            gemm_columns(tmp_path, scalar=False, scaled=scaled), target="rv1106", quantized=True
        )
        assert report.verdict == "unknown" and not report.errors()


def test_a_sum_of_two_gemm_columns_fails_every_target_with_scalar_indices(tmp_path: Path) -> None:
    summed = gemm_columns(tmp_path, combine="Add")
    for target, quantized in TARGETS:
        report = check_model(summed, target=target, quantized=quantized)
        finding = next(f for f in report.errors() if f.rule == "gemm-column-sum")
        assert report.verdict == "fails" and "fuse_conv_conv_add" in finding.message
    assert verdicts(gemm_columns(tmp_path, combine="Add", source="MatMul")) == {"fails"}
    # [1]-shaped indices and a Relu source compiled (gemm_gather_add_index_1d, relu_gather_add)
    assert verdicts(gemm_columns(tmp_path, combine="Add", scalar=False)) == {"compiles"}
    assert verdicts(gemm_columns(tmp_path, combine="Add", source="Relu")) == {"compiles"}


@pytest.mark.toolkit
def test_toolkit_confirms_the_gemm_column_sum_rule(tmp_path: Path) -> None:
    """The rule with generated probes only: its own model fails, [1]-shaped indices compile."""
    assert not toolkit_compiles(gemm_columns(tmp_path, combine="Add"))
    assert toolkit_compiles(gemm_columns(tmp_path, combine="Add", scalar=False))


@pytest.mark.parametrize(
    ("rule", "model_cited", "family"),
    [
        ("elementwise-const-rank5", "number.onnx", "number"),
        ("yolov8-dfl-split", "Houses300", "houses"),
        ("duplicate-opset-import", "GALAGN128", "galagn"),
        ("gemm-column-product", "qlknn_7_11", "qlknn"),
        ("gemm-column-sum", "qlknn_7_11", "gemm_gather_add"),
    ],
)
def test_each_rule_cites_its_real_model_and_probes(rule: str, model_cited: str, family: str) -> None:
    entry = evidence(rule)
    assert entry.kind == REAL_EXPORT and model_cited in entry.cites and family in entry.cites


def test_a_weightless_gemm_still_reads_its_column_indices(tmp_path: Path) -> None:
    """The check reads large weights without their bytes; the indices are small and read."""
    wide = gemm_columns(tmp_path)
    loaded = onnx.load(wide)
    big = next(t for t in loaded.graph.initializer if t.name == "w")
    big.CopyFrom(numpy_helper.from_array(weights(8, 2048), "w"))
    loaded.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 2048
    onnx.save(loaded, tmp_path / "wide.onnx")
    report = check_model(tmp_path / "wide.onnx", target="rv1106", quantized=True)
    assert "gemm-column-product" in {f.rule for f in report.errors()}


def test_a_cycle_in_an_invalid_file_ends_the_walk() -> None:
    """A file may hold a graph no exporter writes: a Clip reading its own output, a Mul by a
    constant reading its own output. The walks back to the Gemm stop there, with no finding."""
    from baseline.static_check.crash_patterns import gemm_column_product
    from baseline.static_check.graph import graph_facts

    nodes = [
        helper.make_node("Clip", ["looped"], ["looped"]),
        helper.make_node("Mul", ["scaled", "k"], ["scaled"]),
        helper.make_node("Gather", ["scaled", "one"], ["flux"], axis=1),
        helper.make_node("Mul", ["flux", "looped"], ["y"]),
    ]
    initializers = [
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array(2.0, np.float32), "k"),
    ]
    graph = helper.make_graph(nodes, "cycle", [], [helper.make_tensor_value_info("y", 1, None)], initializers)
    looped = helper.make_model(graph)
    assert gemm_column_product(looped.graph, graph_facts(looped, looped), "rv1106", True) == []
