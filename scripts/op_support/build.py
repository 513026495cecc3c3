"""Building one model for one target through the toolkit worker, and classifying the outcome."""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baseline.toolchain.client import ToolkitWorker, WorkerFailure
from baseline.toolchain.diagnostics import explain, parse_log
from op_support.cases import generated_models
from op_support.common import (
    COMPILES,
    CRASHES,
    FAILS,
    FOLDED,
    FOLDED_MESSAGE,
    QUANTIZED,
    QUANTIZED_ONLY,
    REQUEST_TIMEOUT,
    SHAPE_OF,
    Build,
    Prepared,
    short,
)
from op_support.prepare import prepare


@dataclass
class TargetSettings:
    """How one target is built, and the warnings its plain Conv probe already gets."""

    platform: str
    quantization: dict[str, str] | None = None
    note: str = ""
    common_warnings: list[str] = field(default_factory=list)


class Builder:
    """One toolkit worker building models for one target; crashes restart it on the next build."""

    def __init__(self, worker: ToolkitWorker, settings: TargetSettings, scratch: Path) -> None:
        self.worker = worker
        self.settings = settings
        self.scratch = scratch

    def build(self, onnx_path: Path, dataset: Path | None) -> Build:
        """Load, build and export one model; never simulate (no "inputs"), never a board."""
        workdir = Path(tempfile.mkdtemp(prefix=f"{self.settings.platform}-", dir=self.scratch))
        request: dict[str, Any] = {
            "op": "build",
            "onnx": str(onnx_path),
            "platform": self.settings.platform,
            "workdir": str(workdir),
            "quantization": self.settings.quantization,
            "export": str(workdir / "model.rknn"),
        }
        if self.settings.quantization is not None:
            request["dataset"] = str(dataset) if dataset else None
        try:
            reply = self.worker.request(request, timeout=REQUEST_TIMEOUT)
        except WorkerFailure as failure:
            return Build(CRASHES, crash_message(failure), crash_rule(str(failure)))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        result = classify(reply.response, reply.log)
        result.warnings = [w for w in result.warnings if w not in self.settings.common_warnings]
        return result


def crash_message(failure: WorkerFailure) -> str:
    """The worker's death, with the last error the compiler printed before it, if any."""
    logged = [d for d in parse_log("\n".join(failure.log_tail)) if d.level == "E" and d.severity != "benign"]
    message = str(failure)
    if logged:
        message += f"; last logged: {logged[-1].message}"
    return short(clean_message(message))


def crash_rule(message: str) -> str:
    if "did not answer" in message:
        return "timeout"
    match = re.search(r"killed by (SIG\w+)", message)
    return match.group(1).lower() if match else "worker-died"


def classify(response: dict[str, Any], log: str) -> Build:
    """compiles / fails, with the root cause (and its rule) and the non-benign warnings."""
    diagnostics = parse_log(log)
    warned = sorted({warning_name(d) for d in diagnostics if d.level == "W" and d.severity != "benign"})
    if response["ok"]:
        return Build(COMPILES, warnings=warned)
    error = (response.get("error") or "").strip()
    cause = explain(error)
    if cause.rule == "unknown" and re.fullmatch(r"\w+ returned -?\d+", error):
        # "build returned -1": the reason is in the log, in its first non-benign error line
        logged = [d for d in diagnostics if d.level == "E" and d.severity != "benign"]
        if logged:
            cause = logged[0]
            error = cause.message
    if cause.rule == "unknown" and FOLDED_MESSAGE.search(error):
        return Build(FOLDED, short(clean_message(error)), "constant-outputs", warned)
    return Build(FAILS, short(clean_message(error)), cause.rule, warned)


def warning_name(diagnostic: Any) -> str:
    """The rule of a known warning; an unknown one by its message, names and numbers masked."""
    if diagnostic.rule != "unknown":
        return str(diagnostic.rule)
    message = re.sub(r"'[^']*'|\"[^\"]*\"", "'*'", diagnostic.message)
    return "unknown: " + short(re.sub(r"\b\d+\b", "N", message))[:120]


def clean_message(message: str) -> str:
    """A failure message without run-specific paths, so the table is reproducible."""
    message = re.sub(r"(/[\w.+-]+)+/(model|frozen)\.onnx", r"\2.onnx", message)
    return re.sub(r"/tmp/[\w./+-]+", "<tmp>", message)


def probe_target(worker: ToolkitWorker, platform: str, scratch: Path) -> TargetSettings:
    """fp16 unless the toolkit refuses to build this target without quantization (rv1106).

    The probe is a plain 3x3 Conv; the warnings it gets come with every build for this
    target (e.g. the I/O dtype change of a quantized build), so op entries leave them out.
    """
    prepared = prepare(generated_models()[0], scratch / f"probe-{platform}")
    assert prepared.path is not None
    settings = TargetSettings(platform)
    result = Builder(worker, settings, scratch).build(prepared.path, prepared.dataset)
    if result.outcome == FAILS and QUANTIZED_ONLY in result.error:
        settings = TargetSettings(platform, QUANTIZED, f"w8a8: the toolkit says {result.error!r}")
        result = Builder(worker, settings, scratch).build(prepared.path, prepared.dataset)
    if result.outcome != COMPILES:
        raise SystemExit(f"{platform}: even a plain Conv does not build: {result.error}")
    settings.common_warnings = result.warnings
    return settings


def measure(builder: Builder, prepared: Prepared) -> list[Build]:
    """The builds of one model, the one that gives the verdict first.

    A model that fails or crashes as tested is built again with every input but the first
    constant. That build decides when it compiles (or folds), when it crashes after a plain
    failure, or when the first failure was only that a shape input was not constant;
    otherwise the build as tested decides.
    """
    assert prepared.path is not None
    tested = unfold(builder.build(prepared.path, prepared.dataset), prepared)
    if tested.outcome not in (FAILS, CRASHES) or prepared.frozen_path is None:
        return [tested]
    frozen = unfold(builder.build(prepared.frozen_path, prepared.frozen_dataset), prepared)
    frozen.constant_inputs = True
    if frozen.outcome in (COMPILES, FOLDED):
        return [frozen, tested]
    if tested.outcome == CRASHES:
        return [tested, frozen]
    if frozen.outcome == CRASHES or tested.rule == "non-constant-shape-input":
        return [frozen, tested]
    return [tested, frozen]


def unfold(result: Build, prepared: Prepared) -> Build:
    """A "folded" build of an op on a float activation is a failure (see FOLDED)."""
    if result.outcome == FOLDED and prepared.case.op not in SHAPE_OF and prepared.dtype.startswith("float"):
        result.outcome = FAILS
    return result


def run_target(
    builder: Builder, prepared: list[Prepared], results: dict[str, list[Build]], progress: Progress
) -> None:
    for item in prepared:
        if item.skipped is None:
            results[item.case.name] = measure(builder, item)
        progress.step(builder.settings.platform)


class Progress:
    """A line every `every` models per target, so a long run shows it is alive."""

    def __init__(self, total: int, every: int = 100) -> None:
        self.total, self.every = total, every
        self.done: Counter[str] = Counter()
        self.start = time.monotonic()
        self.lock = threading.Lock()

    def step(self, target: str) -> None:
        with self.lock:
            self.done[target] += 1
            count = self.done[target]
            if count % self.every == 0 or count == self.total:
                elapsed = time.monotonic() - self.start
                print(f"  {target}: {count}/{self.total} models, {elapsed:.0f} s", flush=True)
