"""The eleventh round's four false "compiles", cut to their failing subgraphs and probed.

    python bench/eleventh_misses.py --target rk3588 number_cut
    python bench/eleventh_misses.py --target rv1106 qlknn_probe --only qlknn_probe_relu

The eleventh round's one score had four models the checker passed and the toolkit refused
(clashroyalebuildabot's number.onnx, fastGRAHSP's GALAGN128, mustatil's Houses300 YOLO,
fusion-surrogates' QLKNN). Each family here is either a cut of the real model
(`onnx.utils.extract_model` between named tensors) or a generated probe rebuilt with
onnx.helper from the pattern the cut isolated. Every conversion goes through baseline's worker
as `bench/agreement.py` converts (same shapes, same calibration for rv1106) and is appended
to `bench/results/eleventh-misses-<toolkit>-<target>.json` with its outcome and the toolkit's
last error lines, so the report (`bench/results/eleventh-misses.md`) cites runs, not memory.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).parent))
from agreement import ANSI, CONVERT_TIMEOUT, RESULTS, build_request, calibration
from corpora import CORPUS

from baseline.toolchain.client import ToolkitWorker, WorkerFailure
from baseline.toolchain.provision import ensure_toolchain

LOGS = Path(tempfile.gettempdir()) / "eleventh-misses-logs"
CUTS = CORPUS / "eleventh_misses"
NUMBER = CORPUS / "r11_clashroyalebuildabot" / "clashroyalebuildabot__data__number.onnx"
GALAGN = CORPUS / "r11_fastgrahsp" / "fastgrahsp-1.0.3__fastGRAHSP__GALAGN128.onnx"
HOUSES = CORPUS / "r11_mustatil" / "mustatil__Houses300.onnx"
QLKNN = CORPUS / "r11_fusion_surrogates" / "fusion_surrogates__qlknn__models__qlknn_7_11.onnx"
EXPORTS = CORPUS / "probes" / "exports"


class LoggedConverter:
    """One conversion at a time through baseline's worker, keeping the toolkit's log lines."""

    def __init__(self, toolkit: str, target: str) -> None:
        self.toolkit, self.target = toolkit, target
        self.worker: ToolkitWorker | None = None
        self.record = RESULTS / f"eleventh-misses-{toolkit}-{target}.json"
        self.runs: list[dict[str, object]] = (
            json.loads(self.record.read_text()) if self.record.is_file() else []
        )

    def convert(self, name: str, path: Path, shapes: dict[str, list[int]]) -> dict[str, object]:
        if self.worker is None:
            self.worker = ToolkitWorker(ensure_toolchain(self.toolkit))
        workdir = Path(tempfile.mkdtemp(prefix="eleventh-"))
        request = build_request(path, self.target, shapes, workdir)
        request["input_shapes"] = list(shapes.values())
        if request["quantization"] is not None:
            request["dataset"] = str(calibration(path, shapes, workdir))
        start = time.monotonic()
        try:
            response = self.worker.request(request, timeout=CONVERT_TIMEOUT).response
            compiled = bool(response["ok"])
            why = "" if compiled else f"{response['stage']}: {response['error']}".splitlines()[0]
        except WorkerFailure as failure:
            compiled, why = False, f"crash: {failure}"
        run = {
            "name": name,
            "model": str(path.relative_to(CORPUS.parent))
            if path.is_relative_to(CORPUS.parent)
            else str(path),
            "nodes": len(onnx.load(path, load_external_data=False).graph.node),
            "shapes": shapes,
            "compiled": compiled,
            "why": why[:300],
            "last_log_lines": last_lines(workdir / "toolkit.log"),
            "seconds": round(time.monotonic() - start, 1),
        }
        self.runs.append(run)
        self.save()
        LOGS.mkdir(parents=True, exist_ok=True)
        if (workdir / "toolkit.log").is_file():  # kept outside the repository for reading
            shutil.copy(workdir / "toolkit.log", LOGS / f"{name}-{self.target}.log")
        shutil.rmtree(workdir, ignore_errors=True)
        return run

    def save(self) -> None:
        self.record.parent.mkdir(parents=True, exist_ok=True)
        self.record.write_text(json.dumps(self.runs, indent=1) + "\n")

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()


def last_lines(log: Path, count: int = 6) -> list[str]:
    """The toolkit's error and warning lines, last `count` of them (the failing pass names
    itself there: 'E build: ...' and the traceback's last frames)."""
    if not log.is_file():
        return []
    lines = [line.rstrip() for line in ANSI.sub("", log.read_text(errors="replace")).splitlines()]
    return [line[:240] for line in lines if line.strip()][-count:]


Probe = tuple[onnx.ModelProto | Path, dict[str, list[int]]]
"""A model (generated, or a cut saved under CUTS) and the fixed input shapes it converts with."""


def cut(source: Path, name: str, inputs: list[str], outputs: list[str]) -> Path:
    """The real model between named tensors, saved once under CUTS."""
    path = CUTS / f"{name}.onnx"
    if not path.is_file():
        CUTS.mkdir(parents=True, exist_ok=True)
        onnx.utils.extract_model(str(source), str(path), inputs, outputs)
    return path


