"""A generated model zoo: N small distinct classifiers in one project, and its benchmark.

    python bench/zoo.py make DIR --count 200 [--toolkit]   # a project to try things on
    python bench/zoo.py bench [--sizes 10,100,1000]         # the zoo benchmark (nox -s bench)

Each model is a tiny CNN (Conv, Relu, GlobalAveragePool, Gemm, Softmax) with weights seeded by
its index, so every ONNX file is distinct and the same on every run. Tests import `make_zoo`
and `retrain` with a small N.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 8  # readable by every toolkit's pinned onnx and onnxruntime
REPO = Path(__file__).resolve().parent.parent
PHOTO = REPO / "fixtures" / "images" / "coco" / "000000038829.jpg"
"""The fixture every model is judged on: a real COCO photo (generated noise would be flagged)."""


def classifier(seed: int, perturb: float = 0.0) -> onnx.ModelProto:
    """A 3×16×16 image → 4 classes; `perturb` scales the weights as a retraining would."""
    rng = np.random.default_rng(seed)
    shapes = {"conv.weight": (4, 3, 3, 3), "conv.bias": (4,), "fc.weight": (4, 4), "fc.bias": (4,)}
    weights = {name: rng.standard_normal(shape) * 0.3 for name, shape in shapes.items()}
    if perturb:
        weights = {name: w * (1.0 + perturb * rng.standard_normal(w.shape)) for name, w in weights.items()}
    nodes = [
        helper.make_node("Conv", ["image", "conv.weight", "conv.bias"], ["conv"], name="conv", pads=[1] * 4),
        helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
        helper.make_node("GlobalAveragePool", ["relu"], ["pool"], name="pool"),
        helper.make_node("Flatten", ["pool"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        f"zoo{seed}",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 4])],
        initializer=[numpy_helper.from_array(w.astype(np.float32), n) for n, w in weights.items()],
    )
    return helper.make_model(
        graph,
        producer_name="baseline-zoo",
        producer_version="1",
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
    )


def model_name(index: int) -> str:
    return f"m{index:04d}"


def make_zoo(root: Path, count: int, toolkit: bool = False) -> Path:
    """A project of `count` models at `root` (intent `zoo.toml`, lock `zoo.lock` once locked).

    Without `toolkit` the models run on onnxruntime only (no conversion), which is what a large
    zoo can be locked with in minutes on this machine; with it, fp16 rk3588 on the simulator too.
    """
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'zoo'\n")
    (root / "images").mkdir(exist_ok=True)
    shutil.copyfile(PHOTO, root / "images" / PHOTO.name)
    backends = '["onnxruntime", "rknn-sim"]' if toolkit else '["onnxruntime"]'
    lines = [
        "[defaults]",
        'targets = ["rk3588"]',
        f"backends = {backends}",
        'fixtures = { images = { path = "images/*.jpg", samples = 1 } }',
        "",
    ]
    for index in range(count):
        name = model_name(index)
        onnx.save(classifier(index), root / "models" / f"{name}.onnx")
        lines += ["[[models]]", f'name = "{name}"', f'onnx = "models/{name}.onnx"', ""]
    (root / "zoo.toml").write_text("\n".join(lines))
    return root


def retrain(root: Path, index: int, perturb: float = 0.05) -> None:
    """Change one model's weights, as a retraining would."""
    onnx.save(classifier(index, perturb), root / "models" / f"{model_name(index)}.onnx")


def main() -> None:
    layout = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=layout)
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("make", help="write a zoo project")
    make.add_argument("root", type=Path)
    make.add_argument("--count", type=int, default=200)
    make.add_argument("--toolkit", action="store_true", help="also convert and simulate (rknn-sim)")
    arguments = parser.parse_args()
    if arguments.command == "make":
        make_zoo(arguments.root, arguments.count, arguments.toolkit)
        print(f"{arguments.root}: {arguments.count} models; run `baseline lock --lock zoo.lock` there")


if __name__ == "__main__":
    main()
