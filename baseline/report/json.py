"""The machine-readable report: `{"passed": bool, "counts": {...}, "results": [...]}`."""

from __future__ import annotations

import json

from baseline.models.results import Report


def render_json(report: Report) -> str:
    # model_dump_json maps NaN / Inf to null, so the output is always valid JSON
    results = json.loads(report.model_dump_json())["results"]
    document = {
        "passed": report.passed,
        "lock": report.lock,
        "counts": report.counts(),
        "results": results,
    }
    return json.dumps(document, indent=2, sort_keys=False) + "\n"