def model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    initializers: list[onnx.TensorProto],
    opset: int,
    domains: tuple[str, ...] = ("",),
) -> onnx.ModelProto:
    """A generated probe; `domains` lists its opset imports in order, repeats kept (fastGRAHSP's
    onnx.compose merge writes the default domain three times)."""
    graph = helper.make_graph(nodes, "probe", inputs, outputs, initializers)
    imports = [helper.make_opsetid(d, opset if d == "" else 2) for d in domains]
    return helper.make_model(graph, opset_imports=imports, ir_version=7 if opset < 17 else 8)


def floats(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def const(name: str, values: object, dtype: type = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype), name)


# clashroyalebuildabot's number.onnx: a YOLOv5 exported at batch 10 (torch 1.9, opset 13). The build
# stops in fuse_ops, rule `squeeze_nd_mul` (rules/dims.py `_p_squeeze_nd_elementwise_op`), on
# Mul_235: the decoded wh slice [10, 3, 8, 8, 2] times the scalar 2.


def elementwise_5d(
    shape: list[int],
    op: str = "Mul",
    constant: list[int] | None = None,
    sliced: bool = False,
    constant_first: bool = False,
) -> onnx.ModelProto:
    """One Add / Sub / Mul / Div / Pow of a graph input by a constant of shape `constant`
    (a scalar by default); `sliced`: of a Slice of the last axis [2:4], as the YOLOv5 head's wh;
    `constant_first`: the constant is the node's first input (k * x)."""
    nodes, initializers, source, out = [], [const("k", np.full(constant or [], 2.0))], "x", list(shape)
    if sliced:
        initializers += [const(n, v, np.int64) for n, v in (("s", [2]), ("e", [4]), ("a", [len(shape) - 1]))]
        nodes.append(helper.make_node("Slice", ["x", "s", "e", "a"], ["part"]))
        source, out[-1] = "part", 2
    nodes.append(helper.make_node(op, ["k", source] if constant_first else [source, "k"], ["y"]))
    return model(nodes, [floats("x", shape)], [floats("y", out)], initializers, 13)


def elementwise_two_inputs(shape: list[int]) -> onnx.ModelProto:
    nodes = [helper.make_node("Mul", ["x", "z"], ["y"])]
    return model(nodes, [floats("x", shape), floats("z", shape)], [floats("y", shape)], [], 13)


def number() -> dict[str, Probe]:
    head = {"350": [10, 3, 8, 8, 15]}
    probes: dict[str, Probe] = {
        "number_full": (NUMBER, {"images": [10, 3, 64, 64]}),
        # the first scale's decode (Sigmoid .. Reshape), then its wh branch alone
        "number_cut_decode8": (cut(NUMBER, "number_cut_decode8", ["350"], ["391"]), head),
        "number_cut_wh_mul": (cut(NUMBER, "number_cut_wh_mul", ["351"], ["371"]), {"351": head["350"]}),
        "mul5d_sliced_b10": (elementwise_5d([10, 3, 8, 8, 15], sliced=True), {"x": [10, 3, 8, 8, 15]}),
        "mul5d_sliced_b1": (elementwise_5d([1, 3, 8, 8, 15], sliced=True), {"x": [1, 3, 8, 8, 15]}),
        "mul5d_two_inputs_b10": (
            elementwise_two_inputs([10, 3, 8, 8, 2]),
            {"x": [10, 3, 8, 8, 2], "z": [10, 3, 8, 8, 2]},
        ),
    }
    for op in ("Mul", "Add", "Sub", "Div", "Pow"):
        probes[f"{op.lower()}5d_b10"] = (elementwise_5d([10, 3, 8, 8, 2], op), {"x": [10, 3, 8, 8, 2]})
    for constant in ([1], [1, 1, 1, 1, 1], [1, 3, 1, 1, 1], [1, 3, 8, 8, 2]):
        name = "mul5d_b10_const_" + "x".join(map(str, constant))
        probes[name] = (elementwise_5d([10, 3, 8, 8, 2], constant=constant), {"x": [10, 3, 8, 8, 2]})
    # which dims matter: a 1 in the first two dims passes at rank 5, not at rank 6; 4-D passes
    for shape in (
        [1, 3, 8, 8, 2],
        [10, 1, 8, 8, 2],
        [3, 10, 8, 8, 2],
        [2, 2, 2, 2, 2],
        [10, 3, 8, 8, 1],
        [10, 3, 1, 8, 2],
        [10, 3, 8, 2],
        [10, 3, 8, 8, 2, 2],
        [10, 1, 8, 8, 2, 2],
        [1, 3, 8, 8, 2, 2],
        [1, 1, 8, 8, 2, 2],
    ):
        probes["mul_" + "x".join(map(str, shape))] = (elementwise_5d(shape), {"x": shape})
    # rules12: the constant as the first operand (the rule reads either order)
    for op in ("Mul", "Sub"):
        probes[f"{op.lower()}5d_b10_const_first"] = (
            elementwise_5d([10, 3, 8, 8, 2], op, constant_first=True),
            {"x": [10, 3, 8, 8, 2]},
        )
    return probes


