"""Fingerprint masking on bytes, without the toolkit: what is masked, what still counts."""

from __future__ import annotations

import hashlib
import json
import random
import struct
from pathlib import Path

import pytest

from baseline.errors import InputError
from baseline.files.rknn_file import (
    HEADER_SIZE,
    POINTER_FIELDS,
    ROOT_GRAPHS,
    TENSOR_NAME,
    TENSOR_SHAPE,
    _secondary_shape_ranges,
    _split,
    _used_bytes,
    fingerprint_gap,
    masked_sha256,
    read_rknn,
)
from tests.conftest import REPO

DEMO_RKNN = next((REPO / "fixtures" / "demo" / "tensors" / "classifier").glob("rk3588.*.rknn"))


def flatbuffer(strings: dict[int, str]) -> bytes:
    """A FlatBuffer whose root table holds `strings` in the given slots (enough for format 0x1004)."""
    slots = max(strings) + 1
    vtable = struct.pack(f"<HH{slots}H", 4 + 2 * slots, 4 + 4 * len(strings), *[0] * slots)
    vtable_at, table_at = 8, 8 + len(vtable) + (8 + len(vtable)) % 4
    fields, blobs = bytearray(), bytearray()
    strings_at = table_at + 4 + 4 * len(strings)
    offsets = list(struct.unpack_from(f"<{slots}H", vtable, 4))
    for index, (slot, text) in enumerate(sorted(strings.items())):
        offsets[slot] = 4 + 4 * index
        field_at = table_at + offsets[slot]
        fields += struct.pack("<I", strings_at + len(blobs) - field_at)
        encoded = text.encode()
        blobs += struct.pack("<I", len(encoded)) + encoded + b"\0" * (4 - len(encoded) % 4)
    vtable = vtable[:4] + struct.pack(f"<{slots}H", *offsets)
    head = struct.pack("<I", table_at) + b"RKNN" + vtable
    head += b"\0" * (table_at - len(head))
    return head + struct.pack("<i", table_at - vtable_at) + bytes(fields) + bytes(blobs)


ATTRS = {
    "attrs": {
        "image": {"idx": 0, "dtype": "float32", "layout": "nchw", "is_output": False},
        "logits": {"idx": 0, "dtype": "float32", "layout": "nchw", "is_output": True},
    }
}


def sections_file(platform: str = "rv1106", sections: bytes = b"\x11" * 64, junk: bytes = b"") -> bytes:
    """A format-0x1004 file: header (with pointers), section table and sections, FlatBuffer, JSON."""
    fb = flatbuffer({3: repr(ATTRS), 5: "2.5.0(compiler version: 2.5.0 (x))", 6: platform}) + junk
    payload = struct.pack("<8I", len(fb), 832, 20, 0, len(sections), 0, 0, 0) + sections + fb
    header = b"RKNN" + b"\0" * 4 + struct.pack("<QQ", 0x1004, len(payload))
    header += struct.pack("<3Q", 0x7F1100001234, 0x7FFF00005678, 0x7F110000ABCD)
    header += b"\0" * (HEADER_SIZE - len(header))
    summary = {
        "version": "2.5.0",
        "target_platform": [platform],
        "norm_tensor": [{"url": "image", "size": [1, 3, 32, 32]}, {"url": "logits", "size": [1, 10]}],
    }
    trailer = json.dumps(summary).encode()
    return header + payload + struct.pack("<Q", len(trailer)) + trailer


def write(tmp_path: Path, data: bytes, name: str = "model.rknn") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_sections_format_reads_io_and_fingerprints_the_stable_parts(tmp_path: Path) -> None:
    metadata = read_rknn(write(tmp_path, sections_file()))
    assert metadata.format_version == 0x1004 and metadata.target_platforms == ["rv1106"]
    assert [(t.name, t.dtype, t.shape) for t in metadata.inputs] == [("image", "float32", [1, 3, 32, 32])]
    assert [t.name for t in metadata.outputs] == ["logits"] and metadata.compiler_version == "2.5.0 (x)"
    assert metadata.fingerprint is not None


def test_sections_fingerprint_ignores_pointers_and_flatbuffer_layout_but_not_weights(tmp_path: Path) -> None:
    base = read_rknn(write(tmp_path, sections_file())).fingerprint
    moved = bytearray(sections_file(junk=b"\0" * 8))  # the FlatBuffer grows, as between conversions
    moved[0x18:0x30] = b"\x99" * 0x18  # other heap, stack and library addresses
    assert read_rknn(write(tmp_path, bytes(moved))).fingerprint == base
    retrained = sections_file(sections=b"\x11" * 63 + b"\x12")
    assert read_rknn(write(tmp_path, retrained)).fingerprint != base


