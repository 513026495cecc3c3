"""Tensor files: safe `.npz` / `.npy` reading, byte-deterministic `.npz` writing, fixtures.

Tensors are always read with pickle disabled: an `.npz` from a pull request must never
execute code. Writes go through a fixed-timestamp zip so that the same arrays give the
same bytes, and therefore the same hash in the lock.
"""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO

import numpy as np

from baseline.errors import InputError
from baseline.files.fsutil import write_atomic
from baseline.files.tomlfile import did_you_mean
from baseline.models.intent import FixtureSpec
from baseline.models.tensors import TensorSpec

TensorSet = dict[str, np.ndarray]
"""Named arrays; fixtures and outputs carry a leading sample axis."""

MAX_FIXTURE_ELEMENTS = 1 << 28
"""Refuse fixtures above 2**28 elements (1 GiB of float32): a typo in a shape must not eat RAM."""

ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """An uncompressed `.npz` whose bytes depend only on the arrays (fixed zip timestamps)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=ZIP_EPOCH)
            info.external_attr = 0o644 << 16
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def save_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write `arrays` atomically as a deterministic `.npz`."""
    write_atomic(path, npz_bytes(arrays))


MAX_TENSOR_FILE_BYTES = 1 << 30
"""Refuse tensor files that inflate past 1 GiB: a small `.npz` can claim terabytes."""

MAX_TENSOR_MEMBERS = 10_000
"""Refuse `.npz` files of more arrays: a model's inputs or outputs, one array each. Counted from
the zip's end record before its directory is parsed (100,000 members took 41 s to refuse)."""
MAX_DIRECTORY_BYTES = MAX_TENSOR_MEMBERS * 1024
"""The zip directory's size bound that goes with `MAX_TENSOR_MEMBERS` (a 1 KB entry each): what
bounds the work of parsing it, whatever count the end record claims."""


def load_tensors(path: Path) -> TensorSet:
    """Read an `.npz` (every array) or `.npy` (one array, keyed by its file stem), no pickle.

    Sizes are checked from the headers before anything is inflated (see `check_tensor_sizes`).
    """
    try:
        if check_tensor_sizes(path):
            arrays = _read_npz(path)
        else:
            arrays = {path.stem: np.load(path, allow_pickle=False)}
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except ValueError as error:
        if "allow_pickle" in str(error):
            raise InputError(
                f"{path}: holds Python objects that need pickle, which baseline never loads; "
                "save plain numeric arrays with numpy.savez"
            ) from None
        raise InputError(f"{path}: not a readable .npy/.npz file ({error})") from None
    except (OSError, zipfile.BadZipFile, EOFError, MemoryError) as error:
        raise InputError(f"{path}: not a readable .npy/.npz file ({_one_line(error)})") from None
    for name, array in arrays.items():
        if array.dtype.kind not in "biuf":
            raise InputError(
                f"{path}: array {name!r} has dtype {array.dtype}; only bool, integer and "
                "float arrays are allowed"
            )
    return arrays


def check_tensor_sizes(path: Path) -> bool:
    """Refuse a tensor file whose arrays, as their headers declare them, are too large or too
    many; whether it is a zip (an `.npz`).

    Read before `np.load`, which would allocate whatever a header claims and inflate
    whatever a zip member holds: a zip bomb or a 200-byte file claiming 4 TiB.
    """
    with path.open("rb") as stream:
        is_zip = stream.read(4) == b"PK\x03\x04"
        if not is_zip:
            stream.seek(0)
            _check_npy_header(path, "array", stream, path.stat().st_size)
            return False
        _check_directory(path, stream)
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
        _check_members(path, len(members))
        total = sum(member.file_size for member in members)
        if total > MAX_TENSOR_FILE_BYTES:
            raise InputError(
                f"{path}: its arrays inflate to {total:.3g} bytes, above the limit of "
                f"{MAX_TENSOR_FILE_BYTES} bytes; store smaller tensors"
            )
        for member in members:
            with archive.open(member) as stream:
                _check_npy_header(path, f"array {member.filename!r}", stream, member.file_size)
    return True


def _read_npz(path: Path) -> TensorSet:
    """Every member of an `.npz` (checked by `check_tensor_sizes`), keyed as `np.load` keys them
    (without `.npy`). Read here rather than through `np.load`, whose lookup by name scans a list
    of the members: quadratic in their number."""
    arrays: TensorSet = {}
    with zipfile.ZipFile(path) as archive:
        for member in archive.infolist():
            with archive.open(member) as stream:
                array = np.lib.format.read_array(stream, allow_pickle=False)
            arrays[member.filename.removesuffix(".npy")] = array
    return arrays


