"""What `quantized-float-join` (an "unknown" reason) costs on the QDQ probes, whose real labels
`bench/rule_probes.py exports` kept: for each probe of `bench/qdq_probes.py` on rk3588 and rk3566
(the fp16 targets; rv1106 refuses every pre-quantized model by name first), its label, check's
verdict and whether the join fires.

    python bench/qdq_probes.py && python bench/float_join_cost.py

Writes `bench/results/float-join-qdq-probes.json`.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from agreement import RESULTS, fixed_shapes
from corpora import Item
from rule_probes import PROBES

from baseline.static_check import check_model

TARGETS = ("rk3588", "rk3566")


def labels(target: str) -> dict[str, bool]:
    """probe name → compiled, from the kept labels (each names its item last)."""
    kept = json.loads((RESULTS / f"rule-probes-2.5.0-{target}.json").read_text())
    return {str(value[-1]).split("/")[-1].removesuffix(".onnx"): bool(value[0]) for value in kept.values()}


def main() -> None:
    rows = []
    for target in TARGETS:
        compiled = labels(target)
        for path in sorted((PROBES / "exports").glob("q*.onnx")):
            report = check_model(
                path, target=target, shapes=fixed_shapes(Item("probe", "probe", path.name, path))
            )
            rows.append(
                {
                    "probe": path.stem,
                    "target": target,
                    "compiled": compiled.get(path.stem),
                    "verdict": report.verdict,
                    "join": any(f.rule == "quantized-float-join" for f in report.findings),
                }
            )
    counts = Counter(f"compiled={r['compiled']} join={r['join']}" for r in rows)
    (RESULTS / "float-join-qdq-probes.json").write_text(
        json.dumps({"counts": counts, "rows": rows}, indent=1) + "\n"
    )
    print(dict(counts))


if __name__ == "__main__":
    main()
