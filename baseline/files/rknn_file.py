"""Reading a `.rknn` file without the toolkit: header, embedded metadata, and a fingerprint.

Two container formats, measured on RKNN-Toolkit2 2.2.0, 2.3.2 and 2.5.0 output:

    0x00  b"RKNN", u32 0
    0x08  u64 format version: 6 (rk35xx, rv1126b), 0x1004 (rv1103, rv1106, rv1103b, rv1106b)
    0x10  u64 P: length of the payload that starts at 0x40
    0x40+P  u64 J, then J bytes of JSON that end exactly at the end of the file

Format 6: the payload is one FlatBuffer (identifier "RKNN"). Format 0x1004: the payload is
u32 F (the FlatBuffer's length) and a table of section sizes, the compiled sections (weights and
register commands), then an F-byte FlatBuffer with its own schema.

Two conversions of the same ONNX with the same toolkit differ in a few bytes to a few KB
(`scripts/measure_fingerprints.py`): the compiler leaves heap, stack and library pointers in some
fields, and uninitialised memory in the unused tail of constant buffers and in the native shape
of some activation copies the compiler makes. The fingerprint is the
sha256 of the file with exactly those bytes zeroed (format 6), or of the parts that reconvert
identically (format 0x1004), so it is stable across reconversion and still changes with any
weight, target, quantization or toolkit. Only the platforms whose reconversions were measured
stable get one; the others get `None`, and `fingerprint_gap` says why.
"""

from __future__ import annotations

import ast
import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baseline.errors import InputError
from baseline.models.lock import RknnMetadata, RknnTensor

HEADER_SIZE = 0x40
FLATBUFFER_FORMAT = 6
SECTIONS_FORMAT = 0x1004
MAX_JSON_BYTES = 64 << 20
"""The JSON trailer is a few KB; a larger one is not a toolkit's and is not parsed."""

FINGERPRINTED = {
    FLATBUFFER_FORMAT: {"rk3562", "rk3566", "rk3568", "rk3576", "rk3588", "rv1126b"},
    SECTIONS_FORMAT: {"rv1103", "rv1106"},
}
"""Per format, the platforms whose masked reconversions were measured identical."""
UNSTABLE = {
    SECTIONS_FORMAT: {
        "rv1103b": "its compiled sections differ between identical conversions",
        "rv1106b": "its compiled sections differ between identical conversions",
    },
}
"""Measured platforms that cannot get a stable fingerprint, and why (shown by the artifact gate)."""

# Format 6: slots of the FlatBuffer root table, matched against the toolkit's generated accessors.
ROOT_STRINGS = {7: "toolkit", 8: "target_platform", 12: "input_info", 13: "output_info"}
ROOT_GRAPHS, ROOT_BUFFERS = 2, 20
# Tensor table fields: dtype code, native shape, name, constant-buffer index.
TENSOR_DTYPE, TENSOR_SHAPE, TENSOR_NAME, TENSOR_BUFFER = 0, 3, 5, 18
SECONDARY_COPY = "_exSecondary"
"""Names of the compiler's second-layout copies of activations. Their native shape can hold an
uninitialised dimension: a bidirectional GRU's backward state copy measured [25, N, 1, 1, 8] with
six values of N (2732-2763) in six identical conversions, where the forward one has N = 1."""
DTYPE_BYTES = {0x01: 4, 0x03: 1, 0x05: 2, 0x06: 4, 0x07: 8, 0x0A: 2}
"""Element sizes of the compiler's dtype codes (0x05: rk3576's BN/BS config tensors, measured)."""
TILE_RANK = 6
"""A 12-D native shape is two 6-D tiles (e.g. 10 channels stored as 8 + 2), one after the other."""
# Tables of a graph whose entries hold leaked 8-byte pointers, and which fields of each entry.
POINTER_FIELDS = {8: (2,), 9: (6, 7, 8, 11, 12)}
PLATFORM_POINTER_FIELDS = {"rk3566": {9: (5, 9)}, "rk3568": {9: (5, 9)}}
"""More leaked pointers on rk3566/rk3568: fields that rk3588 fills with small offsets hold a
stack and a heap address there, stored as two u32 halves."""

# Format 0x1004: slots of its FlatBuffer's root table.
SECTIONS_ROOT_STRINGS = {3: "attrs", 5: "toolkit", 6: "target_platform"}


