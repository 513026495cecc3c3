from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from baseline.errors import InputError
from baseline.models.intent import FixtureSpec
from baseline.models.tensors import TensorSpec
from baseline.tensors import (
    MAX_FIXTURE_ELEMENTS,
    fixtures_from_file,
    generate_fixtures,
    load_tensors,
    npz_bytes,
    save_npz,
)

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


def test_symbolic_dims_need_fixture_shapes() -> None:
    dynamic = TensorSpec(name="x", dtype="float32", shape=["N", 3])
    with pytest.raises(InputError, match="fixtures.shapes.x"):
        generate_fixtures([dynamic], FixtureSpec(), "m")
    arrays = generate_fixtures([dynamic], FixtureSpec(shapes={"x": [2, 3]}), "m")
    assert arrays["x"].shape == (1, 2, 3)


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
