"""Measure which bytes of a `.rknn` vary between identical conversions, per platform and build kind.

    python scripts/measure_fingerprints.py [--toolkit 2.5.0] [--platforms rk3588,rk3566,...]
                                           [--kinds fp16,w8a8] [--repeats 3] [--onnx PATH]

The same ONNX (default: the demo classifier) is converted `--repeats` times per platform and
build kind, each time in a fresh toolkit worker process, as `lock` and `verify` do (library and
stack addresses only move between processes). The files are then compared byte by byte, and
each varying byte is attributed to the region `baseline.files.rknn_file` knows it by:

    pointer    a pointer field of the FlatBuffer (masked; rk3566/rk3568 add two u32-half fields)
    slack      a constant buffer past the tensor's real size (masked)
    copy shape the native shape of an activation copy the compiler made (`*_exSecondary`, masked)
    header     the format-0x1004 header's sizes and pointers (left out of that format's fingerprint)
    table      the format-0x1004 FlatBuffer (left out, except its toolkit and platform strings)
    length     bytes one part has more than the same part of another conversion
    other      anything else (format 0x1004: sections and JSON): the fingerprint cannot be stable

and the table says whether the fingerprints agree. Targets that refuse fp16 (rv1103, rv1106)
are reported as such.
"""

from __future__ import annotations

import argparse
import shutil
import struct
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from baseline.errors import BaselineError
from baseline.files.rknn_file import (
    HEADER_SIZE,
    SECTIONS_FORMAT,
    _pointer_ranges,
    _secondary_shape_ranges,
    _slack_ranges,
    _split,
    fingerprint_gap,
    read_rknn,
)
from baseline.toolchain.client import ToolkitWorker
from baseline.toolchain.provision import ensure_toolchain

REPO = Path(__file__).resolve().parent.parent
PLATFORMS = (
    "rk3562",
    "rk3566",
    "rk3568",
    "rk3576",
    "rk3588",
    "rv1103",
    "rv1106",
    "rv1103b",
    "rv1106b",
    "rv1126b",
)
KINDS = ("fp16", "w8a8")
QUANTIZED = {"dtype": "w8a8", "algorithm": "normal", "method": "channel"}


@dataclass
class Row:
    platform: str
    kind: str
    size: str
    varying: int
    regions: Counter[str]
    verdict: str


def convert(toolkit: str, onnx_path: Path, platform: str, kind: str, dest: Path, scratch: Path) -> str | None:
    """One conversion in a fresh worker; the error text, or None."""
    dataset = scratch / "dataset.txt"
    worker = ToolkitWorker(ensure_toolchain(toolkit))
    try:
        reply = worker.request(
            {
                "op": "build",
                "onnx": str(onnx_path),
                "platform": platform,
                "workdir": str(scratch),
                "quantization": QUANTIZED if kind == "w8a8" else None,
                "dataset": str(dataset) if kind == "w8a8" else None,
                "export": str(dest),
                "inputs": None,
            }
        )
    finally:
        worker.close()
    return None if reply.response.get("ok") else str(reply.response.get("error"))


