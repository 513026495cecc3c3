"""Which keyword arguments the installed toolkit's `config()`, `load_onnx()`, `build()` take.

Read from the toolkit itself (`inspect.signature`, run once inside its environment and cached
beside it), never from a list in baseline: 2.2.0's `build()` has no `auto_hybrid`, 2.5.0's
`config()` gained `auto_hybrid_cos_thresh`, and `config(**kwargs)` swallows a misspelt key
without a word. A setting the pinned version does not take is an error before anything runs.
"""

from __future__ import annotations

import json
import subprocess

from baseline.errors import ConfigError
from baseline.fsutil import write_atomic
from baseline.models.intent import ConversionSpec
from baseline.toolchain.provision import Toolchain, ToolchainError

CACHE_FILE = "baseline-signatures.json"
CALLS = ("config", "load_onnx", "build")
READ_SIGNATURES = """\
import inspect, json
from rknn.api import RKNN
out = {}
for name in CALLS:
    params = inspect.signature(getattr(RKNN, name)).parameters.values()
    out[name] = [p.name for p in params if p.name != "self" and p.kind != p.VAR_KEYWORD]
print("BASELINE-SIGNATURES " + json.dumps(out))
""".replace("CALLS", repr(CALLS))


def toolkit_signatures(toolchain: Toolchain) -> dict[str, list[str]]:
    """Argument names per call, read from the installed toolkit once and cached beside it."""
    cache = toolchain.path / CACHE_FILE
    try:
        cached = json.loads(cache.read_text())
        if cached.get("version") == toolchain.version:
            return {call: list(cached["calls"][call]) for call in CALLS}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # missing or damaged: read it again
    calls = _read(toolchain)
    write_atomic(cache, json.dumps({"version": toolchain.version, "calls": calls}, indent=1).encode())
    return calls


def _read(toolchain: Toolchain) -> dict[str, list[str]]:
    result = subprocess.run(
        [str(toolchain.python), "-c", READ_SIGNATURES], capture_output=True, text=True, timeout=300
    )
    line = next((ln for ln in result.stdout.splitlines() if ln.startswith("BASELINE-SIGNATURES ")), None)
    if result.returncode != 0 or line is None:
        tail = " | ".join(result.stderr.strip().splitlines()[-2:])
        raise ToolchainError(f"cannot read the signatures of rknn-toolkit2 {toolchain.version}: {tail}")
    calls: dict[str, list[str]] = json.loads(line.split(" ", 1)[1])
    return calls


def check_settings(conversion: ConversionSpec | None, toolchain: Toolchain, where: str) -> None:
    """Refuse a conversion setting the pinned toolkit's call does not take, naming it and the version."""
    if conversion is None:
        return
    signatures = toolkit_signatures(toolchain)
    for call, settings in conversion.calls().items():
        accepted = signatures[call]
        for key in settings:
            if key not in accepted:
                raise ConfigError(
                    f"{where}: conversion.{call}.{key} is not an argument of {call}() in "
                    f"rknn-toolkit2 {toolchain.version} (it takes: {', '.join(accepted)}); "
                    "remove it or pin a toolkit version that has it"
                )
