"""Reading a `.rknn` file without the toolkit: header, embedded metadata, and a fingerprint.

Layout of format version 6 (RKNN-Toolkit2 2.2.0, 2.3.0, 2.3.2, 2.5.0), measured on their output:

    0x00  b"RKNN", u32 0
    0x08  u64 format version
    0x10  u64 P: length of the FlatBuffer that starts at 0x40 (identifier "RKNN")
    0x40+P  u64 J, then J bytes of JSON that end exactly at the end of the file

Two conversions of the same ONNX with the same toolkit differ in ~1 KB: the compiler
leaves heap pointers in a few 8-byte fields and uninitialised memory in the unused tail of
constant buffers. The fingerprint is the sha256 of the file with exactly those bytes zeroed,
so it is stable across reconversion and still changes with any weight, target, quantization
or toolkit. Only the layouts that were measured are fingerprinted; others get `None`.
"""

from __future__ import annotations

import ast
import hashlib
import json
import struct
from pathlib import Path
from typing import Any

from baseline.errors import InputError
from baseline.models.lock import RknnMetadata, RknnTensor

HEADER_SIZE = 0x40
FINGERPRINT_FORMATS = {6}
"""Format versions whose volatile regions were measured (6 = RKNN-Toolkit2 2.2.0 to 2.5.0)."""

# Slots of the FlatBuffer root table, matched against the toolkit's generated accessors.
ROOT_STRINGS = {7: "toolkit", 8: "target_platform", 12: "input_info", 13: "output_info"}
ROOT_GRAPHS, ROOT_BUFFERS = 2, 20
# Tensor table fields: dtype code, native shape, constant-buffer index.
TENSOR_DTYPE, TENSOR_SHAPE, TENSOR_BUFFER = 0, 3, 18
DTYPE_BYTES = {0x01: 4, 0x03: 1, 0x06: 4, 0x07: 8, 0x0A: 2}
# Tables of a graph whose entries hold leaked pointers, and which fields of each entry.
POINTER_FIELDS = {8: (2,), 9: (6, 7, 8, 11, 12)}


class FlatBuffer:
    """Just enough FlatBuffer reading to walk the RKNN root table."""

    def __init__(self, data: bytes) -> None:
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
        return self.data[start + 4 : start + 4 + self.u32(start)].decode("utf-8", "replace")

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


def _split(data: bytes, path: Path) -> tuple[int, FlatBuffer, dict[str, Any]]:
    if len(data) < HEADER_SIZE + 8 or data[:4] != b"RKNN":
        raise InputError(f"{path}: not an .rknn file (no RKNN header)")
    format_version, flatbuffer_size = struct.unpack_from("<QQ", data, 8)
    json_at = HEADER_SIZE + flatbuffer_size
    if json_at + 8 > len(data):
        raise InputError(f"{path}: truncated .rknn file; convert it again")
    (json_size,) = struct.unpack_from("<Q", data, json_at)
    if json_at + 8 + json_size != len(data):
        raise InputError(f"{path}: .rknn trailer does not end at the end of the file; convert it again")
    try:
        summary = json.loads(data[json_at + 8 :])
    except ValueError:
        raise InputError(f"{path}: .rknn metadata is not JSON; convert it again") from None
    return int(format_version), FlatBuffer(data[HEADER_SIZE:json_at]), summary


def read_rknn(path: Path) -> RknnMetadata:
    """The metadata a `.rknn` file carries: versions, platform, I/O names, shapes, dtypes, layouts."""
    data = path.read_bytes()
    format_version, flatbuffer, summary = _split(data, path)
    try:
        strings = {name: flatbuffer.string(flatbuffer.root(), slot) for slot, name in ROOT_STRINGS.items()}
        fingerprint = _fingerprint(data, format_version, flatbuffer)
    except (struct.error, IndexError):
        raise InputError(f"{path}: .rknn model table is unreadable; convert it again") from None
    toolkit, _, compiler = (strings["toolkit"] or "").partition("(compiler version: ")
    return RknnMetadata(
        format_version=format_version,
        toolkit_version=summary.get("version") or toolkit.strip(),
        compiler_version=compiler.removesuffix(")").strip() or None,
        target_platforms=list(summary.get("target_platform", [])),
        inputs=_tensors(strings["input_info"], summary, "input"),
        outputs=_tensors(strings["output_info"], summary, "output"),
        fingerprint=fingerprint,
    )


def _tensors(info: str | None, summary: dict[str, Any], kind: str) -> list[RknnTensor]:
    """I/O tensors from the root table's `{"name": {"dtype", "layout"}}` and the JSON shapes."""
    declared = _literal(info)
    shapes = {t.get("url"): t.get("size") for t in summary.get("norm_tensor", []) if isinstance(t, dict)}
    return [
        RknnTensor(
            name=name,
            dtype=str(spec.get("dtype", "")),
            layout=str(spec.get("layout", "")),
            shape=[int(dim) for dim in shapes.get(name) or []],
        )
        for name, spec in declared.items()
        if isinstance(spec, dict)
    ]


def _literal(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value = ast.literal_eval(text)  # literal_eval only parses literals; nothing runs
        except (ValueError, SyntaxError):
            return {}
    return value if isinstance(value, dict) else {}


def _fingerprint(data: bytes, format_version: int, flatbuffer: FlatBuffer) -> str | None:
    if format_version not in FINGERPRINT_FORMATS:
        return None
    masked = bytearray(data)
    for start, end in [*_pointer_ranges(flatbuffer), *_slack_ranges(flatbuffer)]:
        masked[HEADER_SIZE + start : HEADER_SIZE + end] = bytes(end - start)
    return hashlib.sha256(masked).hexdigest()


def _pointer_ranges(fb: FlatBuffer) -> list[tuple[int, int]]:
    ranges = []
    for graph in fb.tables(fb.root(), ROOT_GRAPHS):
        for slot, fields in POINTER_FIELDS.items():
            for table in fb.tables(graph, slot):
                for entry in fb.tables(table, 1):
                    positions = (fb.field(entry, field) for field in fields)
                    ranges += [(p, p + 8) for p in positions if p is not None]
    return ranges


def _slack_ranges(fb: FlatBuffer) -> list[tuple[int, int]]:
    """Bytes of each constant buffer past the tensor's real size (uninitialised in 2.2.0 to 2.5.0)."""
    buffers = fb.tables(fb.root(), ROOT_BUFFERS)
    ranges = []
    for graph in fb.tables(fb.root(), ROOT_GRAPHS):
        for tensor in fb.tables(graph, 0):
            index = fb.scalar(tensor, TENSOR_BUFFER, "<i")
            item_size = DTYPE_BYTES.get(fb.scalar(tensor, TENSOR_DTYPE, "<b") or -1)
            if index is None or item_size is None or not 0 < index < len(buffers):
                continue
            position = fb.field(buffers[index], 0)
            if position is None:
                continue
            vector = fb.deref(position)
            used = item_size * _product(fb.ints(tensor, TENSOR_SHAPE))
            if used < fb.u32(vector):
                ranges.append((vector + 4 + used, vector + 4 + fb.u32(vector)))
    return ranges


def _product(dims: list[int]) -> int:
    total = 1
    for dim in dims:
        total *= dim
    return total