# mustatil's Houses300: a YOLOv8 detector exported by Ultralytics 8.4.69 (opset 12, not simplified).
# Every target stops in fuse_ops, rule `seperate_conv_rs_split` (rules/conv.py), on the DFL's
# Conv (16 bins -> 1) -> Reshape [1, 4, 8400] -> the Split the toolkit makes of dist2bbox's two
# Slices. This export's DFL is Transpose [0, 3, 1, 2] -> Softmax(axis 3) -> Transpose [0, 3, 2, 1]
# before the Conv (so is 8.3.235's and 8.3.239's, which compile: their DFL reads a Split of the
# joined box and class maps); the older Ultralytics DFL is Transpose [0, 2, 1, 3] -> Softmax(axis 1).


def _joined_maps(
    grids: tuple[int, ...],
    channels: int,
    joined: str,
    inputs: list[onnx.ValueInfoProto],
    initializers: list[onnx.TensorProto],
    nodes: list[onnx.NodeProto],
) -> None:
    """Each scale's `channels`-channel map reshaped to [1, channels, -1] and the three joined on
    their last axis as `joined`, as Ultralytics exports the head (appended to the three lists)."""
    for i, grid in enumerate(grids):
        inputs.append(floats(f"box{i}", [1, channels, grid, grid]))
        initializers.append(const(f"flat{i}", [1, channels, -1], np.int64))
        nodes.append(helper.make_node("Reshape", [f"box{i}", f"flat{i}"], [f"flat_box{i}"]))
    nodes.append(helper.make_node("Concat", [f"flat_box{i}" for i in range(len(grids))], [joined], axis=2))


def dfl_head(
    source: str = "concat",
    layout: str = "8.4",
    halves: str = "slices",
    opset: int = 12,
    grids: tuple[int, ...] = (80, 40, 20),
    softmax_axis: int = 3,
) -> onnx.ModelProto:
    """The YOLOv8 box branch from the three scales' 64-channel maps to the two distance halves.
    source: `concat` (each map reshaped [1, 64, -1] and joined, as 8.4.69 exports it),
    `split` (65-channel maps reshaped, joined, then split into 64 box and 1 class channels, as
    8.3.235 / 8.3.239 export it), `reshape` (one map reshaped, no Concat), `concat_flat` (three
    flat graph inputs joined), `input` (the joined [1, 64, anchors] a graph input) or `relu` (that
    input through a Relu). layout: `8.4` (Transpose / Softmax(axis 3) / Transpose, as 8.3.2xx and
    8.4.69 export it) or `8.0` (the older Transpose [0, 2, 1, 3] / Softmax(axis 1)). halves:
    `slices` (two Slices [0:2], [2:4] of axis 1), `split` (one Split node) or `none`."""
    anchors = sum(g * g for g in grids)
    nodes: list[onnx.NodeProto] = []
    initializers: list[onnx.TensorProto] = []
    inputs: list[onnx.ValueInfoProto] = []
    if source == "concat":
        _joined_maps(grids, 64, "boxes", inputs, initializers, nodes)
    elif source == "split":  # Ultralytics 8.3.2xx: box and class maps joined, then split apart
        _joined_maps(grids, 65, "joined", inputs, initializers, nodes)
        split = helper.make_node("Split", ["joined"], ["boxes", "classes"], axis=1)
        split.attribute.append(helper.make_attribute("split", [64, 1]))
        nodes += [split, helper.make_node("Sigmoid", ["classes"], ["scores"])]
    elif source == "reshape":  # one map, reshaped as exported, no Concat
        inputs.append(floats("box0", [1, 64, grids[0], grids[0]]))
        initializers.append(const("flat0", [1, 64, -1], np.int64))
        nodes.append(helper.make_node("Reshape", ["box0", "flat0"], ["boxes"]))
    elif source == "concat_flat":  # the same join of three graph inputs already [1, 64, grid * grid]
        for i, grid in enumerate(grids):
            inputs.append(floats(f"flat_box{i}", [1, 64, grid * grid]))
        nodes.append(
            helper.make_node("Concat", [f"flat_box{i}" for i in range(len(grids))], ["boxes"], axis=2)
        )
    elif source == "relu":
        inputs.append(floats("x", [1, 64, anchors]))
        nodes.append(helper.make_node("Relu", ["x"], ["boxes"]))
    else:
        inputs.append(floats("boxes", [1, 64, anchors]))
    initializers += [
        const("bins", [1, 4, 16, anchors], np.int64),
        const("project", np.arange(16, dtype=np.float32).reshape(1, 16, 1, 1)),
        const("sides", [1, 4, anchors], np.int64),
    ]
    nodes.append(helper.make_node("Reshape", ["boxes", "bins"], ["binned"]))
    if layout == "8.4":
        nodes += [
            helper.make_node("Transpose", ["binned"], ["last"], perm=[0, 3, 1, 2]),
            helper.make_node("Softmax", ["last"], ["soft"], axis=softmax_axis),
            helper.make_node("Transpose", ["soft"], ["weights"], perm=[0, 3, 2, 1]),
        ]
    else:
        nodes += [
            helper.make_node("Transpose", ["binned"], ["first"], perm=[0, 2, 1, 3]),
            helper.make_node("Softmax", ["first"], ["weights"], axis=1),
        ]
    nodes += [
        helper.make_node("Conv", ["weights", "project"], ["expected"]),
        helper.make_node("Reshape", ["expected", "sides"], ["distances"]),
    ]
    if halves == "none":
        outputs = [floats("distances", [1, 4, anchors])]
    elif source == "split":
        outputs = [floats("left_top", [1, 2, anchors]), floats("right_bottom", [1, 2, anchors])]
        outputs.append(floats("scores", [1, 1, anchors]))
    else:
        outputs = [floats("left_top", [1, 2, anchors]), floats("right_bottom", [1, 2, anchors])]
    if halves == "slices":
        initializers += [
            const(n, [v], np.int64) for n, v in (("at0", 0), ("at2", 2), ("at4", 4), ("axis1", 1))
        ]
        nodes += [
            helper.make_node("Slice", ["distances", "at0", "at2", "axis1"], ["left_top"]),
            helper.make_node("Slice", ["distances", "at2", "at4", "axis1"], ["right_bottom"]),
        ]
    elif halves == "split":
        halved = helper.make_node("Split", ["distances"], ["left_top", "right_bottom"], axis=1)
        if opset < 13:  # sizes as an attribute; from opset 13 equal halves need none
            halved.attribute.append(helper.make_attribute("split", [2, 2]))
        nodes.append(halved)
    return model(nodes, inputs, outputs, initializers, opset)


