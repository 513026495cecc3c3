"""What a rescoring changed: two `agreement.py` score files of the same corpus, before and after.

    python bench/rescore_diff.py rk3588-rules11 rk3588-rules12
    python bench/rescore_diff.py rk3588-eleventh-score rk3588-eleventh-rules12

Each argument names `bench/results/agreement-<name>.json`. A score file lists every model it did
not count as agreeing (false "compiles", false "fails", "unknown"), so a model that moves into or
out of those lists is a changed verdict; a correct verdict turned wrong shows as an entry the
"before" file did not have.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
LISTS = ("false_compiles", "false_fails", "unknown")


def entries(name: str) -> tuple[dict[str, object], dict[tuple[str, str], str]]:
    """A score file's counts per corpus, and (corpus, source/model) -> the list it is in."""
    document = json.loads((RESULTS / f"agreement-{name}.json").read_text())
    counts: dict[str, object] = {}
    listed: dict[tuple[str, str], str] = {}
    for corpus in ("dev", "test"):
        block = document[corpus]
        judged = sum(n for key, n in block["confusion"].items() if not key.startswith("unknown"))
        counts[corpus] = {
            "models": block["models"],
            "judged": judged,
            **{kind: len(block[kind]) for kind in LISTS},
        }
        for kind in LISTS:
            for verdict in block[kind]:
                listed[(corpus, f"{verdict['source']}/{verdict['model']}")] = kind
    return counts, listed


def main() -> None:
    before_name, after_name = sys.argv[1:3]
    before_counts, before = entries(before_name)
    after_counts, after = entries(after_name)
    for corpus in ("dev", "test"):
        print(f"{corpus}: before {before_counts[corpus]}")
        print(f"{corpus}: after  {after_counts[corpus]}")
    for key in sorted(set(before) | set(after)):
        was, now = before.get(key, "agreed"), after.get(key, "agreed")
        if was != now:
            print(f"  {key[0]} {key[1]}: {was} -> {now}")


if __name__ == "__main__":
    main()
