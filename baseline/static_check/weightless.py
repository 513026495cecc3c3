"""Reading an ONNX file without its weights: the static check's view of a model.

No rule and no shape-inference function reads the bytes of a model's large float initializers
(inference reads small shape, axes, pads and scales inputs; the rules read dims). Parsing them
is most of a check's time on a real model: for a 54 MB CNN, reading the file ~0.04 s, parsing it
~0.03 s, and onnx's inference serialises and re-parses the whole model (~0.25 s). So the file is
mapped, not read, and walked at the protobuf wire level down to the main graph's initializers;
the bytes of every large float initializer are left where they are, and only the rest (nodes,
small initializers, every other field, in file order) is parsed. A file the walk does not
understand is parsed whole, as before, and its weights' bytes are dropped after.
"""

from __future__ import annotations

import math
import mmap
from collections.abc import Iterator
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from baseline.files.onnx_facts import load_onnx_structure

WEIGHT_TYPES = frozenset(
    {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}
)
SET_ASIDE_FROM = 1024
"""Float initializers of at least this many elements are weights: no shape-inference function
reads their values (those read small shape, axes, pads and scales inputs)."""

# field numbers in onnx.proto (stable since IR version 1)
MODEL_GRAPH = 7
GRAPH_INITIALIZER = 5
TENSOR_DIMS, TENSOR_DATA_TYPE, TENSOR_RAW_DATA = 1, 2, 9
VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5
MAX_VARINT_BYTES = 10


class _Unreadable(Exception):
    """The walk met something it does not parse (a truncated file, a group, a bad varint)."""


def load_weightless(path: Path) -> tuple[onnx.ModelProto, bool]:
    """The model in `path` whose main graph's large float initializers carry no bytes, and
    whether there were any; everything else is as `onnx.load` gives it. Raises `InputError`
    (from `load_onnx_structure`) for a file that is not ONNX."""
    try:
        # mapped: only the pages walked are read. (A file truncated while it is walked would
        # kill the process with SIGBUS: this runs in the ONNX helper, whose death is reported
        # and which is replaced, as for a crash in onnxruntime.)
        with open(path, "rb") as stream, mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as data:
            skeleton, cleared = _without_weights(data)
        model = onnx.ModelProto()
        model.ParseFromString(skeleton)
    except (OSError, ValueError, _Unreadable, DecodeError):
        # an empty file cannot be mapped; anything odd is parsed whole, with onnx's own errors
        return _cleared(load_onnx_structure(path))
    if not model.graph.node and not model.graph.output:
        return _cleared(load_onnx_structure(path))  # raises the one-line "holds no graph" error
    return model, cleared


def _is_weight(tensor: onnx.TensorProto) -> bool:
    # HasField, not `tensor.raw_data`: reading the field copies its bytes
    large = math.prod(tensor.dims) >= SET_ASIDE_FROM
    return tensor.data_type in WEIGHT_TYPES and tensor.HasField("raw_data") and large


def _cleared(model: onnx.ModelProto) -> tuple[onnx.ModelProto, bool]:
    weights = [tensor for tensor in model.graph.initializer if _is_weight(tensor)]
    for tensor in weights:
        tensor.ClearField("raw_data")
    return model, bool(weights)


def _without_weights(data: mmap.mmap) -> tuple[bytes, bool]:
    """The serialised model without its weights' bytes. Slicing an mmap copies just that slice."""
    pieces: list[bytes] = []
    cleared = False
    for number, wire, start, value_start, end in _fields(data, 0, len(data)):
        if number == MODEL_GRAPH and wire == LENGTH_DELIMITED:
            graph, graph_cleared = _graph_without_weights(data, value_start, end)
            pieces.append(_length_delimited(number, graph))
            cleared = cleared or graph_cleared
        else:
            pieces.append(data[start:end])
    return b"".join(pieces), cleared


def _graph_without_weights(data: mmap.mmap, begin: int, stop: int) -> tuple[bytes, bool]:
    pieces: list[bytes] = []
    cleared = False
    for number, wire, start, value_start, end in _fields(data, begin, stop):
        if number == GRAPH_INITIALIZER and wire == LENGTH_DELIMITED:
            tensor = _tensor_without_bytes(data, value_start, end)
            if tensor is not None:
                pieces.append(_length_delimited(number, tensor))
                cleared = True
                continue
        pieces.append(data[start:end])
    return b"".join(pieces), cleared


def _tensor_without_bytes(data: mmap.mmap, begin: int, stop: int) -> bytes | None:
    """The tensor's fields but `raw_data` if it is a weight (see `_is_weight`), else None."""
    dims: list[int] = []
    data_type = 0
    has_raw_data = False
    kept: list[bytes] = []
    for number, wire, start, value_start, end in _fields(data, begin, stop):
        if number == TENSOR_RAW_DATA and wire == LENGTH_DELIMITED:
            has_raw_data = True
            continue
        kept.append(data[start:end])
        if number == TENSOR_DATA_TYPE and wire == VARINT:
            data_type = _signed(_varint(data, value_start)[0])
        elif number == TENSOR_DIMS and wire == VARINT:
            dims.append(_signed(_varint(data, value_start)[0]))
        elif number == TENSOR_DIMS and wire == LENGTH_DELIMITED:  # packed
            dims += _packed_varints(data, value_start, end)
    weight = has_raw_data and data_type in WEIGHT_TYPES and math.prod(dims) >= SET_ASIDE_FROM
    return b"".join(kept) if weight else None


def _fields(data: mmap.mmap, begin: int, stop: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(field number, wire type, start, value start, end) of each field in data[begin:stop]."""
    position = begin
    while position < stop:
        tag, value_start = _varint(data, position)
        number, wire = tag >> 3, tag & 7
        if wire == VARINT:
            end = _varint(data, value_start)[1]
        elif wire == FIXED64:
            end = value_start + 8
        elif wire == FIXED32:
            end = value_start + 4
        elif wire == LENGTH_DELIMITED:
            length, value_start = _varint(data, value_start)
            end = value_start + length
        else:
            raise _Unreadable(f"wire type {wire}")  # groups: onnx never writes them
        if number == 0 or end > stop:
            raise _Unreadable("field past its message")
        yield number, wire, position, value_start, end
        position = end


def _varint(data: mmap.mmap, position: int) -> tuple[int, int]:
    """The unsigned varint at `position` and the position after it."""
    value = 0
    for index in range(MAX_VARINT_BYTES):
        try:
            byte = data[position + index]
        except IndexError:
            raise _Unreadable("truncated varint") from None
        value |= (byte & 0x7F) << (7 * index)
        if byte < 0x80:
            return value, position + index + 1
    raise _Unreadable("varint too long")


def _packed_varints(data: mmap.mmap, begin: int, stop: int) -> list[int]:
    values = []
    position = begin
    while position < stop:
        value, position = _varint(data, position)
        values.append(_signed(value))
    if position != stop:
        raise _Unreadable("packed field past its end")
    return values


def _signed(value: int) -> int:
    """int64 and enum fields are written as 64-bit two's complement varints."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | LENGTH_DELIMITED) + _encode_varint(len(payload)) + payload


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
