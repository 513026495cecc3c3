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


def package_version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"
