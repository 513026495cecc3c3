"""Which keyword arguments the installed toolkit's `config()`, `load_onnx()`, `build()` take.

Read from the toolkit itself (`inspect.signature`, run once inside its environment and cached
beside it), never from a list in baseline: 2.2.0's `build()` has no `auto_hybrid`, 2.5.0's
`config()` gained `auto_hybrid_cos_thresh`, and `config(**kwargs)` swallows a misspelt key
without a word. A setting the pinned version does not take is an error before anything runs.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from typing import Any, get_args

from baseline.errors import ConfigError
from baseline.files.fsutil import write_atomic
from baseline.files.tomlfile import did_you_mean
from baseline.models.intent import ConversionSpec, QuantizationSpec
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
print("BASELINE-CONFIG-DOC " + json.dumps(inspect.getdoc(RKNN.config) or ""))
""".replace("CALLS", repr(CALLS))

PROBE_PLATFORM = """\
import sys
from rknn.api import RKNN
try:
    taken = RKNN(verbose=False).config(target_platform=sys.argv[1]) == 0
except Exception:
    taken = False
print("BASELINE-PLATFORM " + ("yes" if taken else "no"))
"""
"""Whether the toolkit's `config()` takes a platform its documentation does not list (it takes
`rk3588s` and `RK3588`, and refuses `rk3599` with `ValueError: Invalid target_platform`)."""


PROBE_DTYPES = """\
import json, os, sys, tempfile
import onnx
from onnx import TensorProto, helper
from rknn.api import RKNN
platform, names = sys.argv[1], sys.argv[2:]
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])
graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe", [x], [y])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
taken = []
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "relu.onnx")
    onnx.save(model, path)
    for name in names:
        rknn = RKNN(verbose=False)
        try:
            if rknn.config(target_platform=platform, quantized_dtype=name) == 0 and rknn.load_onnx(path) == 0:
                taken.append(name)
        except Exception:
            pass
        finally:
            rknn.release()
print("BASELINE-DTYPES " + json.dumps(taken))
"""
"""Which quantized dtypes the toolkit builds for one platform. `config()` documents the names
(2.5.0: w8a8, w8a16, w16a16i_dfp, w4a16) but not which platform takes which, and refuses one only
at `load_onnx` ("The quantized_dtype = 'w8a16' not support in 'rk3588'!"), after a lock had
converted other models and then advised `expect_fail`: a one-Relu model is loaded per dtype."""


def toolkit_signatures(toolchain: Toolchain) -> dict[str, list[str]]:
    """Argument names per call, read from the installed toolkit once and cached beside it."""
    return {call: list(names) for call, names in _facts(toolchain)["calls"].items()}


def toolkit_platforms(toolchain: Toolchain) -> list[str]:
    """The target platforms the installed toolkit's `config()` documents (`target_platform:
    ... currently support rv1103 / ... / rk3588`), read with the signatures."""
    return list(_facts(toolchain)["platforms"])


def _facts(toolchain: Toolchain) -> dict[str, Any]:
    cache = toolchain.path / CACHE_FILE
    try:
        cached = json.loads(cache.read_text())
        if cached.get("version") == toolchain.version:
            calls = {call: list(cached["calls"][call]) for call in CALLS}
            return {**cached, "calls": calls, "platforms": list(cached["platforms"])}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # missing, damaged, or written before the platforms were kept: read it again
    calls, platforms = _read(toolchain)
    facts = {"version": toolchain.version, "calls": calls, "platforms": platforms, "probed": {}}
    write_atomic(cache, json.dumps(facts, indent=1).encode())
    return facts


def documented_platforms(doc: str) -> list[str]:
    """The platform names after `target_platform:` in `config()`'s docstring, up to `default`."""
    found = re.search(r"target_platform:(.*?)(default|:param)", doc, re.S)
    return sorted(set(re.findall(r"\b(r[kv]\d{4}[a-z]?)\b", found.group(1).lower()))) if found else []


