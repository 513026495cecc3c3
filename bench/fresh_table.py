"""Issue 33's fresh protocol per target, from the score files `agreement.py --round N --json` wrote:
each round's first score, and their sum (the ≥ 30-model corpus, every model scored once).

    python bench/fresh_table.py [fourth-score fifth-score sixth-score ...]

"Agree on judged" leaves the unknown verdicts out of the denominator; unknown is its own column.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
TARGETS = ("rk3588", "rk3566", "rv1106")


def counts(path: Path) -> Counter[str]:
    """The confusion matrix of every model in one score file, development and test together (a
    round scored with `--round` holds only that round's models)."""
    document = json.loads(path.read_text())
    total: Counter[str] = Counter()
    for corpus in ("dev", "test"):
        total.update(document[corpus]["confusion"])
    return total


def row(label: str, matrix: Counter[str]) -> str:
    n = sum(matrix.values())
    unknown = matrix["unknown, compiled"] + matrix["unknown, failed"]
    judged = n - unknown
    agree = matrix["compiles, compiled"] + matrix["fails, failed"]
    share = f"{agree / judged:.1%}" if judged else "-"
    return (
        f"| {label} | {n} | {agree} / {judged} ({share}) | {matrix['compiles, failed']} "
        f"| {matrix['fails, compiled']} | {unknown} ({unknown / n:.1%}) |"
    )


def main() -> None:
    names = sys.argv[1:] or ["fourth-score", "fifth-score", "sixth-score"]
    print('| target, scores | models | agree on judged | false "compiles" | false "fails" | unknown |')
    print("|---|---|---|---|---|---|")
    for target in TARGETS:
        total: Counter[str] = Counter()
        for name in names:
            matrix = counts(RESULTS / f"agreement-{target}-{name}.json")
            total.update(matrix)
            print(row(f"{target}, {name}", matrix))
        print(row(f"**{target}, all**", total))


if __name__ == "__main__":
    main()