def calibration(onnx_path: Path, scratch: Path) -> None:
    """One seeded sample of the model's first input, as the quantized builds' dataset."""
    model = onnx.load(str(onnx_path), load_external_data=False)
    shape = [dim.dim_value or 1 for dim in model.graph.input[0].type.tensor_type.shape.dim]
    sample = scratch / "sample.npy"
    np.save(sample, np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    (scratch / "dataset.txt").write_text(f"{sample}\n")


def parts(path: Path) -> tuple[list[tuple[str, bytes]], list[tuple[int, int, str]]]:
    """A file cut into parts compared on their own (format 0x1004: the FlatBuffer's length varies,
    which shifts everything after it), and the named ranges inside them (format 6)."""
    data = path.read_bytes()
    layout = _split(data, path)
    at, end = layout.flatbuffer_at, layout.payload_end
    if layout.format_version == SECTIONS_FORMAT:
        cut = [("header", data[0x10 : HEADER_SIZE + 4]), ("other", data[HEADER_SIZE + 4 : at])]
        return [*cut, ("table", data[at:end]), ("other", data[end:])], []
    fb = layout.flatbuffer
    platform = fb.string(fb.root(), 8) or ""
    named = [(at + a, at + b, "pointer") for a, b in _pointer_ranges(fb, platform)]
    named += [(at + a, at + b, "slack") for a, b in _slack_ranges(fb)]
    return [("other", data)], named + [(at + a, at + b, "copy shape") for a, b in _secondary_shape_ranges(fb)]


def attribute(files: list[Path]) -> tuple[int, Counter[str]]:
    """How many byte positions vary across `files`, by region; parts of different lengths are
    compared up to the shortest, the rest counted as `length`."""
    cut = [parts(f) for f in files]
    named = cut[0][1]
    counts: Counter[str] = Counter()
    for index, (name, _) in enumerate(cut[0][0]):
        blobs = [c[0][index][1] for c in cut]
        shortest = min(len(b) for b in blobs)
        for offset in range(shortest):
            if len({b[offset] for b in blobs}) > 1:
                counts[next((n for a, b, n in named if a <= offset < b), name)] += 1
        counts["length"] += max(len(b) for b in blobs) - shortest
    counts -= Counter()  # drop zero counts
    return sum(counts.values()), counts


def measure(args: argparse.Namespace, scratch: Path) -> list[Row]:
    calibration(args.onnx, scratch)
    rows = []
    for platform in args.platforms:
        for kind in args.kinds:
            files = [scratch / f"{platform}-{kind}-{i}.rknn" for i in range(args.repeats)]
            errors = [convert(args.toolkit, args.onnx, platform, kind, f, scratch) for f in files[:1]]
            if errors[0] is not None:
                rows.append(Row(platform, kind, "—", 0, Counter(), f"no build: {errors[0][:60]}"))
                continue
            for file in files[1:]:
                convert(args.toolkit, args.onnx, platform, kind, file, scratch)
            rows.append(judge(platform, kind, files))
            print(f"measured {platform} {kind}", file=sys.stderr, flush=True)
    return rows


def judge(platform: str, kind: str, files: list[Path]) -> Row:
    try:
        metadata = [read_rknn(f) for f in files]
        varying, counts = attribute(files)
    except (BaselineError, struct.error, IndexError) as error:
        return Row(platform, kind, "?", 0, Counter(), f"unreadable: {error}")
    sizes = sorted({f.stat().st_size for f in files})
    fingerprints = {m.fingerprint for m in metadata}
    fmt = f"{metadata[0].format_version:#x}"
    if None in fingerprints:
        verdict = f"none ({fingerprint_gap(metadata[0])})"
    else:
        verdict = "stable" if len(fingerprints) == 1 else "UNSTABLE"
    size = f"{fmt}, {sizes[0]:,} B" + ("" if len(sizes) == 1 else f"–{sizes[-1]:,}")
    return Row(platform, kind, size, varying, counts, verdict)


def table(rows: list[Row], toolkit: str, repeats: int) -> str:
    lines = [
        f"| platform | build | format, size | bytes that vary ({repeats} conversions, toolkit {toolkit}) "
        "| fingerprint |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        where = ", ".join(f"{n} {name}" for name, n in row.regions.most_common()) or "none"
        lines.append(f"| {row.platform} | {row.kind} | {row.size} | {row.varying}: {where} | {row.verdict} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--toolkit", default="2.5.0")
    parser.add_argument("--platforms", default=",".join(PLATFORMS), type=lambda s: s.split(","))
    parser.add_argument("--kinds", default=",".join(KINDS), type=lambda s: s.split(","))
    parser.add_argument("--repeats", default=3, type=int)
    parser.add_argument("--onnx", default=REPO / "fixtures" / "demo" / "classifier.onnx", type=Path)
    parser.add_argument("--keep", type=Path, help="copy the converted files here")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="baseline-fingerprints-"))
    try:
        rows = measure(args, scratch)
        if args.keep:
            shutil.copytree(scratch, args.keep, dirs_exist_ok=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(table(rows, args.toolkit, args.repeats))


if __name__ == "__main__":
    main()