def input_shapes(probe: onnx.ModelProto) -> dict[str, list[int]]:
    return {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in probe.graph.input}


def houses() -> dict[str, Probe]:
    maps = [f"/model.22/cv2.{i}/cv2.{i}.2/Conv_output_0" for i in range(3)]
    map_shapes = {name: [1, 64, grid, grid] for name, grid in zip(maps, (80, 40, 20), strict=True)}
    joined = {"/model.22/Concat_output_0": [1, 64, 8400]}
    halves = ["/model.22/Slice_output_0", "/model.22/Slice_1_output_0"]
    probes: dict[str, Probe] = {
        "houses_full": (HOUSES, {"images": [1, 3, 640, 640]}),
        "houses_cut_head": (
            cut(
                HOUSES,
                "houses_cut_head",
                [f"/model.{i}/cv2/act/Mul_output_0" for i in (15, 18, 21)],
                ["output0"],
            ),
            {
                "/model.15/cv2/act/Mul_output_0": [1, 128, 80, 80],
                "/model.18/cv2/act/Mul_output_0": [1, 256, 40, 40],
                "/model.21/cv2/act/Mul_output_0": [1, 512, 20, 20],
            },
        ),
        "houses_cut_maps_to_box": (
            cut(HOUSES, "houses_cut_maps_to_box", maps, ["/model.22/Mul_2_output_0"]),
            map_shapes,
        ),
        "houses_cut_maps_to_halves": (cut(HOUSES, "houses_cut_maps_to_halves", maps, halves), map_shapes),
        "houses_cut_maps_to_first_half": (
            cut(HOUSES, "houses_cut_maps_to_first_half", maps, halves[:1]),
            map_shapes,
        ),
        "houses_cut_maps_to_dfl": (
            cut(HOUSES, "houses_cut_maps_to_dfl", maps, ["/model.22/dfl/Reshape_1_output_0"]),
            map_shapes,
        ),
        "houses_cut_joined_to_box": (
            cut(HOUSES, "houses_cut_joined_to_box", list(joined), ["/model.22/Mul_2_output_0"]),
            joined,
        ),
        "houses_cut_joined_to_halves": (
            cut(HOUSES, "houses_cut_joined_to_halves", list(joined), halves),
            joined,
        ),
    }
    variants = {
        "dfl84_concat_slices": {},
        "dfl84_concat_split": {"halves": "split"},
        "dfl84_concat_slices_op17": {"opset": 17},
        "dfl84_concat_split_op17": {"halves": "split", "opset": 17},
        "dfl84_concat2_slices": {"grids": (40, 20)},
        "dfl84_concat_none": {"halves": "none"},
        "dfl84_input_slices": {"source": "input"},
        "dfl84_concat_flat_slices": {"source": "concat_flat"},
        "dfl84_reshape_slices": {"source": "reshape", "grids": (80,)},
        "dfl84_split_slices": {"source": "split"},
        "dfl84_relu_slices": {"source": "relu"},
        "dfl80_concat_slices": {"layout": "8.0"},
        "dfl80_concat_split": {"layout": "8.0", "halves": "split"},
        # rules12: the last axis written -1 (the rule reads 3 and -1 alike)
        "dfl84_concat_slices_op17_axis_last": {"opset": 17, "softmax_axis": -1},
    }
    for name, options in variants.items():
        probe = dfl_head(**options)  # type: ignore[arg-type]
        probes[name] = (probe, input_shapes(probe))
    return probes


