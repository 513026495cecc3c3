from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from baseline.errors import InputError
from baseline.files.tensors import (
    MAX_FIXTURE_ELEMENTS,
    check_fixture_shapes,
    fixtures_from_file,
    generate_fixtures,
    load_tensors,
    npz_bytes,
    save_npz,
)
from baseline.models.intent import FixtureSpec
from baseline.models.tensors import TensorSpec

IMAGE = TensorSpec(name="image", dtype="float32", shape=[1, 3, 4, 4])


def test_npz_bytes_depend_only_on_the_arrays(tmp_path: Path) -> None:
    arrays: dict[str, np.ndarray] = {
        "a": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": np.ones(3, dtype=np.int64),
    }
    save_npz(tmp_path / "x.npz", arrays)
    assert (tmp_path / "x.npz").read_bytes() == npz_bytes(dict(arrays))
    loaded = load_tensors(tmp_path / "x.npz")
    assert list(loaded) == ["a", "b"]
    np.testing.assert_array_equal(loaded["a"], arrays["a"])


def test_pickled_npy_is_refused_without_unpickling(tmp_path: Path) -> None:
    path = tmp_path / "evil.npy"
    np.save(path, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="pickle"):
        load_tensors(path)


def test_pickle_file_named_npz_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "evil.npz"
    path.write_bytes(pickle.dumps({"image": [1, 2, 3]}))
    with pytest.raises(InputError, match="evil.npz"):
        load_tensors(path)


def test_generated_fixtures_are_deterministic_and_in_range() -> None:
    spec = FixtureSpec(seed=7, samples=3, low=-1.0, high=1.0)
    first = generate_fixtures([IMAGE], spec, "m")
    second = generate_fixtures([IMAGE], spec, "m")
    assert first["image"].shape == (3, 1, 3, 4, 4) and first["image"].dtype == np.float32
    np.testing.assert_array_equal(first["image"], second["image"])
    assert first["image"].min() >= -1.0 and first["image"].max() < 1.0


def test_integer_and_bool_fixtures() -> None:
    specs = [
        TensorSpec(name="ids", dtype="int64", shape=[2, 5]),
        TensorSpec(name="mask", dtype="bool", shape=[5]),
    ]
    arrays = generate_fixtures(specs, FixtureSpec(low=0, high=10), "m")
    assert arrays["ids"].dtype == np.int64 and arrays["ids"].min() >= 0 and arrays["ids"].max() < 10
    assert arrays["mask"].dtype == np.bool_


def test_an_input_with_its_own_range_draws_from_it_and_the_rest_keep_low_and_high() -> None:
    specs = [TensorSpec(name=n, dtype="int64", shape=[64]) for n in ("ids", "types", "mask")]
    spec = FixtureSpec(low=0, high=2, ranges={"ids": (100, 200), "mask": (1, 2)})
    arrays = generate_fixtures(specs, spec, "m")
    assert arrays["ids"].min() >= 100 and arrays["ids"].max() < 200
    assert (arrays["mask"] == 1).all() and set(np.unique(arrays["types"])) == {0, 1}
    with pytest.raises(ValidationError, match=r"fixtures.ranges.mask: high \(1.0\) must be greater than low"):
        FixtureSpec(ranges={"mask": (1, 1)})
    with pytest.raises(
        InputError, match=r"models.m.fixtures.ranges.msk: the model has no input 'msk'; did you"
    ):
        check_fixture_shapes(specs, {"msk": (1, 2)}, "baseline.toml: models.m", key="ranges")


def test_symbolic_dims_need_fixture_shapes() -> None:
    dynamic = TensorSpec(name="x", dtype="float32", shape=["N", 3])
    with pytest.raises(InputError, match="fixtures.shapes.x"):
        generate_fixtures([dynamic], FixtureSpec(), "m")
    arrays = generate_fixtures([dynamic], FixtureSpec(shapes={"x": [2, 3]}), "m")
    assert arrays["x"].shape == (1, 2, 3)


def test_fixture_shapes_naming_no_input_are_refused_with_the_inputs() -> None:
    """A misspelt `fixtures.shapes` key sized nothing and was accepted without a word."""
    inputs = [TensorSpec(name="image", dtype="float32", shape=["N", 3, 32, 32])]
    check_fixture_shapes(inputs, {"image": [1, 3, 32, 32]}, "baseline.toml: models.m")
    with pytest.raises(InputError) as refused:
        check_fixture_shapes(inputs, {"img": [1, 3, 32, 32]}, "baseline.toml: models.m")
    assert str(refused.value) == (
        "baseline.toml: models.m.fixtures.shapes.img: the model has no input 'img'; "
        "did you mean 'image'? (its inputs: image)"
    )


