"""Aggregating the builds per op and target, and writing the table as stable, diffable JSON."""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from op_support.cases import collect_node_tests, generated_models
from op_support.common import (
    COMPILES,
    CRASHES,
    EXAMPLES,
    FAILS,
    FOLDED,
    NOT_APPLICABLE,
    OPSET_TOO_NEW,
    Build,
    Prepared,
)
from op_support.prepare import dynamic_positions, value_types


def op_entry(items: list[Prepared], results: dict[str, list[Build]]) -> dict[str, Any]:
    """One op on one target: counts of verdicts, status, example errors, rules and warnings."""
    builds = [results[p.case.name] for p in items if p.skipped is None]
    built = [b[0] for b in builds]
    failures = [b for b in built if b.outcome in (FAILS, CRASHES)]
    entry: dict[str, Any] = {
        "tests": len(items),
        "built": len(built),
        "compiled": sum(b.outcome == COMPILES for b in built),
        "compiled_with_constant_inputs": sum(b.outcome == COMPILES and b.constant_inputs for b in built),
        "failed": sum(b.outcome == FAILS for b in built),
        "crashed": sum(b.outcome == CRASHES for b in built),
        "crashes_seen": sum(any(b.outcome == CRASHES for b in model) for model in builds),
        "folded": sum(b.outcome == FOLDED for b in built),
        "not_applicable": sum(p.skipped == NOT_APPLICABLE for p in items),
        "opset_too_new": sum(p.skipped == OPSET_TOO_NEW for p in items),
        "errors": list(dict.fromkeys(b.error for b in failures))[:EXAMPLES],
        "error_rules": sorted({b.rule for b in failures}),
        "warnings": sorted({w for b in built for w in b.warnings}),
    }
    entry["status"] = status(entry)
    float32 = [results[p.case.name][0] for p in items if p.skipped is None and p.dtype == "float32"]
    entry["float32_built"] = len(float32)
    entry["float32_compiled"] = sum(b.outcome == COMPILES for b in float32)
    entry["float32_status"] = verdict(
        entry["float32_compiled"], sum(b.outcome in (FAILS, CRASHES) for b in float32)
    )
    return entry


def verdict(compiled: int, failed: int) -> str:
    """supported (all compiled) / partial (some) / unsupported (none) / untested (no builds)."""
    if not compiled + failed:
        return "untested"
    return "supported" if not failed else "partial" if compiled else "unsupported"


def status(entry: dict[str, Any]) -> str:
    """supported / partial / unsupported over the decisive builds (folded ones decide nothing)."""
    if entry["compiled"] + entry["failed"] + entry["crashed"]:
        return verdict(entry["compiled"], entry["failed"] + entry["crashed"])
    if entry["folded"]:
        return FOLDED
    skipped = {k for k in ("not_applicable", "opset_too_new") if entry[k]}
    return skipped.pop().replace("_", "-") if len(skipped) == 1 else "untested"


def aggregate(
    prepared: list[Prepared], results: dict[str, dict[str, list[Build]]], targets: list[str]
) -> dict[str, dict[str, Any]]:
    by_op: dict[str, list[Prepared]] = defaultdict(list)
    for item in prepared:
        by_op[item.case.op].append(item)
    return {op: {t: op_entry(items, results[t]) for t in targets} for op, items in sorted(by_op.items())}


def model_records(
    prepared: list[Prepared], results: dict[str, dict[str, list[Build]]], targets: list[str]
) -> dict[str, Any]:
    records = {}
    for item in prepared:
        record: dict[str, Any] = {
            "dtype": item.dtype,
            "dynamic": dynamic_positions(item.case.model),
            **value_types(item.case.model),
            "op": item.case.op,
            "opset": item.opset,
            "source": item.case.source,
        }
        if item.case.domain:
            record["domain"] = item.case.domain
        if item.normalized:
            record["normalized"] = item.normalized
        if item.skipped:
            record["skipped"] = [item.skipped, item.reason]
        else:
            record["results"] = {t: [b.compact() for b in results[t][item.case.name]] for t in targets}
        records[item.case.name] = record
    return records


def findings(ops: dict[str, dict[str, Any]], targets: list[str]) -> dict[str, Any]:
    """Cross-cutting facts a reader (or a static checker) wants without walking every op."""
    statuses = {op: {t: e["status"] for t, e in entry.items()} for op, entry in ops.items()}

    def ops_where(predicate: Any) -> dict[str, list[str]]:
        found = {op: [t for t in targets if predicate(entry[t])] for op, entry in ops.items()}
        return {op: found_targets for op, found_targets in found.items() if found_targets}

    return {
        "counts": {t: dict(sorted(Counter(s[t] for s in statuses.values()).items())) for t in targets},
        "crash_the_compiler": ops_where(lambda e: e["crashes_seen"]),
        "differ_between_targets": {op: s for op, s in statuses.items() if len(set(s.values())) > 1},
        "folded_alone": sorted(op for op, s in statuses.items() if FOLDED in s.values()),
        "need_constant_inputs": ops_where(lambda e: e["compiled_with_constant_inputs"]),
        "opset_too_new_only": sorted(op for op, s in statuses.items() if set(s.values()) == {OPSET_TOO_NEW}),
    }


def dumps(value: Any, inline_depth: dict[str, int], depth: int = 0, key: str = "") -> str:
    """JSON with sorted keys, nested objects on one line below `inline_depth[top-level key]`."""
    if not isinstance(value, dict) or not value or depth >= inline_depth.get(key, 99):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    pad = " " * (depth + 1)
    items = [
        f"{pad}{json.dumps(k)}: {dumps(v, inline_depth, depth + 1, key or k)}"
        for k, v in sorted(value.items())
    ]
    return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Stable and diffable: one line per op and target, one line per model."""
    text = dumps(data, {"ops": 3, "models": 2, "findings": 2}) + "\n"
    json.loads(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def print_summary(ops: dict[str, dict[str, Any]], targets: list[str], seconds: float) -> None:
    print(f"{len(ops)} op types")
    for target in targets:
        counts = Counter(entry[target]["status"] for entry in ops.values())
        builds = sum(entry[target]["built"] for entry in ops.values())
        text = ", ".join(f"{count} {name}" for name, count in sorted(counts.items()))
        print(f"  {target}: {text} ({builds} models built)")
    print(f"total {seconds:.0f} s")


def annotate_inputs(path: Path) -> None:
    """Add each model record's dynamic input positions and value types to an existing table
    without building again."""
    data = json.loads(path.read_text(encoding="utf-8"))
    models, _ = collect_node_tests()
    for case in [*models, *generated_models()]:
        if case.name in data["models"]:
            data["models"][case.name].pop("inputs", None)
            data["models"][case.name]["dynamic"] = dynamic_positions(case.model)
            data["models"][case.name].update(value_types(case.model))
    write_json(path, data)
