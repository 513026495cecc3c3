from __future__ import annotations

import json
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
