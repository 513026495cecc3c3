"""Facts about the machine baseline runs on, and about a board, for `baseline env`."""

from __future__ import annotations

import platform
from typing import Any

from baseline import __version__
from baseline.board.software import probe_board
from baseline.toolchain.provision import cache_root, list_toolchains
from baseline.versions import host_toolchain


def host_facts() -> dict[str, Any]:
    host = host_toolchain()
    toolkits = {
        t.version: {"path": str(t.path), "python": t.python_version, **t.packages} for t in list_toolchains()
    }
    return {
        "baseline": __version__,
        "python": host.python,
        "platform": platform.platform(),
        "numpy": host.numpy,
        "onnx": host.onnx,
        "onnxruntime": host.onnxruntime,
        "toolchains_dir": str(cache_root()),
        "toolkits": toolkits or "none installed (baseline toolchain install)",
    }


def board_facts(serial: str) -> dict[str, Any]:
    return probe_board(serial).model_dump()
