"""Write one real conversion's outcome to the learned table (`conversions`), in the ONNX helper:
the model's op signatures (`node_signatures`) come from the static check's analysis of it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from baseline.files.hashing import sha256_file
from baseline.static_check.check import analyse
from baseline.static_check.conversions import MAX_SIGNATURES, Entry, precision, write_entry
from baseline.static_check.node_signatures import compiled_nodes, failing_node, signature


def record(
    root: Path,
    path: Path,
    shapes: Mapping[str, list[int]],
    model: str,
    toolkit: str,
    platform: str,
    quantized: bool,
    compiled: bool,
    log: str,
) -> None:
    """Write one conversion's outcome to the learned table (in the helper process)."""
    analysis = analyse(path, shapes)  # shared with the static check of the same model
    graph, facts = analysis.graph, analysis.facts
    nodes = compiled_nodes(graph, facts)
    failing = None if compiled else failing_node(graph, log)
    signatures = list(dict.fromkeys(signature(node, facts) for node in nodes))[:MAX_SIGNATURES]
    write_entry(
        root,
        Entry(
            onnx=sha256_file(path),
            model=model,
            toolkit=toolkit,
            platform=platform,
            precision=precision(quantized),
            compiled=compiled,
            error="" if compiled else (log.strip().splitlines() or ["crashed"])[0][:300],
            failing_node=(failing.name or failing.output[0]) if failing is not None else "",
            failing=(signature(failing, facts),) if failing is not None else (),
            signatures=tuple(signatures) if compiled else (),
        ),
    )