_END = struct.Struct("<4s4H2LH")
"""A zip's end of central directory record: signature, disks, entries here and in all, the
directory's size and offset, the comment's length."""
_END64_LOCATOR = struct.Struct("<4sLQL")
_END64 = struct.Struct("<4sQ2H2L4Q")


def _check_directory(path: Path, stream: IO[bytes]) -> None:
    """Refuse a zip whose end record declares more members than `MAX_TENSOR_MEMBERS`, or a
    directory larger than theirs, before `zipfile` parses that directory entry by entry. Found
    as `zipfile` finds it (at the end, else the last signature in the comment's reach); a zip
    without one is left to `zipfile` to refuse."""
    size = stream.seek(0, io.SEEK_END)
    start = max(0, size - _END.size - 0xFFFF)
    stream.seek(start)
    tail = stream.read()
    at = len(tail) - _END.size
    if at < 0 or tail[at : at + 4] != b"PK\x05\x06":
        at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + _END.size > len(tail):
        return
    fields = _END.unpack_from(tail, at)
    entries, directory = fields[4], fields[5]
    locator = start + at - _END64_LOCATOR.size
    if locator >= 0:
        stream.seek(locator)
        found = stream.read(_END64_LOCATOR.size)
        if len(found) == _END64_LOCATOR.size and found[:4] == b"PK\x06\x07":
            stream.seek(_END64_LOCATOR.unpack(found)[2])
            record = stream.read(_END64.size)
            if len(record) == _END64.size and record[:4] == b"PK\x06\x06":
                entries, directory = _END64.unpack(record)[7:9]
    _check_members(path, entries)
    if directory > MAX_DIRECTORY_BYTES:
        raise InputError(
            f"{path}: its zip directory takes {directory} bytes, above the limit of "
            f"{MAX_DIRECTORY_BYTES} for {MAX_TENSOR_MEMBERS} arrays; store fewer arrays"
        )


def _check_members(path: Path, members: int) -> None:
    if members > MAX_TENSOR_MEMBERS:
        raise InputError(
            f"{path}: holds {members} arrays, above the limit of {MAX_TENSOR_MEMBERS}; a "
            "tensor file holds one array per model input or output"
        )


