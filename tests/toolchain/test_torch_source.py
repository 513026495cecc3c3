"""Where a toolkit environment's torch comes from: the command lines provision runs (subprocess mocked).

PyPI's torch 2.13.0 for Linux x86_64 is the CUDA build (17 nvidia / cuda packages and triton);
the environments get the CPU build, from a wheel on disk when there is one, else from the CPU
index for that one install.
"""

from __future__ import annotations

import json
import subprocess
import venv
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from baseline.toolchain import provision
from baseline.toolchain.provision import DEFAULT_TORCH_INDEX, InstallOptions, ToolchainError
from tests.toolchain.test_provision import DECLARED_2_5_0

TORCH = "torch==2.13.0"


class FakeRun:
    """`subprocess.run` for `_build`: records every command and answers the probes it runs."""

    def __init__(self, *, local_wheel: bool, index_works: bool = True) -> None:
        self.local_wheel, self.index_works = local_wheel, index_works
        self.purelib = Path()
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        command = [str(part) for part in command]
        self.commands.append(command)
        out, failure = "", ""
        if "venv" in command:  # uv venv TARGET
            (Path(command[-1]) / "bin").mkdir(parents=True)
        elif "-c" in command:
            code = command[command.index("-c") + 1]
            if "m.requires" in code:
                out = json.dumps(DECLARED_2_5_0)
            elif "m.version" in code:
                out = json.dumps({"rknn-toolkit2": "2.5.0", "torch": "2.13.0+cpu"})
            elif "platform" in code:
                out = "3.11.7\n"
            elif "purelib" in code:
                out = f"{self.purelib}\n"
        elif "--no-index" in command and not self.local_wheel:
            failure = f"ERROR: No matching distribution found for {TORCH}"
        elif "--index-url" in command and not self.index_works:
            failure = "ERROR: Could not find a version that satisfies the requirement torch==2.13.0"
        return subprocess.CompletedProcess(command, 1 if failure else 0, out, failure)

    def installs(self) -> list[list[str]]:
        """Each install's arguments after the installer's fixed prefix (the last `--quiet`)."""
        found = []
        for command in self.commands:
            if "install" in command:
                tail = command[command.index("install") :]
                found.append(tail[len(tail) - tail[::-1].index("--quiet") :])
        return found


class FakeEnvBuilder:
    def __init__(self, **_: object) -> None:
        pass

    def create(self, target: Path) -> None:
        (Path(target) / "bin").mkdir(parents=True)


@pytest.fixture
def build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """`build(fake, options)` → (marker, progress lines): a 2.5.0 environment built with `fake`."""
    monkeypatch.setenv(provision.CACHE_ENV, str(tmp_path / "toolchains"))
    monkeypatch.delenv(provision.PYTHON_ENV, raising=False)
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    monkeypatch.setattr(venv, "EnvBuilder", FakeEnvBuilder)
    monkeypatch.setattr(provision, "find_uv", lambda installer: "/fake/uv" if installer == "uv" else None)

    def run(fake: FakeRun, options: InstallOptions) -> tuple[dict[str, object], list[str]]:
        fake.purelib = tmp_path / "site-packages"
        fake.purelib.mkdir(exist_ok=True)
        monkeypatch.setattr(subprocess, "run", fake)
        progress: list[str] = []
        toolchain = provision.install_toolchain("2.5.0", options, progress.append)
        marker: dict[str, object] = json.loads((toolchain.path / provision.MARKER).read_text())
        return marker, progress

    return run


def pip(**fields: Any) -> InstallOptions:
    """Options as the environment variables would give them, with pip as the installer."""
    defaults = InstallOptions(torch=TORCH, pip_args=(), installer="pip", torch_index=DEFAULT_TORCH_INDEX)
    return replace(defaults, **fields)


def test_a_wheel_on_disk_is_used_without_reaching_the_cpu_index(build) -> None:
    """This machine's case: pip's find-links hold torch 2.13.0+cpu and the CPU index is unreachable."""
    fake = FakeRun(local_wheel=True)
    marker, progress = build(fake, pip(torch_index=DEFAULT_TORCH_INDEX))
    toolkit, torch, rest = fake.installs()
    assert toolkit == ["rknn-toolkit2==2.5.0", "--no-deps"]
    assert torch == ["--no-deps", "--no-index", TORCH], "offline: find-links only"
    assert rest[-2:] == [TORCH, provision.SETUPTOOLS], "torch's own dependencies come with the rest"
    assert not any(DEFAULT_TORCH_INDEX in part for command in fake.commands for part in command)
    assert marker["torch_source"] == "find-links"
    assert "installed torch==2.13.0 from a wheel on disk (no dependencies yet)" in progress


