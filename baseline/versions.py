"""Versions of the host's libraries, read from package metadata (nothing heavy is imported)."""

from __future__ import annotations

import platform
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


def clashing_distribution() -> str | None:
    """The version of another installed distribution named `baseline`, if there is one.

    The unrelated PyPI project `baseline` (and this tool's own installs from before it was
    renamed `rknn-baseline`) install the same `baseline` package and command: whichever was
    installed last overwrote the other's files, and pip says nothing.
    """
    try:
        return metadata.version("baseline")
    except metadata.PackageNotFoundError:
        return None


def package_version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"