def test_unstable_platform_gets_no_fingerprint_and_a_reason(tmp_path: Path) -> None:
    metadata = read_rknn(write(tmp_path, sections_file(platform="rv1106b")))
    assert metadata.fingerprint is None
    assert fingerprint_gap(metadata) == (
        "rv1106b builds get no fingerprint: its compiled sections differ between identical conversions"
    )
    unknown = metadata.model_copy(update={"format_version": 7, "target_platforms": ["rk9999"]})
    assert "format 7 is not fingerprinted" in (fingerprint_gap(unknown) or "")


def pointer_entry_fields(data: bytes, fields: tuple[int, ...]) -> list[int]:
    """Absolute positions of the given fields in the rk3588 graph's slot-9 pointer entries."""
    fb = _split(data, DEMO_RKNN).flatbuffer
    positions = []
    for graph in fb.tables(fb.root(), ROOT_GRAPHS):
        for table in fb.tables(graph, 9):
            for entry in fb.tables(table, 1):
                positions += [HEADER_SIZE + p for f in fields if (p := fb.field(entry, f)) is not None]
    return positions


def flipped(data: bytes, position: int) -> bytes:
    changed = bytearray(data)
    changed[position] ^= 0xFF
    return bytes(changed)


def test_flatbuffer_pointers_are_masked_and_weights_are_not(tmp_path: Path) -> None:
    data = DEMO_RKNN.read_bytes()
    base = read_rknn(write(tmp_path, data)).fingerprint
    [pointer, *_] = pointer_entry_fields(data, POINTER_FIELDS[9])
    assert read_rknn(write(tmp_path, flipped(data, pointer + 3))).fingerprint == base
    weight = data.index(b"conv1.weight")  # any byte outside the masked regions counts
    assert read_rknn(write(tmp_path, flipped(data, weight))).fingerprint != base


def test_native_shapes_of_activation_copies_are_masked_and_others_are_not(tmp_path: Path) -> None:
    """A bidirectional GRU's `*_exSecondary` state copy held a different (uninitialised) native
    dimension in each of six identical conversions; the tensor it copies keeps its shape."""
    data = DEMO_RKNN.read_bytes()
    base = read_rknn(write(tmp_path, data)).fingerprint
    fb = _split(data, DEMO_RKNN).flatbuffer
    copies = _secondary_shape_ranges(fb)
    assert copies, "the demo classifier has activation copies"
    start, _ = copies[0]
    assert read_rknn(write(tmp_path, flipped(data, HEADER_SIZE + start))).fingerprint == base
    primaries = [
        fb.deref(position) + 4
        for tensor in fb.tables(fb.tables(fb.root(), ROOT_GRAPHS)[0], 0)
        if "_exSecondary" not in (fb.string(tensor, TENSOR_NAME) or "")
        and (position := fb.field(tensor, TENSOR_SHAPE)) is not None
    ]
    assert read_rknn(write(tmp_path, flipped(data, HEADER_SIZE + primaries[0]))).fingerprint != base


def test_rk3566_masks_the_pointer_halves_rk3588_keeps_as_offsets(tmp_path: Path) -> None:
    rk3588 = DEMO_RKNN.read_bytes()
    rk3566 = rk3588.replace(b"rk3588", b"rk3566")  # same length: only the platform changes
    [half, *_] = pointer_entry_fields(rk3588, (9,))
    assert (
        read_rknn(write(tmp_path, flipped(rk3566, half))).fingerprint
        == read_rknn(write(tmp_path, rk3566, "base.rknn")).fingerprint
    )
    assert (
        read_rknn(write(tmp_path, flipped(rk3588, half))).fingerprint
        != read_rknn(write(tmp_path, rk3588, "base.rknn")).fingerprint
    )


def test_two_tile_shapes_count_both_tiles_only_when_the_product_overflows() -> None:
    reduce_weight = [1, 1, 1, 1, 8, 4, 1, 1, 1, 1, 2, 4]  # rk3562: 40 fp16 values in a 160-byte buffer
    assert _used_bytes(reduce_weight, 2, 160) == 80
    pool = [1, 0, 7, 7, 1, 32, 1, 1, 7, 7, 1, 16]  # rk3588: product 0, the whole buffer is slack
    assert _used_bytes(pool, 2, 2048) == 0
    assert _used_bytes([1, 1, 3, 3, 8, 4], 2, 576) == 576


