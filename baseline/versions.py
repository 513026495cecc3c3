"""Versions of the host's libraries, read from package metadata (nothing heavy is imported)."""

from __future__ import annotations

import functools
import platform
import sys
from importlib import metadata

from baseline import __version__
from baseline.models.lock import HostToolchain


def host_toolchain() -> HostToolchain:
    return HostToolchain(
        baseline=__version__,
        python=platform.python_version(),
        numpy=package_version("numpy"),
        onnx=package_version("onnx"),
        onnxruntime=package_version("onnxruntime"),
    )


def clashing_distribution(path: list[str] | None = None) -> str | None:
    """The version of another installed distribution named `baseline`, if there is one.

    The unrelated PyPI project `baseline` (and this tool's own installs from before it was
    renamed `rknn-baseline`) install the same `baseline` package and command: whichever was
    installed last overwrote the other's files, and pip says nothing. Only an installed
    distribution counts (an installer writes its RECORD): a stale `baseline.egg-info` left in a
    source checkout by an older build installs nothing.
    """
    found = metadata.distributions(name="baseline", path=path if path is not None else sys.path)
    for distribution in found:
        if distribution.read_text("RECORD") is not None:
            return str(distribution.version)
    return None


@functools.cache
def package_version(package: str) -> str:
    """Read once per process: the backend run cache's key reads three of them (`host_toolchain`)
    on every run, and each read finds and parses the package's METADATA (~1 ms: a fifth of a
    small model's job on a 1,000-model zoo). What is installed does not change under a command."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"
