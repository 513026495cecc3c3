"""Copy a held-out round's labels from the conversion caches into its manifest, so the round's
file names every model with what the real toolkit did to it before anything scored it.

    python bench/round_labels.py 7

Reads `bench/results/labels-<toolkit>-<target>.json` (written by `agreement.py --round N
--labels-only`), keyed by the model's sha256 and the fixed shapes it was converted at, and
writes, per file of `bench/<nth>_round.json`, each target's label: "compiles", or "fails" with
the toolkit's first error line. A file not yet converted on a target says "pending". No rule of
`baseline check` runs here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from agreement import QUANTIZED_TARGETS, RESULTS, fixed_shapes
from corpora import HELD_OUT_ROUNDS, local_name, third_round_models

HERE = Path(__file__).parent
TARGETS = ("rk3588", "rk3566", "rv1106")
ORDINALS = {
    3: "third",
    4: "fourth",
    5: "fifth",
    6: "sixth",
    7: "seventh",
    8: "eighth",
    9: "ninth",
    10: "tenth",
    11: "eleventh",
    12: "twelfth",
    13: "thirteenth",
}


def target_name(target: str) -> str:
    """How a label names its build: rv1106 is built w8a8 (the only way it runs), the others fp16."""
    return f"{target} w8a8" if target in QUANTIZED_TARGETS else f"{target} fp16"


def labels_for(round: int, toolkit: str) -> dict[str, dict[str, dict[str, object]]]:
    """Per package folder and member: each target's label as the cache holds it."""
    caches = {
        target: json.loads(path.read_text()) if path.is_file() else {}
        for target in TARGETS
        for path in [RESULTS / f"labels-{toolkit}-{target}.json"]
    }
    found: dict[str, dict[str, dict[str, object]]] = {}
    for item in third_round_models(HELD_OUT_ROUNDS[round], round=round):
        shapes = fixed_shapes(item)
        key = item.sha256() + ":" + json.dumps(shapes, sort_keys=True)
        per_target: dict[str, object] = {"shapes": shapes}
        for target in TARGETS:
            entry = caches[target].get(key)
            if entry is None:
                per_target[target_name(target)] = "pending"
            else:
                per_target[target_name(target)] = "compiles" if entry[0] else f"fails: {entry[1]}"
        found.setdefault(item.source.split("/", 1)[1], {})[item.name] = per_target
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("round", type=int, choices=sorted(HELD_OUT_ROUNDS))
    parser.add_argument("--toolkit", default="2.5.0")
    args = parser.parse_args()
    path = HERE / f"{ORDINALS[args.round]}_round.json"
    document = json.loads(path.read_text())
    found = labels_for(args.round, args.toolkit)
    counts: dict[str, Counter[str]] = {target_name(t): Counter() for t in TARGETS}
    for entry in document["packages"].values():
        by_member = found.get(entry["folder"], {})
        entry["labels"] = {member: by_member[local_name(member)] for member in entry["files"]}
        for label in entry["labels"].values():
            for target in counts:
                counts[target][str(label[target]).split(":")[0]] += 1
    document["label_counts"] = {target: dict(sorted(c.items())) for target, c in counts.items()}
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    for target, c in document["label_counts"].items():
        print(target, c)


if __name__ == "__main__":
    main()
