"""Renderers: they turn a `Report` into text for people or JSON for machines, nothing else."""

from baseline.report.json import render_json
from baseline.report.text import render_text

__all__ = ["render_json", "render_text"]
