"""Rendering a toolkit matrix: a table for people, JSON for machines."""

from __future__ import annotations

import dataclasses
import json

from rich.table import Table

from baseline.models.lock import MatrixCell
from baseline.verification.matrix import MatrixResult


def render_matrix_json(result: MatrixResult) -> str:
    document = {
        "toolkits": result.toolkits,
        "cells": [json.loads(cell.model_dump_json()) for cell in result.cells],
        "changes": [dataclasses.asdict(change) for change in result.changes],
    }
    return json.dumps(document, indent=2) + "\n"


def render_matrix_table(result: MatrixResult) -> Table:
    table = Table(title="toolkit matrix: compiled? min cosine vs onnxruntime / worst drift vs lock")
    table.add_column("model / target")
    for version in result.toolkits:
        table.add_column(version, justify="center")
    table.add_column("first change")
    by_key = {(c.toolkit, c.model, c.target): c for c in result.cells}
    changes = {(c.model, c.target): f"{c.before}→{c.after}: {c.what}" for c in result.changes}
    for model, target in dict.fromkeys((c.model, c.target) for c in result.cells):
        row = [_cell(by_key.get((version, model, target))) for version in result.toolkits]
        table.add_row(f"{model} / {target}", *row, changes.get((model, target), "—"))
    return table


def _cell(cell: MatrixCell | None) -> str:
    if cell is None:
        return ""
    if not cell.compiled:
        return f"[red]✗ {cell.stage}[/]"
    cosine = "nan" if cell.min_cosine is None else f"{cell.min_cosine:.5f}"
    drift = "" if cell.drift_ratio is None else f" / {cell.drift_ratio:.2g}×"
    flag = " [red]NaN[/]" if cell.non_finite else ""
    return f"[green]✓[/] {cosine}{drift}{flag}"
