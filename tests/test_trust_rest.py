"""Issue 14, the last "also (low)" items: crafted `.rknn` trailers, odd paths, deep manifests,
broken toolkit markers, bad fixture dtypes, long model names, external data in subgraphs,
provenance without git and unbounded board strings. None needs the toolkit."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from pydantic import ValidationError

from baseline.backends.base import BackendJob
from baseline.backends.rknn_sim import _build_request
from baseline.backends.rknnlite import _manifest
from baseline.errors import ConfigError, InputError
from baseline.files.onnx_facts import check_external_data
from baseline.files.rknn_file import read_rknn
from baseline.models.intent import TargetSpec, ToolkitSettings
from baseline.models.lock import MAX_BOARD_FIELD, ObservedBoard
from baseline.project.paths import MAX_NAME_LENGTH, resolve_in_project
from baseline.toolchain import provision
from tests.test_limits import loop_model
from tests.test_rknn_file import sections_file
from tests.test_trust import assert_refused

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def with_trailer(data: bytes, summary: Any) -> bytes:
    """`data` (a valid .rknn) with its JSON trailer replaced by `summary`."""
    (payload,) = struct.unpack_from("<Q", data, 0x10)
    trailer = json.dumps(summary).encode()
    return data[: 0x40 + payload] + struct.pack("<Q", len(trailer)) + trailer


def read_or_refuse(path: Path) -> None:
    """Reading a crafted file either works or is one InputError naming the file."""
    try:
        read_rknn(path)
    except InputError as error:
        assert str(error).startswith(str(path)) and "\n" not in str(error)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    field=st.sampled_from(["version", "target_platform", "norm_tensor", None]),
    value=JSON,
    tensor=JSON,
)
def test_crafted_rknn_trailers_are_read_or_refused(
    tmp_path: Path, field: str | None, value: Any, tensor: Any
) -> None:
    summary: dict[str, Any] = {"version": "2.5.0", "target_platform": ["rv1106"], "norm_tensor": [tensor]}
    crafted = value if field is None else {**summary, field: value}
    read_or_refuse_bytes(tmp_path, with_trailer(sections_file(), crafted))


def read_or_refuse_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "crafted.rknn"
    path.write_bytes(data)
    read_or_refuse(path)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 400), junk=st.binary(max_size=16))
def test_truncated_or_patched_rknn_files_are_read_or_refused(tmp_path: Path, cut: int, junk: bytes) -> None:
    data = sections_file()
    read_or_refuse_bytes(tmp_path, data[:cut] + junk + data[cut + len(junk) :])
    read_or_refuse_bytes(tmp_path, data[:cut])


CRAFTED = [
    {"version": "2.5.0", "target_platform": 7},
    {"version": "2.5.0", "target_platform": ["rv1106"], "norm_tensor": [{"url": ["x"], "size": [1]}]},
    {"version": "2.5.0", "target_platform": ["rv1106"], "norm_tensor": [{"url": "image", "size": [{}]}]},
    {"version": "2.5.0", "target_platform": ["rv1106"], "norm_tensor": [{"url": "image", "size": 5}]},
    {"version": "[bold]x", "target_platform": ["rv1106"], "x": [[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]},
]


@pytest.mark.parametrize("summary", CRAFTED)
def test_compat_on_a_crafted_trailer_is_one_line_or_a_verdict(tmp_path: Path, cli, summary: Any) -> None:
    path = tmp_path / "crafted.rknn"
    path.write_bytes(with_trailer(sections_file(), summary))
    code, out, err = cli(tmp_path, "compat", str(path), "--platform", "rv1106")
    if code == 2:
        assert_refused(code, out, err, "crafted.rknn")
    else:
        assert code in (0, 1) and "Traceback" not in out + err, out + err


def test_compat_on_a_deeply_nested_trailer_is_one_line(tmp_path: Path, cli) -> None:
    path = tmp_path / "deep.rknn"
    data = sections_file()
    (payload,) = struct.unpack_from("<Q", data, 0x10)
    trailer = b"[" * 100_000 + b"]" * 100_000
    path.write_bytes(data[: 0x40 + payload] + struct.pack("<Q", len(trailer)) + trailer)
    code, out, err = cli(tmp_path, "compat", str(path))
    assert_refused(code, out, err, "deep.rknn", "convert it again")


def onnxruntime_project(root: Path, onnx_path: str = "models/looper.onnx", name: str = "looper") -> Path:
    """An onnxruntime-only project (no toolkit) whose model is a small Loop, not yet locked."""
    (root / "models").mkdir(parents=True, exist_ok=True)
    onnx.save(loop_model(3), root / "models" / "looper.onnx")
    intent = '[defaults]\nbackends = ["onnxruntime"]\n\n[[models]]\n'
    intent += f'name = "{name}"\nonnx = {json.dumps(onnx_path)}\n'
    (root / "baseline.toml").write_text(intent)
    return root


@pytest.mark.parametrize("relative", ["", " ", ".", "models/..", "models/\0looper.onnx"])
def test_degenerate_paths_are_one_line_errors(tmp_path: Path, relative: str) -> None:
    with pytest.raises(
        ConfigError, match=r"^baseline.toml: models\[0\].onnx: path .*(empty|NUL|project folder)"
    ):
        resolve_in_project(tmp_path, relative, "baseline.toml: models[0].onnx", file=True)


@pytest.mark.parametrize("relative", ["", ".", "models/\0looper.onnx"])
def test_lock_with_a_degenerate_model_path_is_one_line(tmp_path: Path, cli, relative: str) -> None:
    root = onnxruntime_project(tmp_path / "project", relative)
    code, out, err = cli(root, "lock")
    assert_refused(code, out, err, ".onnx")
    assert not (root / "baseline.lock").exists()


@pytest.mark.parametrize(
    "text",
    [
        '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"model_sha256": "x", "extra": ' + "[" * 50 + "]" * 50 + "}",
        '{"pad": "' + "x" * (2 << 20) + '"}',
    ],
)
def test_deep_or_huge_capture_manifests_are_one_line_errors(tmp_path: Path, text: str) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(text)
    with pytest.raises(InputError, match=r"manifest.json: capture manifest is (nested too deeply|larger)"):
        _manifest(path)


def test_a_flat_capture_manifest_is_read(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"model_sha256": "a", "inputs_sha256": "b", "outputs": {"y": [1, 2]}}))
    assert _manifest(path)["model_sha256"] == "a"


BAD_MARKERS = [
    "[1, 2]",
    '{"version": "2.3.2", "python": "3.11", "packages": ["rknn-toolkit2"]}',
    '{"version": 232, "python": "3.11", "packages": {}}',
    '{"version": "2.3.2", "python": "3.11", "packages": {"numpy": [1]}}',
    '{"version": "2.3.2", "python": "3.11", "packages": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "\udcff",
]


@pytest.mark.parametrize("marker", BAD_MARKERS)
def test_a_malformed_toolkit_marker_is_a_half_built_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli, marker: str
) -> None:
    monkeypatch.setenv(provision.CACHE_ENV, str(tmp_path / "toolchains"))
    folder = provision.environment_dir("2.3.2")
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").touch()
    (folder / provision.MARKER).write_bytes(marker.encode("utf-8", "surrogateescape"))
    assert provision.find_toolchain("2.3.2") is None
    assert provision.environment_version(folder) is None
    code, out, err = cli(tmp_path, "toolchain", "list")
    assert code == 0 and "Traceback" not in out + err, out + err
    assert f"{folder.name}: half-built (no valid {provision.MARKER})" in out.replace("\n", "")
    code, out, err = cli(tmp_path, "env")
    assert code == 0 and "Traceback" not in out + err, out + err


def identity_project(root: Path, elem_type: int) -> Path:
    """An onnxruntime-only project whose model's input has `elem_type`, not yet locked."""
    (root / "models").mkdir(parents=True)
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", elem_type, [1, 4])],
        [helper.make_tensor_value_info("y", elem_type, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, root / "models" / "m.onnx")
    intent = '[defaults]\nbackends = ["onnxruntime"]\n\n[[models]]\nname = "m"\nonnx = "models/m.onnx"\n'
    (root / "baseline.toml").write_text(intent)
    return root


@pytest.mark.parametrize(
    ("elem_type", "dtype"),
    [
        (TensorProto.BFLOAT16, "bfloat16"),
        (TensorProto.STRING, "object"),
        (TensorProto.COMPLEX64, "complex64"),
    ],
)
def test_an_input_no_fixture_can_feed_is_an_input_error_at_lock(
    tmp_path: Path, cli, elem_type: int, dtype: str
) -> None:
    root = identity_project(tmp_path / "project", elem_type)
    code, out, err = cli(root, "lock")
    assert_refused(code, out, err, "model 'm': input 'x' has dtype " + dtype, "cannot make fixtures")
    assert "compilable" not in out + err
    assert not (root / "baseline.lock").exists()


def test_the_longest_valid_names_make_file_names_the_file_system_accepts(tmp_path: Path) -> None:
    model, target = "m" * MAX_NAME_LENGTH, "t" * MAX_NAME_LENGTH
    job = BackendJob(
        model=model,
        onnx_path=tmp_path / "m.onnx",
        inputs={"x": np.zeros((1, 4), np.float32)},
        output_names=["y"],
        target=TargetSpec(name=target, platform="rk3588"),
        toolkit=ToolkitSettings(),
    )
    workdir = Path(tempfile.mkdtemp(dir=tmp_path, prefix=f"{model}-analysis-"))
    export = Path(_build_request(job, workdir)["export"])
    assert all(len(part.encode()) <= 255 for part in export.parts)
    export.write_bytes(b"RKNN")  # the toolkit's export would fail with ENAMETOOLONG before


def test_lock_takes_a_model_name_of_the_longest_valid_length(tmp_path: Path, cli) -> None:
    root = onnxruntime_project(tmp_path / "project", name="m" * MAX_NAME_LENGTH)
    code, out, err = cli(root, "lock")
    assert code == 0, out + err


def test_lock_without_git_says_provenance_is_missing_and_records_why(tmp_path: Path) -> None:
    root = onnxruntime_project(tmp_path / "project")
    (root / "export.py").write_text("print('export')\n")
    intent = (root / "baseline.toml").read_text()
    (root / "baseline.toml").write_text(intent + 'exporter = { script = "export.py" }\n')
    for command in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
    ):
        subprocess.run(["git", *command], cwd=root, check=True, capture_output=True)
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    env.pop("GIT_PYTHON_GIT_EXECUTABLE", None)
    result = subprocess.run(
        [sys.executable, "-m", "baseline", "lock"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning: model 'looper': git is not installed" in result.stderr
    lock = (root / "baseline.lock").read_text()
    assert 'git_gap = "git is not installed' in lock and "commit =" not in lock


@pytest.mark.parametrize("field", ["serial", "soc", "kernel", "runtime", "rknn_server"])
def test_board_strings_in_the_lock_are_bounded(field: str) -> None:
    ObservedBoard(**{"serial": "s", field: "x" * MAX_BOARD_FIELD})
    with pytest.raises(ValidationError):
        ObservedBoard(**{"serial": "s", field: "x" * (MAX_BOARD_FIELD + 1)})


def test_a_lock_with_an_unbounded_board_string_is_one_line(tmp_path: Path, cli) -> None:
    root = onnxruntime_project(tmp_path / "project")
    code, out, err = cli(root, "lock")
    assert code == 0, out + err
    lock = root / "baseline.lock"
    lock.write_text(lock.read_text() + f'\n[[boards]]\nserial = "s"\nkernel = "{"k" * 100_000}"\n')
    code, out, err = cli(root, "verify")
    assert_refused(code, out, err, "baseline.lock")


def external_tensor(name: str, location: str) -> onnx.TensorProto:
    tensor = helper.make_tensor(name, TensorProto.FLOAT, [1], [0.0])
    tensor.ClearField("float_data")
    tensor.data_location = TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value=location)
    return tensor


def model_with_nested_external_data(location: str, as_initializer: bool) -> onnx.ModelProto:
    """y = If(c) of two branches; the then-branch's weight is external, as an initializer of
    the branch or as a Constant node's tensor, inside a second If to nest it twice."""
    weight = external_tensor("w", location)
    nodes = [] if as_initializer else [helper.make_node("Constant", [], ["w"], value=weight)]
    inner = helper.make_graph(
        [*nodes, helper.make_node("Identity", ["w"], ["t"])],
        "inner",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1])],
        initializer=[weight] if as_initializer else [],
    )
    other = helper.make_graph(
        [helper.make_node("Constant", [], ["e"], value_floats=[1.0])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1])],
    )
    outer = helper.make_graph(
        [helper.make_node("If", ["c"], ["t"], then_branch=inner, else_branch=other)],
        "outer",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1])],
    )
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=outer, else_branch=other)],
        "main",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("as_initializer", [True, False])