def _check_npy_header(path: Path, what: str, stream: IO[bytes], stored: int) -> None:
    """The array a `.npy` header declares must fit the element limit and the bytes stored."""
    try:
        version = np.lib.format.read_magic(stream)
        read_header = (
            np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read_header(stream)
    except (ValueError, EOFError, OSError, SyntaxError) as error:
        raise InputError(f"{path}: {what} has no readable .npy header ({_one_line(error)})") from None
    elements = int(np.prod(shape, dtype=np.float64))
    if elements > MAX_FIXTURE_ELEMENTS:
        raise InputError(
            f"{path}: {what} declares shape {list(shape)} ({elements:.3g} elements), above the "
            f"limit of {MAX_FIXTURE_ELEMENTS}; store smaller tensors"
        )
    if not dtype.hasobject and elements * dtype.itemsize > stored:
        raise InputError(
            f"{path}: {what} declares shape {list(shape)} of {dtype} but the file holds only "
            f"{stored} bytes; it is truncated or forged, write it again"
        )


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def concrete_shape(spec: TensorSpec, overrides: Mapping[str, list[int]], model: str) -> list[int]:
    """The input's shape with symbolic dims replaced by the fixture spec's `shapes`."""
    if spec.name in overrides:
        shape = list(overrides[spec.name])
        if len(shape) != len(spec.shape) or any(
            isinstance(dim, int) and dim != size for dim, size in zip(spec.shape, shape, strict=True)
        ):
            raise InputError(
                f"model {model!r}: fixtures.shapes.{spec.name} = {shape} does not fit the "
                f"declared shape {spec.shape}"
            )
        return shape
    if not spec.is_static:
        raise InputError(
            f"model {model!r}: input {spec.name!r} has symbolic dims {spec.shape}; set "
            f"fixtures.shapes.{spec.name} in the intent file"
        )
    return [int(dim) for dim in spec.shape]


FIXTURE_DTYPES = frozenset(
    [
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
    ]
)
"""Input dtypes fixtures can be made and saved for (numpy's own, no pickle); onnxruntime and the
toolkit take no other (bfloat16, float8 and 4-bit types, strings, complex)."""


def check_fixture_dtypes(inputs: list[TensorSpec], model: str) -> None:
    """Refuse, at lock, an input no fixture can feed: otherwise the backends fail on it one by one
    and the failure reads as the model not compiling."""
    for tensor in inputs:
        if tensor.dtype not in FIXTURE_DTYPES:
            raise InputError(
                f"model {model!r}: input {tensor.name!r} has dtype {tensor.dtype}, which baseline cannot "
                f"make fixtures for (supported: {', '.join(sorted(FIXTURE_DTYPES))}); "
                "export the model with a supported input type"
            )


def check_fixture_shapes(
    inputs: list[TensorSpec], shapes: Mapping[str, object], where: str, key: str = "shapes"
) -> None:
    """Refuse `fixtures.shapes` (or `ranges`) naming no input of the model: a misspelt name sized
    nothing, and the dynamic dimension it meant was guessed."""
    names = [tensor.name for tensor in inputs]
    for name in shapes:
        if name not in names:
            raise InputError(
                f"{where}.fixtures.{key}.{name}: the model has no input {name!r}"
                f"{did_you_mean(name, names)} (its inputs: {', '.join(names)})"
            )


def generate_fixtures(inputs: list[TensorSpec], spec: FixtureSpec, model: str) -> TensorSet:
    """Deterministic random inputs from `spec.seed`, one array per input, sample axis first."""
    rng = np.random.default_rng(spec.seed)
    fixtures: TensorSet = {}
    for tensor in inputs:
        shape = (spec.samples, *concrete_shape(tensor, spec.shapes, model))
        _check_size(shape, f"model {model!r}: input {tensor.name!r}")
        span = spec.ranges.get(tensor.name, (spec.low, spec.high))
        fixtures[tensor.name] = _random_array(rng, np.dtype(tensor.dtype), shape, span)
    return fixtures


def _random_array(
    rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...], span: tuple[float, float]
) -> np.ndarray:
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        low = int(np.ceil(span[0]))
        return rng.integers(low, max(int(np.ceil(span[1])), low + 1), size=shape, dtype=dtype)
    return rng.uniform(span[0], span[1], size=shape).astype(dtype)


def _check_size(shape: tuple[int, ...], what: str) -> None:
    elements = int(np.prod(shape, dtype=np.float64))
    if elements > MAX_FIXTURE_ELEMENTS:
        raise InputError(
            f"{what}: shape {list(shape)} has {elements:.3g} elements, above the limit of "
            f"{MAX_FIXTURE_ELEMENTS}; fix the declared shape or fixtures.shapes"
        )


def fixtures_from_file(path: Path, inputs: list[TensorSpec], spec: FixtureSpec, model: str) -> TensorSet:
    """User-supplied inputs checked against the model's; a missing sample axis is added."""
    arrays = load_tensors(path)
    if len(inputs) == 1 and path.suffix == ".npy":
        arrays = {inputs[0].name: next(iter(arrays.values()))}
    expected = [tensor.name for tensor in inputs]
    if sorted(arrays) != sorted(expected):
        raise InputError(
            f"{path}: holds arrays {sorted(arrays)}, model {model!r} has inputs {expected}; "
            "name one array per input"
        )
    return {tensor.name: _fit_fixture(path, arrays[tensor.name], tensor, spec, model) for tensor in inputs}


def _fit_fixture(
    path: Path, array: np.ndarray, tensor: TensorSpec, spec: FixtureSpec, model: str
) -> np.ndarray:
    if array.dtype != np.dtype(tensor.dtype):
        raise InputError(
            f"{path}: array {tensor.name!r} is {array.dtype}, model {model!r} expects "
            f"{tensor.dtype}; convert it with .astype('{tensor.dtype}')"
        )
    shape = concrete_shape(tensor, spec.shapes, model) if tensor.is_static or spec.shapes else None
    stacked = array[np.newaxis] if array.ndim == len(tensor.shape) else array
    if stacked.ndim != len(tensor.shape) + 1 or (shape is not None and list(stacked.shape[1:]) != shape):
        raise InputError(
            f"{path}: array {tensor.name!r} has shape {list(array.shape)}, model {model!r} "
            f"expects {tensor.shape} (optionally with a leading sample axis)"
        )
    return stacked