def check_platform(platform: str, toolchain: Toolchain, where: str) -> None:
    """Refuse a target platform the pinned toolkit does not take, listing those it documents:
    `config(target_platform=...)` refuses it only once the conversion runs. A name it does not
    document is asked of the toolkit itself once (cached), since it takes a few more."""
    documented = toolkit_platforms(toolchain)
    if not documented or platform.lower() in documented or _probe(toolchain, platform):
        return
    raise ConfigError(
        f"{where}: platform {platform!r} is not one rknn-toolkit2 {toolchain.version} supports"
        f"{did_you_mean(platform.lower(), documented)} (it supports: {', '.join(documented)}); "
        "fix the target's platform"
    )


def check_dtype(platform: str, dtype: str, toolchain: Toolchain, where: str) -> None:
    """Refuse a quantized dtype the pinned toolkit does not build for `platform`, listing those it
    does (asked of the toolkit once per platform, cached beside it). No "did you mean": the name
    is spelt right (the intent's schema checked it), and the nearest spelling (w8a16 → w8a8) is not
    the nearest build."""
    taken = _platform_dtypes(toolchain, platform)
    if dtype in taken:
        return
    listed = ", ".join(taken) or "none"
    raise ConfigError(
        f"{where}: quantization dtype {dtype!r} is not one rknn-toolkit2 {toolchain.version} builds for "
        f"{platform} (it builds: {listed}); fix the target's "
        "`quantization = {dtype = ...}`"
    )


def _platform_dtypes(toolchain: Toolchain, platform: str) -> list[str]:
    names = get_args(QuantizationSpec.model_fields["dtype"].annotation)

    def ask() -> list[str]:
        what = f"about {platform!r}'s dtypes"
        return list(json.loads(_ask(toolchain, PROBE_DTYPES, [platform, *names], "BASELINE-DTYPES", what)))

    return list(_remembered(toolchain, "dtypes", platform.lower(), ask))


def _probe(toolchain: Toolchain, platform: str) -> bool:
    def ask() -> bool:
        return (
            _ask(toolchain, PROBE_PLATFORM, [platform], "BASELINE-PLATFORM", f"about {platform!r}") == "yes"
        )

    return bool(_remembered(toolchain, "probed", platform, ask))


def _remembered(toolchain: Toolchain, table: str, key: str, ask: Callable[[], Any]) -> Any:
    """`facts[table][key]`, asked of the toolkit once and kept in the cached facts beside it."""
    facts = _facts(toolchain)
    known: dict[str, Any] = dict(facts.get(table) or {})
    if key not in known:
        known[key] = ask()
        write_atomic(toolchain.path / CACHE_FILE, json.dumps({**facts, table: known}, indent=1).encode())
    return known[key]


def _ask(toolchain: Toolchain, script: str, args: list[str], marker: str, what: str) -> str:
    """What `script`, run in the toolkit's environment, prints after `marker`."""
    result = subprocess.run(
        [str(toolchain.python), "-c", script, *args], capture_output=True, text=True, timeout=300
    )
    line = next((ln for ln in result.stdout.splitlines() if ln.startswith(f"{marker} ")), None)
    if line is None:
        tail = " | ".join(result.stderr.strip().splitlines()[-2:])
        raise ToolchainError(f"cannot ask rknn-toolkit2 {toolchain.version} {what}: {tail}")
    return line.split(" ", 1)[1].strip()


def _read(toolchain: Toolchain) -> tuple[dict[str, list[str]], list[str]]:
    result = subprocess.run(
        [str(toolchain.python), "-c", READ_SIGNATURES], capture_output=True, text=True, timeout=300
    )
    lines = result.stdout.splitlines()
    line = next((ln for ln in lines if ln.startswith("BASELINE-SIGNATURES ")), None)
    doc = next((ln for ln in lines if ln.startswith("BASELINE-CONFIG-DOC ")), None)
    if result.returncode != 0 or line is None or doc is None:
        tail = " | ".join(result.stderr.strip().splitlines()[-2:])
        # the toolkit's own import failed: the environment, not the intent, is what to fix
        raise ToolchainError(
            f"the rknn-toolkit2 {toolchain.version} environment {toolchain.path} is damaged (reading its "
            f"signatures: {tail}); rebuild it with `baseline toolchain install --force {toolchain.version}`"
        )
    calls: dict[str, list[str]] = json.loads(line.split(" ", 1)[1])
    return calls, documented_platforms(json.loads(doc.split(" ", 1)[1]))


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