def test_without_a_wheel_on_disk_torch_alone_comes_from_the_cpu_index(build) -> None:
    fake = FakeRun(local_wheel=False)
    marker, _ = build(fake, pip(torch_index=DEFAULT_TORCH_INDEX))
    _, offline, torch, rest = fake.installs()
    assert offline == ["--no-deps", "--no-index", TORCH]
    # the only index of that call: PyPI's CUDA build is not a candidate, and nothing else comes from it
    assert torch == ["--no-deps", "--index-url", DEFAULT_TORCH_INDEX, TORCH]
    assert "--index-url" not in rest and TORCH in rest, "then satisfied by the CPU build installed"
    assert marker["torch_source"] == DEFAULT_TORCH_INDEX
    assert fake.commands[-1][-2] == "-c", "the smoke test runs last"


def test_the_cpu_index_is_the_default_and_overridable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(provision.TORCH_INDEX_ENV, raising=False)
    assert InstallOptions().torch_index == DEFAULT_TORCH_INDEX == "https://download.pytorch.org/whl/cpu"
    monkeypatch.setenv(provision.TORCH_INDEX_ENV, " https://mirror.example/whl/cpu ")
    assert InstallOptions().torch_index == "https://mirror.example/whl/cpu"
    monkeypatch.setenv(provision.TORCH_INDEX_ENV, "")
    assert InstallOptions().torch_index == ""


def test_a_mirror_replaces_the_cpu_index(build) -> None:
    fake = FakeRun(local_wheel=False)
    build(fake, pip(torch_index="https://mirror.example/whl/cpu"))
    assert ["--no-deps", "--index-url", "https://mirror.example/whl/cpu", TORCH] in fake.installs()


def test_an_empty_index_leaves_torch_to_the_configured_indexes(build) -> None:
    fake = FakeRun(local_wheel=False)
    marker, progress = build(fake, pip(torch_index=""))
    _, offline, rest = fake.installs()
    assert offline == ["--no-deps", "--no-index", TORCH]
    assert TORCH in rest and not any("--index-url" in command for command in fake.commands)
    assert marker["torch_source"] == "indexes"
    assert "BASELINE_TORCH_INDEX is empty: torch==2.13.0 comes from the configured indexes" in progress


def test_an_unreachable_index_without_a_wheel_on_disk_names_the_ways_out(build, tmp_path: Path) -> None:
    fake = FakeRun(local_wheel=False, index_works=False)
    with pytest.raises(ToolchainError) as error:
        build(fake, pip(torch_index=DEFAULT_TORCH_INDEX))
    message = str(error.value)
    assert "Could not find a version" in message
    assert f"from {DEFAULT_TORCH_INDEX} (its CPU-only build)" in message
    assert "set BASELINE_TORCH_INDEX to a mirror" in message and "BASELINE_TORCH_INDEX= (empty)" in message
    assert not list((tmp_path / "toolchains").glob("rknn-toolkit2-*")), "nothing half-built is left"


def test_uv_gets_the_same_route_with_the_wheel_folders(build) -> None:
    fake = FakeRun(local_wheel=False)
    build(fake, pip(installer="uv"))
    torch_calls = [command for command in fake.commands if TORCH in command and "--no-deps" in command]
    prefix = ["/fake/uv", "pip", "install", "--quiet", "--python"]
    assert [command[:5] for command in torch_calls] == [prefix, prefix]
    offline, index = (command[6:] for command in torch_calls)
    assert offline == ["--find-links", "/opt/wheels", "--no-deps", "--no-index", TORCH]
    assert index == ["--find-links", "/opt/wheels", "--no-deps", "--index-url", DEFAULT_TORCH_INDEX, TORCH]


def test_user_pip_arguments_reach_every_install(build) -> None:
    fake = FakeRun(local_wheel=False)
    build(fake, pip(pip_args=("--timeout", "30")))
    assert all(command[:2] == ["--timeout", "30"] for command in fake.installs())


def test_the_stand_in_installs_no_torch(build, tmp_path: Path) -> None:
    fake = FakeRun(local_wheel=False)
    marker, _ = build(fake, pip(torch=provision.TORCH_STUB))
    assert not any("torch" in part for command in fake.installs() for part in command)
    assert marker["torch_source"] == "stub" and (tmp_path / "site-packages" / "torch").is_dir()