def test_huge_declared_shape_is_refused_before_allocating() -> None:
    huge = TensorSpec(name="x", dtype="float32", shape=[1 << 20, 1 << 20])
    with pytest.raises(InputError, match=f"limit of {MAX_FIXTURE_ELEMENTS}"):
        generate_fixtures([huge], FixtureSpec(), "m")


def test_user_fixtures_get_a_sample_axis_and_checked_dtype(tmp_path: Path) -> None:
    np.savez(tmp_path / "in.npz", image=np.zeros((1, 3, 4, 4), dtype=np.float32))
    arrays = fixtures_from_file(tmp_path / "in.npz", [IMAGE], FixtureSpec(), "m")
    assert arrays["image"].shape == (1, 1, 3, 4, 4)
    np.savez(tmp_path / "bad.npz", image=np.zeros((1, 3, 4, 4), dtype=np.float64))
    with pytest.raises(InputError, match="float64.*expects float32.*astype"):
        fixtures_from_file(tmp_path / "bad.npz", [IMAGE], FixtureSpec(), "m")


def test_user_fixtures_with_wrong_names_or_shapes(tmp_path: Path) -> None:
    np.savez(tmp_path / "names.npz", img=np.zeros((1, 3, 4, 4), dtype=np.float32))
    with pytest.raises(InputError, match="one array per input"):
        fixtures_from_file(tmp_path / "names.npz", [IMAGE], FixtureSpec(), "m")
    np.save(tmp_path / "shape.npy", np.zeros((1, 3, 5, 5), dtype=np.float32))
    with pytest.raises(InputError, match=r"shape \[1, 3, 5, 5\]"):
        fixtures_from_file(tmp_path / "shape.npy", [IMAGE], FixtureSpec(), "m")


def many_members(path: Path, count: int) -> None:
    save_npz(path, {f"a{index}": np.zeros(1, np.float32) for index in range(count)})


def test_too_many_arrays_are_refused_before_the_zip_directory_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31: a 100,000-member reference file took 41 s to refuse (every member opened, then
    `np.load`'s lookup by name, quadratic). The count is read from the zip's end record."""
    import zipfile

    from baseline.files import tensors

    path = tmp_path / "many.npz"
    many_members(path, 5)
    monkeypatch.setattr(tensors, "MAX_TENSOR_MEMBERS", 4)
    monkeypatch.setattr(zipfile, "ZipFile", _never_parse)
    with pytest.raises(InputError, match=r"many.npz: holds 5 arrays, above the limit of 4;") as raised:
        load_tensors(path)
    assert "\n" not in str(raised.value)


def _never_parse(*args: object, **kwargs: object) -> None:
    raise AssertionError("the zip's directory was parsed before its members were counted")


def test_a_zip64_end_record_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past 65,535 members a zip says 0xFFFF in its end record and the count in the zip64 one."""
    import zipfile

    from baseline.files import tensors

    path = tmp_path / "zip64.npz"
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 2)  # a zip64 end record for 3 members
    many_members(path, 3)
    monkeypatch.undo()
    assert b"PK\x06\x06" in path.read_bytes()[-200:]
    monkeypatch.setattr(tensors, "MAX_TENSOR_MEMBERS", 3)
    assert sorted(load_tensors(path)) == ["a0", "a1", "a2"]
    monkeypatch.setattr(tensors, "MAX_TENSOR_MEMBERS", 2)
    with pytest.raises(InputError, match="holds 3 arrays"):
        load_tensors(path)


def test_a_directory_larger_than_its_count_allows_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end record's count can lie; the directory's size is what `zipfile` reads."""
    from baseline.files import tensors

    path = tmp_path / "long.npz"
    save_npz(path, {"n" * 900: np.zeros(1, np.float32), "m" * 900: np.zeros(1, np.float32)})
    monkeypatch.setattr(tensors, "MAX_DIRECTORY_BYTES", 1024)
    with pytest.raises(InputError, match="zip directory takes"):
        load_tensors(path)


def test_arrays_are_read_without_np_load_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each member is read once, in order, as `np.load` names them: no lookup by name, whose list
    scan made 100,000 members quadratic."""
    path = tmp_path / "pair.npz"
    arrays = {"image": np.arange(6, dtype=np.float32).reshape(2, 3), "mask": np.array([True, False])}
    save_npz(path, arrays)
    expected = dict(np.load(path, allow_pickle=False))
    monkeypatch.setattr(np, "load", _never_load)
    loaded = load_tensors(path)
    assert list(loaded) == list(expected) == ["image", "mask"]
    for name, array in loaded.items():
        assert array.dtype == expected[name].dtype and np.array_equal(array, expected[name])


def _never_load(*args: object, **kwargs: object) -> None:
    raise AssertionError("np.load read an .npz")