# fastGRAHSP's GALAGN128: two Keras MLPs merged with onnx.compose (opset 10), whose opset_import
# names the default domain three times (and ai.onnx.ml twice). rk3588 / rk3566 SIGSEGV, rv1106
# "Should didnot run into this for 'agn_norm_raw_2sl_2sp_invalid0'" (the native IR builder:
# "unsupported elemtype: 0" for that tensor): the toolkit turns two single-column Gathers of X into
# Slices, then one Split ("2sl_2sp") whose unused pieces get no element type. With one default
# import the same graph compiles on every target.


def columns(
    indices: tuple[int, ...] = (19, 20),
    op: str = "Gather",
    opset: int = 10,
    domains: tuple[str, ...] = ("", ""),
    scalar_index: bool = False,
) -> onnx.ModelProto:
    """Single columns of X [1, 23] (axis 1, each index a [1] tensor, or a scalar), each a graph
    output."""
    nodes, initializers, outputs = [], [], []
    for k, index in enumerate(indices):
        if op == "Split":  # one explicit Split of X into [0:19], [19:20], ... (opset < 13 form)
            break
        if op == "Gather":
            initializers.append(const(f"index{k}", index if scalar_index else [index], np.int64))
            nodes.append(helper.make_node("Gather", ["X", f"index{k}"], [f"column{k}"], axis=1))
        else:
            initializers += [
                const(f"{n}{k}", [v], np.int64)
                for n, v in (("start", index), ("end", index + 1), ("axis", 1))
            ]
            nodes.append(helper.make_node("Slice", ["X", f"start{k}", f"end{k}", f"axis{k}"], [f"column{k}"]))
        outputs.append(floats(f"column{k}", [1] if scalar_index and op == "Gather" else [1, 1]))
    if op == "Split":
        sizes = [index - start for start, index in zip((0, *indices), (*indices, 23), strict=True)]
        names = [f"part{k}" for k in range(len(sizes))]
        if opset < 13:
            nodes.append(helper.make_node("Split", ["X"], names, axis=1, split=sizes))
        else:  # opset 13 moved the sizes to a second input
            initializers.append(const("sizes", sizes, np.int64))
            nodes.append(helper.make_node("Split", ["X", "sizes"], names, axis=1))
        outputs = [floats(name, [1, size]) for name, size in zip(names, sizes, strict=True)]
    return model(nodes, [floats("X", [1, 23])], outputs, initializers, opset, domains)


def one_default_import(source: Path) -> onnx.ModelProto:
    """The model with its opset_import cut to one entry per domain (the first of each)."""
    loaded = onnx.load(source)
    seen: dict[str, onnx.OperatorSetIdProto] = {}
    for entry in loaded.opset_import:
        seen.setdefault(entry.domain, entry)
    kept = list(seen.values())
    del loaded.opset_import[:]
    loaded.opset_import.extend(kept)
    return loaded


def galagn() -> dict[str, Probe]:
    x = {"X": [1, 23]}
    probes: dict[str, Probe] = {
        "galagn_full": (GALAGN, x),
        "galagn_one_default_import": (one_default_import(GALAGN), x),
        "galagn_cut_two_columns": (
            cut(GALAGN, "galagn_cut_two_columns", ["X"], ["gal_norm_raw", "agn_norm_raw"]),
            x,
        ),
        "galagn_cut_two_norms": (cut(GALAGN, "galagn_cut_two_norms", ["X"], ["gal_norm", "agn_norm"]), x),
        "galagn_cut_agn_column": (cut(GALAGN, "galagn_cut_agn_column", ["X"], ["agn_norm_raw"]), x),
        "galagn_cut_agn_branch": (
            cut(GALAGN, "galagn_cut_agn_branch", ["X"], ["AGN_outputs_linear_scaled"]),
            x,
        ),
        "galagn_cut_gal_branch": (
            cut(GALAGN, "galagn_cut_gal_branch", ["X"], ["GAL_outputs_linear_scaled"]),
            x,
        ),
    }
    variants: dict[str, dict[str, object]] = {
        "columns_19_20_one_import": {"domains": ("",)},
        "columns_19_20_ml_import": {"domains": ("", "ai.onnx.ml")},
        "columns_19_20_two_imports": {},
        "columns_19_20_three_imports": {"domains": ("", "", "")},
        "columns_19_20_as_merged": {"domains": ("", "", "ai.onnx.ml", "", "ai.onnx.ml")},
        "columns_0_10_two_imports": {"indices": (0, 10)},
        "columns_19_two_imports": {"indices": (19,)},
        "columns_19_20_slices_two_imports": {"op": "Slice"},
        "columns_split_19_20_two_imports": {"op": "Split"},
        "columns_split_19_20_one_import": {"op": "Split", "domains": ("",)},
        "columns_split_19_20_two_imports_op13": {"op": "Split", "opset": 13},
        "columns_19_20_two_imports_op11": {"opset": 11},
        "columns_19_20_two_imports_op12": {"opset": 12},
        "columns_19_20_two_imports_op13": {"opset": 13},
        # rules12: scalar indices (GALAGN's are [1]-shaped; the rule reads both)
        "columns_19_20_scalar_two_imports": {"scalar_index": True},
        "columns_19_20_scalar_one_import": {"scalar_index": True, "domains": ("",)},
    }
    for name, options in variants.items():
        probes[name] = (columns(**options), x)  # type: ignore[arg-type]
    return probes