class FlatBuffer:
    """Just enough FlatBuffer reading to walk the RKNN root table."""

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = data

    def u32(self, offset: int) -> int:
        return int(struct.unpack_from("<I", self.data, offset)[0])

    def root(self) -> int:
        return self.u32(0)

    def field(self, table: int, slot: int) -> int | None:
        vtable = table - struct.unpack_from("<i", self.data, table)[0]
        vtable_size = struct.unpack_from("<H", self.data, vtable)[0]
        count = (vtable_size - 4) // 2
        if slot >= count:
            return None
        offset = struct.unpack_from("<H", self.data, vtable + 4 + 2 * slot)[0]
        return table + offset if offset else None

    def deref(self, position: int) -> int:
        return position + self.u32(position)

    def string(self, table: int, slot: int) -> str | None:
        position = self.field(table, slot)
        if position is None:
            return None
        start = self.deref(position)
        return bytes(self.data[start + 4 : start + 4 + self.u32(start)]).decode("utf-8", "replace")

    def tables(self, table: int, slot: int) -> list[int]:
        position = self.field(table, slot)
        if position is None:
            return []
        vector = self.deref(position)
        return [self.deref(vector + 4 + 4 * i) for i in range(self.u32(vector))]

    def ints(self, table: int, slot: int) -> list[int]:
        position = self.field(table, slot)
        if position is None:
            return []
        vector = self.deref(position)
        return list(struct.unpack_from(f"<{self.u32(vector)}i", self.data, vector + 4))

    def scalar(self, table: int, slot: int, fmt: str) -> int | None:
        position = self.field(table, slot)
        return None if position is None else int(struct.unpack_from(fmt, self.data, position)[0])


@dataclass(frozen=True)
class Layout:
    """Where a file's parts are: the FlatBuffer (bounds in the file) and the JSON trailer."""

    format_version: int
    flatbuffer: FlatBuffer
    flatbuffer_at: int
    payload_end: int
    summary: dict[str, Any]


def _split(data: bytes, path: Path) -> Layout:
    if len(data) < HEADER_SIZE + 8 or data[:4] != b"RKNN":
        raise InputError(f"{path}: not an .rknn file (no RKNN header)")
    format_version, payload_size = struct.unpack_from("<QQ", data, 8)
    json_at = HEADER_SIZE + payload_size
    if json_at + 8 > len(data):
        raise InputError(f"{path}: truncated .rknn file; convert it again")
    (json_size,) = struct.unpack_from("<Q", data, json_at)
    if json_at + 8 + json_size != len(data) or json_size > MAX_JSON_BYTES:
        raise InputError(f"{path}: .rknn trailer does not end at the end of the file; convert it again")
    try:
        summary = json.loads(data[json_at + 8 :])
    except (ValueError, RecursionError):  # a crafted trailer may nest past the parser's stack
        raise InputError(f"{path}: .rknn metadata is not JSON; convert it again") from None
    if not isinstance(summary, dict):
        raise InputError(f"{path}: .rknn metadata is not a JSON object; convert it again")
    flatbuffer_at = HEADER_SIZE
    if format_version == SECTIONS_FORMAT:
        # the FlatBuffer closes the payload; its length opens it
        (flatbuffer_size,) = struct.unpack_from("<I", data, HEADER_SIZE)
        if not 8 <= flatbuffer_size <= payload_size - 4:
            raise InputError(f"{path}: .rknn model table is out of bounds; convert it again")
        flatbuffer_at = json_at - flatbuffer_size
    flatbuffer = FlatBuffer(memoryview(data)[flatbuffer_at:json_at])  # a view, not a copy
    return Layout(int(format_version), flatbuffer, flatbuffer_at, json_at, summary)


def read_rknn(path: Path) -> RknnMetadata:
    """The metadata a `.rknn` file carries: versions, platform, I/O names, shapes, dtypes, layouts."""
    data = path.read_bytes()
    layout = _split(data, path)
    # every field below comes from the file: any shape the reader does not expect is the file's
    # fault (one line), never a traceback
    try:
        return _metadata(data, layout)
    except (struct.error, IndexError, ValueError, TypeError, RecursionError, MemoryError):
        raise InputError(f"{path}: .rknn model table is unreadable; convert it again") from None


def _metadata(data: bytes, layout: Layout) -> RknnMetadata:
    if layout.format_version == SECTIONS_FORMAT:
        strings, inputs, outputs = _sections_io(layout)
    else:
        strings, inputs, outputs = _flatbuffer_io(layout)
    fingerprint = fingerprint_of(data, layout, strings.get("target_platform") or "")
    toolkit, _, compiler = (strings.get("toolkit") or "").partition("(compiler version: ")
    platforms = layout.summary.get("target_platform")
    return RknnMetadata(
        format_version=layout.format_version,
        toolkit_version=str(layout.summary.get("version") or toolkit.strip()),
        compiler_version=compiler.removesuffix(")").strip() or None,
        target_platforms=_platforms(platforms),
        inputs=inputs,
        outputs=outputs,
        fingerprint=fingerprint,
    )


