"""The zoo's conversion recipes, as small ONNX models and as plain toolkit scripts.

Each `examples/*/python/convert.py` of `airockchip/rknn_model_zoo` is `config(...)`,
`load_onnx(...)`, `build(...)`, `export_rknn(...)`. `zoo_convert` runs exactly that in the
toolkit environment, with no baseline code in the way, so a test can compare the `.rknn`
baseline builds with the one the zoo's script would build.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from baseline.toolchain.provision import Toolchain

REPO = Path(__file__).resolve().parents[2]
COCO = REPO / "fixtures" / "images" / "coco"

ZOO_SCRIPT = """\
import json, sys
from rknn.api import RKNN
args = json.loads(sys.argv[1])
rknn = RKNN(verbose=False)
rknn.config(target_platform=args["platform"], **args["config"])
assert rknn.load_onnx(model=args["model"], **args["load"]) == 0, "load_onnx failed"
ret = rknn.build(do_quantization=args["quant"], dataset=args["dataset"], **args["build"])
assert ret == 0, "build failed"
assert rknn.export_rknn(args["out"]) == 0, "export failed"
"""


def zoo_convert(
    toolchain: Toolchain,
    model: Path,
    out: Path,
    *,
    config: dict[str, Any],
    load: dict[str, Any] | None = None,
    build: dict[str, Any] | None = None,
    dataset: Path | None = None,
    platform: str = "rk3588",
) -> Path:
    """What a zoo `convert.py` does, run in the toolkit environment; returns the `.rknn`."""
    args = {
        "platform": platform,
        "config": config,
        "model": str(model),
        "load": load or {},
        "build": build or {},
        "quant": dataset is not None,
        "dataset": str(dataset) if dataset is not None else None,
        "out": str(out),
    }
    workdir = out.parent / f"{out.stem}-zoo"
    workdir.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [str(toolchain.python), "-c", ZOO_SCRIPT, json.dumps(args)],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return out


def zoo_dataset(folder: Path, count: int = 20) -> Path:
    """The zoo's calibration list: `./subset/<image>.jpg` lines in a `coco_subset_20.txt`."""
    subset = folder / "subset"
    subset.mkdir(parents=True, exist_ok=True)
    names = sorted(p.name for p in COCO.glob("*.jpg"))[:count]
    for name in names:
        shutil.copyfile(COCO / name, subset / name)
    dataset = folder / "coco_subset_20.txt"
    dataset.write_text("".join(f"./subset/{name}\n" for name in names))
    return dataset


def _weight(name: str, shape: tuple[int, ...], seed: int, scale: float = 0.2) -> onnx.TensorProto:
    values = np.random.default_rng(seed).normal(0, scale, size=shape).astype(np.float32)
    return numpy_helper.from_array(values, name)


def _save(
    path: Path,
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    weights: list[onnx.TensorProto],
) -> Path:
    graph = helper.make_graph(nodes, path.stem, inputs, outputs, initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _conv(
    name: str, x: str, cin: int, cout: int, seed: int, stride: int = 1
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    weights = [_weight(f"{name}.w", (cout, cin, 3, 3), seed), _weight(f"{name}.b", (cout,), seed + 1)]
    node = helper.make_node(
        "Conv",
        [x, f"{name}.w", f"{name}.b"],
        [name],
        kernel_shape=[3, 3],
        pads=[1, 1, 1, 1],
        strides=[stride] * 2,
    )
    return [node], weights


def _silu(x: str) -> list[onnx.NodeProto]:
    return [
        helper.make_node("Sigmoid", [x], [f"{x}.sig"]),
        helper.make_node("Mul", [x, f"{x}.sig"], [f"{x}.act"]),
    ]


def yolo_like(path: Path, size: int = 64, heads: int = 6) -> Path:
    """YOLOv8's conventions: `images` [1, 3, S, S] in [0, 1], SiLU convs, one [1, 4+classes, N] output."""
    nodes, weights = _conv("c1", "images", 3, 8, 1, stride=2)
    nodes += _silu("c1")
    more, more_w = _conv("c2", "c1.act", 8, 16, 3, stride=2)
    nodes += more + _silu("c2")
    head, head_w = _conv("head", "c2.act", 16, heads, 5)
    cells = (size // 4) ** 2
    shape = numpy_helper.from_array(np.array([1, heads, cells], dtype=np.int64), "flat")
    nodes += [*head, helper.make_node("Reshape", ["head", "flat"], ["output0"])]
    return _save(
        path,
        nodes,
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, heads, cells])],
        weights + more_w + head_w + [shape],
    )


def text_map_like(path: Path, size: int = 64) -> Path:
    """PP-OCR det's conventions: `x` [1, 3, H, W] ImageNet-normalised, a [1, 1, H, W] sigmoid map."""
    nodes, weights = _conv("c1", "x", 3, 8, 11, stride=2)
    nodes += [helper.make_node("Relu", ["c1"], ["c1.relu"])]
    up_w = _weight("up.w", (8, 1, 2, 2), 13)
    nodes += [
        helper.make_node("ConvTranspose", ["c1.relu", "up.w"], ["up"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Sigmoid", ["up"], ["sigmoid_0.tmp_0"]),
    ]
    return _save(
        path,
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("sigmoid_0.tmp_0", TensorProto.FLOAT, [1, 1, size, size])],
        [*weights, up_w],
    )


def face_like(path: Path, size: int = 64) -> Path:
    """RetinaFace's conventions: BGR pixels minus (104, 117, 123), three heads (loc, conf, landmarks)."""
    nodes, weights = _conv("c1", "input", 3, 8, 21, stride=2)
    nodes += [helper.make_node("Relu", ["c1"], ["c1.relu"])]
    outputs = []
    for index, (name, channels) in enumerate((("loc", 4), ("conf", 2), ("landmarks", 10))):
        head, head_w = _conv(f"{name}.conv", "c1.relu", 8, channels, 30 + index)
        nodes += [*head, helper.make_node("Identity", [f"{name}.conv"], [name])]
        weights += head_w
        outputs.append(
            helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, channels, size // 2, size // 2])
        )
    return _save(
        path,
        nodes,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        outputs,
        weights,
    )


def segmenter_like(path: Path) -> Path:
    """DeepLabV3's conventions: a symbolic-size input, logits, then an ArgMax the zoo cuts off."""
    nodes, weights = _conv("c1", "input", 3, 8, 41)
    nodes += [helper.make_node("Relu", ["c1"], ["c1.relu"])]
    head, head_w = _conv("logits", "c1.relu", 8, 5, 43)
    nodes += [*head, helper.make_node("ArgMax", ["logits"], ["labels"], axis=1, keepdims=1)]
    return _save(
        path,
        nodes,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("labels", TensorProto.INT64, ["N", 1, "H", "W"])],
        weights + head_w,
    )


def text_encoder_like(path: Path, vocab: int = 64, width: int = 16) -> Path:
    """CLIP text's conventions: int64 `input_ids` [batch, sequence] (symbolic), an embedding lookup."""
    table = _weight("embedding", (vocab, width), 51, scale=1.0)
    project = _weight("project", (width, width), 52)
    nodes = [
        helper.make_node("Gather", ["embedding", "input_ids"], ["embedded"]),
        helper.make_node("MatMul", ["embedded", "project"], ["projected"]),
        helper.make_node("Tanh", ["projected"], ["text_embeds"]),
    ]
    return _save(
        path,
        nodes,
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("text_embeds", TensorProto.FLOAT, ["batch", "sequence", width])],
        [table, project],
    )
