"""The nodes real exports compiled, as `check` reads them: `baseline/data/op_support/exports-<toolkit>.json`.

    python bench/export_signatures.py [--toolkit 2.5.0] [--prefix ints_]

For every probe `bench/export_probes.py` or `bench/qdq_probes.py` wrote
(`bench/.corpus/probes/exports/`, those whose name starts with `--prefix`) and
`bench/rule_probes.py exports` converted for real, it reads the label kept for each target and,
where the probe compiled, the signature of each node the toolkit compiles (not those that fold
to constants): its op, the element type of every input and of its first output, and which
inputs are computed. `check` then clears a node of that op and those types, with at most those
inputs computed, on the targets where a probe compiled it (`measured.export_compiled`): a real
export outweighs single-op node tests that crashed or were never built. Only nodes the op
table does not already clear are kept. A failed probe clears nothing; its label is kept in the
file as evidence all the same. Entries of probes of other prefixes are kept as they are.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import onnx

from baseline.static_check.check import analyse
from baseline.static_check.measured import (
    QUANTIZED_TARGETS,
    all_types,
    dtype_name,
    input_pattern,
    measured_compiled,
    node_types,
)
from baseline.static_check.node_signatures import compiled_nodes

sys.path.insert(0, str(Path(__file__).parent))
from agreement import RESULTS, fixed_shapes
from corpora import Item
from rule_probes import PROBES

REPO = Path(__file__).resolve().parent.parent
TARGETS = ("rk3588", "rk3566", "rv1106")
FLOAT = {"float32", "float16", "float64"}


def labels(toolkit: str, target: str) -> dict[str, list[object]]:
    path = RESULTS / f"rule-probes-{toolkit}-{target}.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def node_keys(path: Path, toolkit: str, target: str) -> list[tuple[str, tuple[str, ...], tuple[int, ...]]]:
    """(op, types of every input then of the output, computed inputs) of each compiled node the
    op table alone does not clear on `target`."""
    analysis = analyse(path, fixed_shapes(Item("probe", "probe", path.name, path)))
    facts = analysis.facts
    keys = []
    for node in compiled_nodes(analysis.graph, facts):
        pattern = input_pattern(node, facts.constant)
        dtype = dtype_name(facts.dtypes.get(node.input[0])) if node.input else ""
        if measured_compiled(
            node.op_type, toolkit, target, pattern, dtype, node_types(node, pattern, facts.dtypes)
        ):
            continue
        keys.append((node.op_type, all_types(node, facts.dtypes, facts.values), tuple(sorted(pattern))))
    return keys


def float_output(path: Path) -> bool:
    model = onnx.load(path, load_external_data=False)
    return any(dtype_name(o.type.tensor_type.elem_type) in FLOAT for o in model.graph.output)


def float_input(path: Path) -> bool:
    model = onnx.load(path, load_external_data=False)
    return any(dtype_name(i.type.tensor_type.elem_type) in FLOAT for i in model.graph.input)


Key = tuple[str, tuple[str, ...], tuple[int, ...]]


def kept(out: Path, prefix: str) -> tuple[dict[str, dict[str, str]], dict[Key, dict[str, set[str]]]]:
    """The table's probes and nodes from other prefixes (the torch sweep `ints_`, the
    onnxruntime-quantized `qdq_`), so one prefix is rewritten without the others' files on disk."""
    if not out.is_file():
        return {}, {}
    document = json.loads(out.read_text())
    probes = {name: entry for name, entry in document["probes"].items() if not name.startswith(prefix)}
    nodes: dict[Key, dict[str, set[str]]] = {}
    for entry in document["nodes"]:
        others = {p for p in entry["probes"] if not p.startswith(prefix)}
        # a target stays where one of the kept probes compiled (the probes' labels say which)
        targets = {t for t in entry["targets"] if any(probes[p].get(t) == "compiles" for p in others)}
        integer = {
            t for t in entry.get("integer_output", []) if any(probes[p].get(t) == "compiles" for p in others)
        }
        if others and (targets or integer):
            key = (entry["op"], tuple(entry["types"]), tuple(entry["computed"]))
            nodes[key] = {"targets": targets, "integer_output": integer, "probes": others}
    return probes, nodes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--toolkit", default="2.5.0")
    parser.add_argument("--prefix", default="ints_", help="the probes whose name starts with this")
    args = parser.parse_args()
    by_target = {target: labels(args.toolkit, target) for target in TARGETS}
    out = REPO / "baseline" / "data" / "op_support" / f"exports-{args.toolkit}.json"
    probes, nodes = kept(out, args.prefix)
    for path in sorted((PROBES / "exports").glob(f"{args.prefix}*.onnx")):
        item = Item("probe", "probe", path.name, path)
        key = item.sha256() + ":" + json.dumps(fixed_shapes(item), sort_keys=True)
        outcome = {t: by_target[t][key][:2] for t in TARGETS if key in by_target[t]}
        probes[path.stem] = {t: "compiles" if ok else str(why)[:160] for t, (ok, why) in outcome.items()}
        floats, reads_float = float_output(path), float_input(path)
        for target, (compiled, _) in outcome.items():
            if not compiled:
                continue
            # rv1106 compiles some ops only in a model with a float output (NEEDS_FLOAT_OUTPUT) and
            # aborts on a graph without any float tensor: a probe whose outputs are all integer
            # clears its nodes there only for models that read a float input, as it did
            # (`integer_output`; kelp-o-matic's ArgMax product, r13_mul_argmax_int64_out_op*)
            integer_output = target in QUANTIZED_TARGETS and not floats
            if integer_output and not reads_float:
                continue
            for node in node_keys(path, args.toolkit, target):
                entry = nodes.setdefault(node, {"targets": set(), "integer_output": set(), "probes": set()})
                entry["integer_output" if integer_output else "targets"].add(target)
                entry["probes"].add(path.stem)
    document = {
        "toolkit": args.toolkit,
        "about": (
            "Nodes that compiled inside real exports (torch.onnx.export of small modules, "
            "bench/export_probes.py; onnxruntime-quantized real models, bench/qdq_probes.py), "
            "converted for real (bench/rule_probes.py exports); "
            "written by bench/export_signatures.py. types: every input's element type, then the "
            "first output's; computed: the inputs that were computed, not constant; "
            "integer_output: quantized targets where it compiled in a model whose outputs are all "
            "integer and which reads a float input."
        ),
        "probes": probes,
        "nodes": [
            {
                "op": op,
                "types": list(types),
                "computed": list(computed),
                "targets": sorted(entry["targets"]),
                **({"integer_output": sorted(entry["integer_output"])} if entry["integer_output"] else {}),
                "probes": sorted(entry["probes"]),
            }
            for (op, types, computed), entry in sorted(nodes.items())
        ],
    }
    out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"{out}: {len(probes)} probes, {len(nodes)} node signatures")


if __name__ == "__main__":
    main()