def _platforms(value: object) -> list[str]:
    """The trailer's `target_platform`: a list of names as the toolkit writes it, or absent. A
    number or a bare string is a crafted file, which must not read as "built for nothing" and so
    pass every platform check."""
    if value is None:
        return []
    if not isinstance(value, list) or not value or not all(isinstance(p, str) and p for p in value):
        raise ValueError("target_platform is not a list of platform names")
    return value


IO = tuple[dict[str, str | None], list[RknnTensor], list[RknnTensor]]


def _flatbuffer_io(layout: Layout) -> IO:
    """Format 6: I/O dtypes and layouts from the root table's `{"name": {...}}` strings."""
    fb = layout.flatbuffer
    strings = {name: fb.string(fb.root(), slot) for slot, name in ROOT_STRINGS.items()}
    inputs = _tensors(_literal(strings["input_info"]), layout.summary)
    outputs = _tensors(_literal(strings["output_info"]), layout.summary)
    return strings, inputs, outputs


def _sections_io(layout: Layout) -> IO:
    """Format 0x1004: I/O from the `attrs` dictionary, ordered by the toolkit's index."""
    fb = layout.flatbuffer
    strings = {name: fb.string(fb.root(), slot) for slot, name in SECTIONS_ROOT_STRINGS.items()}
    attrs = _literal(strings["attrs"]).get("attrs")
    specs = attrs if isinstance(attrs, dict) else {}
    ordered = sorted(
        ((name, spec) for name, spec in specs.items() if isinstance(spec, dict)),
        key=lambda item: item[1].get("idx", 0) if isinstance(item[1].get("idx"), int) else 0,
    )
    inputs = {name: spec for name, spec in ordered if not spec.get("is_output")}
    outputs = {name: spec for name, spec in ordered if spec.get("is_output")}
    return strings, _tensors(inputs, layout.summary), _tensors(outputs, layout.summary)


def _tensors(declared: dict[str, Any], summary: dict[str, Any]) -> list[RknnTensor]:
    """I/O tensors from a `{"name": {"dtype", "layout"}}` declaration and the JSON shapes."""
    norm = summary.get("norm_tensor", [])
    shapes = (
        {t.get("url"): t.get("size") for t in norm if isinstance(t, dict) and isinstance(t.get("url"), str)}
        if isinstance(norm, list)
        else {}
    )
    return [
        RknnTensor(
            name=str(name),
            dtype=str(spec.get("dtype", "")),
            layout=str(spec.get("layout", "")),
            shape=_dims(shapes.get(str(name))),
        )
        for name, spec in declared.items()
        if isinstance(spec, dict)
    ]


def _dims(size: object) -> list[int]:
    """A JSON shape as ints; anything but a list of integers raises (the caller refuses the file)."""
    if size is None:
        return []
    if not isinstance(size, list) or not all(isinstance(dim, int) for dim in size):
        raise ValueError("shape is not a list of integers")
    return [int(dim) for dim in size]


