from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from baseline.errors import ConfigError
from baseline.toolchain import provision
from baseline.toolchain.provision import (
    MARKER,
    environment_dir,
    find_toolchain,
    list_toolchains,
    toolkit_requirements,
)

DECLARED_2_5_0 = [
    "protobuf <=4.25.4,>=4.21.6",
    "psutil >=5.9.0",
    "opencv-python >=4.5.5.64",
    "numpy <=1.26.4",
    "onnx <=1.18.0,>=1.16.1",
    "onnxruntime >=1.17.0",
    "torch <=2.4.0,>=1.10.1",
]


def test_requirements_keep_the_toolkit_pins_with_three_substitutions() -> None:
    requirements = toolkit_requirements(DECLARED_2_5_0, "torch==2.13.0")
    assert "numpy<=1.26.4" in requirements and "onnx<=1.18.0,>=1.16.1" in requirements
    assert "opencv-python-headless>=4.5.5.64" in requirements
    assert not any(r.startswith("torch<=") for r in requirements)
    assert requirements[-2:] == ["torch==2.13.0", provision.SETUPTOOLS]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(provision.CACHE_ENV, str(tmp_path))
    return tmp_path


def fake_environment(version: str, *, complete: bool) -> Path:
    path = environment_dir(version)
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").write_text("")
    if complete:
        marker = {"version": version, "python": "3.11.7", "packages": {"rknn-toolkit2": version}}
        (path / MARKER).write_text(json.dumps(marker))
    return path


def test_half_built_environment_is_never_used(cache: Path) -> None:
    fake_environment("2.3.2", complete=False)
    assert find_toolchain("2.3.2") is None
    assert list_toolchains() == []


def test_complete_environment_is_found_and_listed(cache: Path) -> None:
    path = fake_environment("2.2.0", complete=True)
    found = find_toolchain("2.2.0")
    assert found is not None and found.path == path and found.packages == {"rknn-toolkit2": "2.2.0"}
    assert [t.version for t in list_toolchains()] == ["2.2.0"]


def test_environment_without_interpreter_is_broken(cache: Path) -> None:
    path = fake_environment("2.5.0", complete=True)
    (path / "bin" / "python").unlink()
    assert find_toolchain("2.5.0") is None


def test_cache_directory_is_overridable(cache: Path) -> None:
    assert environment_dir("2.5.0").parent == cache


def test_bad_version_is_refused() -> None:
    with pytest.raises(ConfigError, match="not a version number"):
        environment_dir("latest; rm -rf /")


def test_unbounded_onnx_is_capped_below_the_release_that_broke_the_loader() -> None:
    assert toolkit_requirements(["onnx >=1.16.1"], "torch")[0] == "onnx>=1.16.1,<1.19"  # 2.3.2
    assert toolkit_requirements(["onnx ==1.14.1"], "torch")[0] == "onnx==1.14.1"  # 2.2.0
    assert toolkit_requirements(["onnx <=1.18.0,>=1.16.1"], "torch")[0] == "onnx<=1.18.0,>=1.16.1"