def test_masked_hash_clamps_ranges_to_the_file() -> None:
    expected = hashlib.sha256(b"\0\0cd\0\0").hexdigest()
    assert masked_sha256(b"abcdef", [(-4, 2), (4, 1 << 40), (3, 1)]) == expected


def test_masked_hash_is_the_hash_of_the_masked_bytes_for_any_ranges() -> None:
    """Overlapping, nested, unsorted, empty and out-of-bounds ranges, and a range longer than
    the block of zeros the hash is fed from: the same digest as zeroing a copy."""
    rng = random.Random(7)
    for _ in range(300):
        data = rng.randbytes(rng.randrange(0, 200_000))
        ranges = [
            (rng.randrange(-10, len(data) + 10), rng.randrange(-10, len(data) + 10))
            for _ in range(rng.randrange(6))
        ]
        masked = bytearray(data)
        for start, end in ranges:
            start, end = max(0, start), min(len(data), end)
            masked[start : max(start, end)] = bytes(max(0, end - start))
        assert masked_sha256(data, ranges) == hashlib.sha256(masked).hexdigest(), ranges


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d[:100],
        lambda d: d[:HEADER_SIZE] + b"\xff" * 4 + d[HEADER_SIZE + 4 :],
        lambda d: d[:0x10] + struct.pack("<Q", 1 << 60) + d[0x18:],
    ],
)
def test_damaged_files_are_one_line_errors(tmp_path: Path, damage: object) -> None:
    for source in (DEMO_RKNN.read_bytes(), sections_file()):
        with pytest.raises(InputError, match=r"^\S+: .*(convert it again|no RKNN header)"):
            read_rknn(write(tmp_path, damage(source)))  # type: ignore[operator]


def test_artifact_gate_compares_the_contract_alone_without_a_fingerprint(tmp_path: Path) -> None:
    from baseline.gates.artifact import _match_summary, contract_differences

    unstable = read_rknn(write(tmp_path, sections_file(platform="rv1106b")))
    locked = unstable.model_copy(update={"fingerprint": "0" * 64})  # pinned by an older baseline
    assert contract_differences(locked, unstable) == []
    assert "weights not compared: rv1106b builds get no fingerprint" in _match_summary(locked, unstable)


def test_an_onnx_output_the_toolkit_left_out_when_locked_is_no_difference_later() -> None:
    from baseline.gates.artifact import build_differences
    from baseline.project.lockfile import load_lock

    model = load_lock(REPO / "lockfiles" / "demo" / "baseline.lock").model("classifier")
    assert model is not None
    built = model.conversions[0].metadata
    without_probs = built.model_copy(update={"outputs": [t for t in built.outputs if t.name != "probs"]})
    # left out at lock and again now: how this model builds (the summary says so), not a change
    assert build_differences(model, without_probs, without_probs) == (
        [],
        ["ONNX output 'probs' is missing from the built model"],
    )
    # present at lock, gone now: a difference
    differences, _ = build_differences(model, built, without_probs)
    assert "ONNX output 'probs' is missing from the built model" in differences
    assert "output 'probs' disappeared" in differences


def test_the_graph_outputs_a_cut_leaves_out_are_not_missing_from_the_build() -> None:
    """`load_onnx(outputs=[...])` builds only those tensors (rembg's U^2-Net keeping its saliency map
    of seven outputs): the others are the intent's choice, and a cut tensor lost is still reported."""
    from baseline.gates.artifact import build_differences
    from baseline.models.base import replaced
    from baseline.models.intent import ConversionSpec
    from baseline.project.lockfile import load_lock

    model = load_lock(REPO / "lockfiles" / "demo" / "baseline.lock").model("classifier")
    assert model is not None
    conversion = ConversionSpec(load_onnx={"outputs": ["logits"]})
    cut = replaced(model, targets=[replaced(t, conversion=conversion) for t in model.targets])
    built = model.conversions[0].metadata
    only_logits = built.model_copy(update={"outputs": [t for t in built.outputs if t.name == "logits"]})
    assert build_differences(cut, only_logits, only_logits) == ([], [])
    neither = built.model_copy(update={"outputs": [t for t in built.outputs if t.name == "probs"]})
    differences, _ = build_differences(cut, only_logits, neither)
    assert "ONNX output 'logits' is missing from the built model" in differences