# fusion-surrogates' QLKNN 7-11: a PyTorch MLP (opset 17; Gemm + Tanh x5, Gemm to 8 values) whose
# head reads single columns of the last layer with scalar Gathers and multiplies them (a flux
# times a clipped leading flux). rv1106 (w8a8) SIGSEGVs after "auto set mini_rknn=True", in the
# native compiler; the fp16 targets compile.


def gathered_product(
    first: str = "Gemm",
    width: int = 133,
    combine: str = "Mul",
    affine: bool = False,
    clip: bool = False,
    scalar_index: bool = True,
) -> onnx.ModelProto:
    """x [1, width] -> Gemm / MatMul to 8 values (or a Relu of x [1, 8]) -> [Mul, Add by
    per-column constants] -> Gather columns 1 and 0 (axis 1) -> [Clip(min 0) of column 0] ->
    `combine` (Mul / Add) of the two, or both columns as outputs (`none`)."""
    rng = np.random.default_rng(0)
    initializers = []
    if first == "Gemm":
        initializers += [const("w", rng.normal(0, 0.1, (8, width))), const("b", np.zeros(8))]
        nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["fluxes"], transB=1)]
    elif first == "MatMul":
        initializers.append(const("w", rng.normal(0, 0.1, (width, 8))))
        nodes = [helper.make_node("MatMul", ["x", "w"], ["fluxes"])]
    else:
        width = 8
        nodes = [helper.make_node("Relu", ["x"], ["fluxes"])]
    source = "fluxes"
    if affine:
        initializers += [const("scale", np.linspace(0.1, 40, 8)), const("shift", np.linspace(0, 10, 8))]
        nodes += [
            helper.make_node("Mul", ["fluxes", "scale"], ["scaled"]),
            helper.make_node("Add", ["scaled", "shift"], ["shifted"]),
        ]
        source = "shifted"
    index_shape = [] if scalar_index else [1]
    initializers += [
        const("one", np.array(1).reshape(index_shape), np.int64),
        const("zero", np.array(0).reshape(index_shape), np.int64),
    ]
    nodes += [
        helper.make_node("Gather", [source, "one"], ["flux"], axis=1),
        helper.make_node("Gather", [source, "zero"], ["lead"], axis=1),
    ]
    gate = "lead"
    if clip:
        initializers.append(const("floor", 0.0))
        nodes.append(helper.make_node("Clip", ["lead", "floor", ""], ["gate"]))
        gate = "gate"
    column = [1] if scalar_index else [1, 1]
    if combine == "none":
        outputs = [floats("flux", column), floats(gate, column)]
    else:
        nodes.append(helper.make_node(combine, ["flux", gate], ["y"]))
        outputs = [floats("y", column)]
    return model(nodes, [floats("x", [1, width])], outputs, initializers, 17)


def gathered_one(squared: bool) -> onnx.ModelProto:
    """Gemm to 8 values, one column Gathered and multiplied by itself or by the constant 2."""
    rng = np.random.default_rng(0)
    initializers = [
        const("w", rng.normal(0, 0.1, (8, 16))),
        const("b", np.zeros(8)),
        const("one", 1, np.int64),
        const("two", 2.0),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "w", "b"], ["fluxes"], transB=1),
        helper.make_node("Gather", ["fluxes", "one"], ["flux"], axis=1),
        helper.make_node("Mul", ["flux", "flux" if squared else "two"], ["y"]),
    ]
    return model(nodes, [floats("x", [1, 16])], [floats("y", [1])], initializers, 17)