def _literal(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value = ast.literal_eval(text)  # literal_eval only parses literals; nothing runs
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return {}
    return value if isinstance(value, dict) else {}


def fingerprint_of(data: bytes, layout: Layout, platform: str) -> str | None:
    """The fingerprint of a file whose parts `layout` located, or None where none is stable."""
    if platform not in FINGERPRINTED.get(layout.format_version, set()):
        return None
    if layout.format_version == SECTIONS_FORMAT:
        return _sections_fingerprint(data, layout)
    fb = layout.flatbuffer
    ranges = [*_pointer_ranges(fb, platform), *_slack_ranges(fb), *_secondary_shape_ranges(fb)]
    return masked_sha256(data, [(layout.flatbuffer_at + a, layout.flatbuffer_at + b) for a, b in ranges])


ZEROS = bytes(1 << 16)


def masked_sha256(data: bytes, ranges: list[tuple[int, int]]) -> str:
    """The sha256 of `data` with every range zeroed; ranges are clamped to the data (they come
    from the file). Hashed piece by piece from a view: a copy of a 30 MB build, then a masked
    copy, doubled the verifying process's peak memory."""
    view = memoryview(data)
    digest = hashlib.sha256()
    done = 0  # bytes of `data` hashed so far
    for start, end in sorted((max(0, start), min(len(view), end)) for start, end in ranges):
        start = max(start, done)  # ranges may overlap
        if start >= end:
            continue
        digest.update(view[done:start])
        for at in range(start, end, len(ZEROS)):
            digest.update(ZEROS[: min(len(ZEROS), end - at)])
        done = end
    digest.update(view[done:])
    return digest.hexdigest()


def _sections_fingerprint(data: bytes, layout: Layout) -> str:
    """Format 0x1004: the header's magic and format, the section table and compiled sections,
    the FlatBuffer's toolkit and platform strings, and the JSON trailer. The header's pointers
    and the FlatBuffer itself (its layout and length vary between identical conversions) are
    left out; the FlatBuffer's length opens the payload, so the table is hashed from after it."""
    fb = layout.flatbuffer
    view = memoryview(data)  # slices of a view are not copies
    digest = hashlib.sha256(view[:0x10])
    digest.update(view[HEADER_SIZE + 4 : layout.flatbuffer_at])
    for slot in (5, 6):
        digest.update((fb.string(fb.root(), slot) or "").encode() + b"\0")
    digest.update(view[layout.payload_end :])
    return digest.hexdigest()


def fingerprint_gap(metadata: RknnMetadata) -> str | None:
    """Why a build has no fingerprint (None when it has one)."""
    if metadata.fingerprint is not None:
        return None
    platform = ", ".join(metadata.target_platforms) or "unknown platform"
    known = UNSTABLE.get(metadata.format_version, {})
    reason = next((known[p] for p in metadata.target_platforms if p in known), None)
    if reason is not None:
        return f"{platform} builds get no fingerprint: {reason}"
    if metadata.format_version not in FINGERPRINTED:
        version = metadata.format_version
        return f".rknn format {version} is not fingerprinted (its volatile bytes were never measured)"
    return f"{platform} builds get no fingerprint (their volatile bytes were never measured)"


def _pointer_ranges(fb: FlatBuffer, platform: str) -> list[tuple[int, int]]:
    ranges = []
    extra = PLATFORM_POINTER_FIELDS.get(platform, {})
    for graph in fb.tables(fb.root(), ROOT_GRAPHS):
        for slot in POINTER_FIELDS.keys() | extra.keys():
            fields = (*POINTER_FIELDS.get(slot, ()), *extra.get(slot, ()))
            for table in fb.tables(graph, slot):
                for entry in fb.tables(table, 1):
                    positions = (fb.field(entry, field) for field in fields)
                    ranges += [(p, p + 8) for p in positions if p is not None]
    return ranges


def _slack_ranges(fb: FlatBuffer) -> list[tuple[int, int]]:
    """Bytes of each constant buffer past the tensor's real size (uninitialised in 2.2.0 to 2.5.0)."""
    buffers = fb.tables(fb.root(), ROOT_BUFFERS)
    ranges = []
    for tensor in _tensor_tables(fb):
        index = fb.scalar(tensor, TENSOR_BUFFER, "<i")
        item_size = DTYPE_BYTES.get(fb.scalar(tensor, TENSOR_DTYPE, "<b") or -1)
        if index is None or item_size is None or not 0 < index < len(buffers):
            continue
        position = fb.field(buffers[index], 0)
        if position is None:
            continue
        vector = fb.deref(position)
        size = fb.u32(vector)
        used = _used_bytes(fb.ints(tensor, TENSOR_SHAPE), item_size, size)
        if used < size:
            ranges.append((vector + 4 + used, vector + 4 + size))
    return ranges


def _secondary_shape_ranges(fb: FlatBuffer) -> list[tuple[int, int]]:
    """The native shapes of activation copies the compiler made (no constant buffer). The tensor
    they copy keeps its own shape in the fingerprint, so a real change of layout still counts."""
    ranges = []
    for tensor in _tensor_tables(fb):
        if (fb.scalar(tensor, TENSOR_BUFFER, "<i") or 0) > 0:
            continue
        if SECONDARY_COPY not in (fb.string(tensor, TENSOR_NAME) or ""):
            continue
        position = fb.field(tensor, TENSOR_SHAPE)
        if position is not None:
            vector = fb.deref(position)
            ranges.append((vector + 4, vector + 4 + 4 * fb.u32(vector)))
    return ranges


def _tensor_tables(fb: FlatBuffer) -> list[int]:
    """Every tensor table of every graph, in file order."""
    return [tensor for graph in fb.tables(fb.root(), ROOT_GRAPHS) for tensor in fb.tables(graph, 0)]


def _used_bytes(shape: list[int], item_size: int, size: int) -> int:
    """How much of a `size`-byte buffer the tensor fills. A 12-D shape whose product overflows the
    buffer is two 6-D tiles stored one after the other (measured on rk3562's reduce weights);
    only then is it read that way, so buffers the product already explains keep their mask."""
    used = item_size * _product(shape)
    if used > size and len(shape) == 2 * TILE_RANK:
        used = item_size * (_product(shape[:TILE_RANK]) + _product(shape[TILE_RANK:]))
    return used


def _product(dims: list[int]) -> int:
    total = 1
    for dim in dims:
        total *= dim
    return total