def test_external_data_in_subgraphs_may_not_leave_the_model_folder(
    tmp_path: Path, as_initializer: bool
) -> None:
    (tmp_path / "secret.bin").write_bytes(b"\0" * 4)
    (tmp_path / "models").mkdir()
    model = model_with_nested_external_data("../secret.bin", as_initializer)
    with pytest.raises(InputError, match=r"m.onnx: initializer 'w' points outside the model's folder"):
        check_external_data(model, tmp_path / "models" / "m.onnx")


def test_missing_external_data_in_a_subgraph_is_reported(tmp_path: Path) -> None:
    model = model_with_nested_external_data("w.bin", as_initializer=True)
    with pytest.raises(InputError, match=r"external data file 'w.bin' of initializer 'w' is missing"):
        check_external_data(model, tmp_path / "m.onnx")
    (tmp_path / "w.bin").write_bytes(b"\0" * 4)
    check_external_data(model, tmp_path / "m.onnx")


def test_the_project_folder_itself_is_still_a_folder_path(tmp_path: Path) -> None:
    assert resolve_in_project(tmp_path, ".", "baseline.toml: images.path") == tmp_path.resolve()


@pytest.mark.parametrize("platform", [3588, "rk3566", [], [7], None])
def test_a_crafted_platform_is_refused_never_compatible_with_everything(
    tmp_path: Path, cli, platform: Any
) -> None:
    """`target_platform` as a number, a bare string or an empty list read as "built for nothing"
    and passed every platform check; only a list of names (or none at all) is read."""
    summary = {"version": "2.5.0", **({} if platform is None else {"target_platform": platform})}
    path = tmp_path / "crafted.rknn"
    path.write_bytes(with_trailer(sections_file(), summary))
    code, out, err = cli(tmp_path, "compat", str(path), "--platform", "rk3588")
    if platform is None:  # no claim at all: read, and said so
        assert code == 0 and "built for no platform it names" in out, out + err
    else:
        assert_refused(code, out, err, "crafted.rknn", "convert it again")


def test_fixtures_that_are_not_the_locked_file_are_not_run(tmp_path: Path, cli) -> None:
    """A pull request replacing the fixtures (arrays of another type reached the toolkit as a worker
    traceback): integrity names the file, and no backend runs on inputs the references were not
    measured on; each such gate says why in one line."""
    root = onnxruntime_project(tmp_path / "project")
    (root / "pyproject.toml").write_text("")
    code, out, err = cli(root, "lock")
    assert code == 0, out + err
    [fixtures] = (root / "tensors" / "looper").glob("inputs.*.npz")
    with np.load(fixtures) as arrays:
        replaced = {name: arrays[name].astype(np.float64) for name in arrays.files}
    np.savez(fixtures, **replaced)
    code, out, err = cli(root, "verify", "--no-cache")
    assert code == 1 and "Traceback" not in out + err, out + err
    lines = out.splitlines()
    assert any(line.startswith("FAIL") and "integrity" in line for line in lines), out
    refused = [line for line in lines if "is not the file the lock pins" in line]
    assert refused and all(line.startswith("ERROR") for line in refused), out