def test_force_rebuilds_a_complete_environment(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`install_toolchain` (behind `toolchain install --force`) used to return a complete one as is."""
    path = fake_environment("2.3.2", complete=True)
    built: list[str] = []

    def fake_build(version: str, target: Path, options: object, progress: object) -> provision.Toolchain:
        built.append(version)
        return provision.Toolchain(version=version, path=target, packages={}, python_version="3.11.7")

    monkeypatch.setattr(provision, "_build", fake_build)
    assert provision.ensure_toolchain("2.3.2").path == path and built == []
    provision.install_toolchain("2.3.2", provision.InstallOptions(torch="torch"), lambda _: None)
    assert built == ["2.3.2"] and not path.exists(), "the old environment is removed first"


def test_the_stand_in_replaces_the_torch_requirement() -> None:
    requirements = toolkit_requirements(DECLARED_2_5_0, provision.TORCH_STUB)
    assert not any(r.startswith("torch") for r in requirements)
    assert requirements[-1] == provision.SETUPTOOLS
    default = provision.InstallOptions().torch
    assert default == "torch==2.13.0" or provision.TORCH_ENV in os.environ, "some builds call torch"


def test_the_torch_stand_in_offers_what_rknn_api_imports_and_refuses_the_rest(tmp_path: Path) -> None:
    provision.write_torch_stub(tmp_path)
    probe = """
import importlib.metadata as m, torch, torch.nn
class Net(torch.nn.Module): pass
@torch.no_grad()
def f(): return 1
with torch.no_grad(): pass
assert f() == 1 and not isinstance(1, torch.Tensor)
print(m.version("torch"))
try:
    torch.cuda
except AttributeError as error:
    print(error)
try:
    Net()
except RuntimeError as error:
    print(type(error).__name__)
"""
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    lines = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert lines[0] == "0.0.0+baseline.stub"
    assert lines[1].startswith("torch.cuda: the toolkit called torch, but this RKNN-Toolkit2 environment")
    assert lines[1].endswith("baseline toolchain install VERSION --force")
    assert lines[2] == "TorchUnavailable"
    record = (tmp_path / "torch-0.0.0+baseline.stub.dist-info" / "RECORD").read_text()
    assert "torch/__init__.py,," in record, "pip uninstall torch can remove it"


def test_importing_the_stand_in_inside_baseline_registers_nothing() -> None:
    probe = "import sys, baseline.toolchain.torch_stub; print('torch.nn' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout == "False\n"


def test_installer_choice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert provision.find_uv("pip") is None
    with pytest.raises(ConfigError, match="BASELINE_INSTALLER='conda' is not an installer"):
        provision.find_uv("conda")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert provision.find_uv("auto") is None, "no uv: pip"
    with pytest.raises(ConfigError, match="uv is not installed: pip install uv"):
        provision.find_uv("uv")
    (tmp_path / "uv").write_text("")
    assert provision.find_uv("auto") == str(tmp_path / "uv"), "the uv beside this interpreter"


def test_remove_deletes_every_python_s_environment_of_a_version(cache: Path, cli) -> None:
    kept = fake_environment("2.5.0", complete=True)
    removed = fake_environment("2.3.2", complete=True)
    other_python = cache / "rknn-toolkit2-2.3.2-py312"
    shutil.copytree(removed, other_python)
    code, out, _ = cli(cache, "toolchain", "remove", "2.3.2", "2.2.0")
    assert code == 0 and kept.exists() and not removed.exists() and not other_python.exists()
    assert f"removed {removed} (0.00 GB)" in out and "rknn-toolkit2 2.2.0: no environment in the cache" in out


def test_prune_keeps_what_the_intent_uses_and_removes_the_rest(cache: Path, cli) -> None:
    used = fake_environment(provision.DEFAULT_VERSION, complete=True)
    unused = fake_environment("2.2.0", complete=True)
    half_built = fake_environment("2.3.2", complete=False)
    project = cache / "project"
    project.mkdir()
    (project / "baseline.toml").write_text('[[models]]\nname = "m"\nonnx = "m.onnx"\n')
    code, out, _ = cli(project, "toolchain", "prune", "--dry-run")
    assert code == 0 and unused.exists() and half_built.exists()
    assert f"would remove {unused} (rknn-toolkit2 2.2.0 is not used" in out
    assert f"would remove {half_built} (half-built" in out
    code, out, _ = cli(project, "toolchain", "prune")
    assert code == 0 and used.exists() and not unused.exists() and not half_built.exists()
    assert out.endswith(f"kept toolkit versions: {provision.DEFAULT_VERSION}\n")


def test_prune_without_an_intent_file_asks_what_to_keep(cache: Path, cli) -> None:
    code, out, err = cli(cache, "toolchain", "prune")
    assert (code, out) == (2, "")
    assert err.startswith("error: baseline.toml: intent file not found") and "--keep" in err
    fake_environment("2.2.0", complete=True)
    assert cli(cache, "toolchain", "prune", "--keep", "2.2.0")[0] == 0 and environment_dir("2.2.0").exists()


def test_uv_gets_the_wheel_folders_pip_is_told_about(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels /srv/more")
    assert provision._pip_find_links() == ["--find-links", "/opt/wheels", "--find-links", "/srv/more"]
    monkeypatch.delenv("PIP_FIND_LINKS")
    assert provision._pip_find_links() == []


def test_the_toolkit_python_names_the_environment(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(provision.PYTHON_ENV, "3.11")
    assert environment_dir("2.5.0").name == "rknn-toolkit2-2.5.0-py311"
    monkeypatch.setenv(provision.PYTHON_ENV, "python3")
    with pytest.raises(ConfigError, match="BASELINE_TOOLKIT_PYTHON='python3' is not a Python version"):
        environment_dir("2.5.0")


def test_another_python_without_uv_is_one_clear_error(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(provision.PYTHON_ENV, "3.9")
    options = provision.InstallOptions(installer="pip")
    with pytest.raises(ConfigError, match="BASELINE_TOOLKIT_PYTHON=3.9 needs uv to find that Python"):
        provision.install_toolchain("2.5.0", options, lambda _: None)
    assert not environment_dir("2.5.0").exists(), "nothing half-built is left"