def qlknn() -> dict[str, Probe]:
    x = {"input": [1, 10]}
    last_layer = {"/_network/model/9/Tanh_output_0": [1, 133]}
    outputs = ["efeITG", "efiITG", "pfeITG", "efeTEM", "efiTEM", "pfeTEM", "efeETG", "gamma_max"]
    probes: dict[str, Probe] = {
        "qlknn_full": (QLKNN, x),
        "qlknn_cut_mlp": (cut(QLKNN, "qlknn_cut_mlp", ["input"], ["/Add_output_0"]), x),
        "qlknn_cut_head_from_gemm": (
            cut(QLKNN, "qlknn_cut_head_from_gemm", ["/_network/model/10/Gemm_output_0"], outputs),
            {"/_network/model/10/Gemm_output_0": [1, 8]},
        ),
        "qlknn_cut_efeITG": (cut(QLKNN, "qlknn_cut_efeITG", ["input"], ["efeITG"]), x),
        "qlknn_cut_efeTEM": (cut(QLKNN, "qlknn_cut_efeTEM", ["input"], ["efeTEM"]), x),
        "qlknn_cut_gamma_max": (cut(QLKNN, "qlknn_cut_gamma_max", ["input"], ["gamma_max"]), x),
        "qlknn_cut_tanh9_efeITG": (
            cut(QLKNN, "qlknn_cut_tanh9_efeITG", list(last_layer), ["efeITG"]),
            last_layer,
        ),
        "qlknn_cut_gemm10_efeITG": (
            cut(QLKNN, "qlknn_cut_gemm10_efeITG", ["/_network/model/10/Gemm_output_0"], ["efeITG"]),
            {"/_network/model/10/Gemm_output_0": [1, 8]},
        ),
    }
    variants: dict[str, dict[str, object]] = {
        "gemm_gather_mul_as_qlknn": {"affine": True, "clip": True},
        "gemm_gather_mul": {},
        "gemm_gather_mul_w16": {"width": 16},
        "gemm_gather_mul_index_1d": {"scalar_index": False},
        "gemm_gather_add": {"combine": "Add"},
        "gemm_gather_two_outputs": {"combine": "none"},
        "matmul_gather_mul": {"first": "MatMul"},
        "relu_gather_mul": {"first": "Relu"},
        "gemm_gather_mul_as_qlknn_index_1d": {"affine": True, "clip": True, "scalar_index": False},
        "gemm_gather_add_index_1d": {"combine": "Add", "scalar_index": False},
        "relu_gather_add": {"first": "Relu", "combine": "Add"},
        "matmul_gather_add": {"first": "MatMul", "combine": "Add"},
    }
    for name, options in variants.items():
        probe = gathered_product(**options)  # type: ignore[arg-type]
        probes[name] = (probe, input_shapes(probe))
    probes["gemm_gather_squared"] = (gathered_one(True), {"x": [1, 16]})
    probes["gemm_gather_times_two"] = (gathered_one(False), {"x": [1, 16]})
    # torch.onnx.export of nn.Linear -> y[:, 1] + y[:, 0] (or *): the same pattern as an exporter
    # writes it, indices as Constant nodes (made by bench/export_probes.py torch_gemm_column_*)
    for combine in ("sum", "product"):
        for opset in (13, 17):
            name = f"torch_gemm_column_{combine}_op{opset}"
            probes[name] = (EXPORTS / f"{name}.onnx", {"x": [1, 16]})
    return probes


FAMILIES: dict[str, Callable[[], dict[str, Probe]]] = {
    "number": number,
    "houses": houses,
    "galagn": galagn,
    "qlknn": qlknn,
}


def short(run: dict[str, object]) -> str:
    """A run's outcome in a table cell."""
    if run["compiled"]:
        return "compiles"
    why = str(run["why"])
    for long, brief in (
        ("crash: the toolkit process was killed by ", ""),
        (" (a native compiler crash or out of memory)", ""),
        ("build: ", ""),
        ("'IRGraph' object has no attribute ", ""),
    ):
        why = why.replace(long, brief)
    return why.split(" for '")[0][:60]


def table(toolkit: str, family: str) -> str:
    """A markdown table of one family's recorded outcomes, a column per target."""
    targets = ("rk3588", "rk3566", "rv1106")
    runs: dict[str, dict[str, str]] = {}
    for target in targets:
        record = RESULTS / f"eleventh-misses-{toolkit}-{target}.json"
        for run in json.loads(record.read_text()) if record.is_file() else []:
            runs.setdefault(str(run["name"]), {})[target] = short(run)
    lines = ["| probe | " + " | ".join(targets) + " |", "|---" * (len(targets) + 1) + "|"]
    for name in FAMILIES[family]():
        cells = [runs.get(name, {}).get(target, "not run") for target in targets]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


ELEMENTWISE = {"Add", "Sub", "Mul", "Div"}


def static_shapes(loaded: onnx.ModelProto, shapes: dict[str, list[int]]) -> dict[str, list[int]]:
    """Every tensor's dims where shape inference, from the labelled input shapes, fixes them all."""
    for value in loaded.graph.input:
        if value.name in shapes:
            for dim, size in zip(value.type.tensor_type.shape.dim, shapes[value.name], strict=False):
                dim.Clear()
                dim.dim_value = size
    try:
        inferred = onnx.shape_inference.infer_shapes(loaded, strict_mode=False)
    except Exception:  # an untrusted model may break inference; then no shapes
        return {}
    found = {}
    for value in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]:
        tensor = value.type.tensor_type
        if tensor.HasField("shape") and all(d.HasField("dim_value") for d in tensor.shape.dim):
            found[value.name] = [d.dim_value for d in tensor.shape.dim]
    return found


def patterns(loaded: onnx.ModelProto, shapes: dict[str, list[int]]) -> list[str]:
    """Which of the four patterns a model has (their static parts, as the probes separate them)."""
    graph = loaded.graph
    producer = {out: node for node in graph.node for out in node.output}
    constants = {i.name for i in graph.initializer} | {
        out for node in graph.node if node.op_type == "Constant" for out in node.output
    }
    found = []
    dims = static_shapes(loaded, shapes)
    for node in graph.node:
        if node.op_type in ELEMENTWISE and len(node.input) == 2:
            for data, other in (node.input, reversed(node.input)):
                shape = dims.get(data, [])
                constant_operand = other in constants and data not in constants
                if constant_operand and (len(shape) >= 6 or (len(shape) == 5 and 1 not in shape[:2])):
                    found.append("elementwise-const-rank5")
    defaults = [entry.version for entry in loaded.opset_import if entry.domain in ("", "ai.onnx")]
    if len(defaults) > 1:
        found.append(f"duplicate-opset-import (opset {min(defaults)})")

    def perm(node: onnx.NodeProto) -> list[int]:
        return next((list(a.ints) for a in node.attribute if a.name == "perm"), [])

    for node in graph.node:
        if node.op_type == "Transpose" and perm(node) == [0, 3, 2, 1]:
            softmax = producer.get(node.input[0])
            first = producer.get(softmax.input[0]) if softmax is not None else None
            is_softmax = softmax is not None and softmax.op_type == "Softmax"
            if (
                is_softmax
                and first is not None
                and first.op_type == "Transpose"
                and perm(first) == [0, 3, 1, 2]
            ):
                binned = producer.get(first.input[0])
                source = producer.get(binned.input[0]) if binned is not None else None
                found.append(f"dfl-two-transposes (reads {source.op_type if source else 'an input'})")

    def fully_connected(tensor: str) -> str | None:
        """The Gemm / MatMul output a tensor is, through Clip and elementwise ops by constants."""
        while tensor in producer and producer[tensor].op_type in (*ELEMENTWISE, "Clip"):
            node = producer[tensor]
            if node.op_type != "Clip" and not all(i in constants for i in node.input[1:]):
                return None
            tensor = node.input[0]
        return tensor if tensor in producer and producer[tensor].op_type in ("Gemm", "MatMul") else None

    def column(tensor: str) -> tuple[str | None, str] | None:
        while tensor in producer and producer[tensor].op_type == "Clip":
            tensor = producer[tensor].input[0]
        node = producer.get(tensor)
        if node is None or node.op_type != "Gather" or node.input[1] not in constants:
            return None
        return fully_connected(node.input[0]), node.input[1]

    for node in graph.node:
        if node.op_type in ("Mul", "Add") and len(node.input) == 2:
            left, right = column(node.input[0]), column(node.input[1])
            if left and right and left[0] and left[0] == right[0] and left[1] != right[1]:
                found.append(f"gemm-column-{'product' if node.op_type == 'Mul' else 'sum'}")
    return sorted(set(found))


def scan(toolkit: str) -> None:
    """The four patterns across every labelled corpus file on this machine, with its labels: does
    any model that compiles have one (a rule built on it would be wrong there)?"""
    labels: dict[str, dict[str, object]] = {}
    for target in ("rk3588", "rk3566", "rv1106"):
        record = RESULTS / f"labels-{toolkit}-{target}.json"
        for key, (compiled, why, *_) in json.loads(record.read_text()).items():
            sha, shapes = key.split(":", 1)
            labels.setdefault(sha, {"shapes": json.loads(shapes)})[target] = (
                "compiles" if compiled else why[:60]
            )
    scanned = 0
    for path in sorted(CORPUS.rglob("*.onnx")):
        if CUTS in path.parents or CORPUS / "probes" in path.parents:
            continue
        data = path.read_bytes()
        label = labels.get(hashlib.sha256(data).hexdigest())
        if label is None:
            continue
        try:
            loaded = onnx.load_from_string(data)
        except Exception:  # a file the loader refuses has no patterns to report
            continue
        scanned += 1
        found = patterns(loaded, label["shapes"])  # type: ignore[arg-type]
        if found:
            outcomes = {target: outcome for target, outcome in label.items() if target != "shapes"}
            print(f"{path.relative_to(CORPUS)}: {', '.join(found)}; {json.dumps(outcomes)}")
    print(f"{scanned} labelled corpus files scanned")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--toolkit", default="2.5.0")
    parser.add_argument("--target", default="rk3588")
    parser.add_argument("families", nargs="*", help=f"any of {', '.join(FAMILIES)}")
    parser.add_argument("--only", default="", help="only probes whose name starts with this")
    parser.add_argument("--table", action="store_true", help="print the recorded outcomes, convert nothing")
    parser.add_argument("--scan", action="store_true", help="find the patterns in the labelled corpus")
    args = parser.parse_args()
    unknown = [family for family in args.families if family not in FAMILIES]
    if unknown or not (args.families or args.scan):
        parser.error(f"families: {', '.join(unknown) or 'none given'} (choose from {', '.join(FAMILIES)})")
    if args.scan:
        scan(args.toolkit)
        return
    if args.table:
        print("\n\n".join(table(args.toolkit, family) for family in args.families))
        return
    converter = LoggedConverter(args.toolkit, args.target)
    CUTS.mkdir(parents=True, exist_ok=True)
    try:
        for family in args.families:
            for name, (probe, shapes) in FAMILIES[family]().items():
                if not name.startswith(args.only):
                    continue
                if isinstance(probe, onnx.ModelProto):
                    onnx.checker.check_model(probe, full_check=True)
                    path = CUTS / f"{name}.onnx"
                    onnx.save(probe, path)
                else:
                    path = probe
                run = converter.convert(name, path, shapes)
                outcome = "compiles" if run["compiled"] else f"fails {str(run['why'])[:150]}"
                print(f"{family} {name}: {outcome}", flush=True)
    finally:
        converter.close()


if __name__ == "__main__":
    main()
