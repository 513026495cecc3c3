"""Loading the intent file and resolving each model's settings against `[defaults]`."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from baseline.backends import GOLDEN
from baseline.backends import REGISTRY as BACKENDS
from baseline.errors import ConfigError
from baseline.files.hashing import sha256_bytes
from baseline.files.tomlfile import did_you_mean, read_toml, validate
from baseline.models.base import merge_set_fields
from baseline.models.intent import (
    GATE_NAMES,
    MODEL_WIDE,
    CalibrationSpec,
    ConversionSpec,
    ExpectedFailure,
    ExporterSpec,
    FixtureSpec,
    Intent,
    TargetSpec,
    ToolkitSettings,
)
from baseline.models.task import OutputPart, TaskSpec
from baseline.models.tolerances import GateTolerances, ToleranceSpec

INTENT_SUFFIX = ".toml"


def intent_path_for(lock_path: Path) -> Path:
    """The intent file that sits next to a lock: `baseline.lock` → `baseline.toml`."""
    return lock_path.with_suffix(INTENT_SUFFIX)


def load_intent(path: Path) -> Intent:
    data = read_toml(path, "intent file", "write one next to the lock (see README) or pass --config")
    intent = validate(Intent, data, path, "intent file")
    _check_names(intent, path)
    return intent


def _check_names(intent: Intent, path: Path) -> None:
    """Backend and gate names are checked when the file is read: a misspelt `expect_fail` gate
    (or a target the model does not have) expected nothing and was accepted without a word. The
    records cannot check them (they do not import the registries above them); this layer can:
    backends by their registry, gates by `GATE_NAMES` (the gates themselves sit above the
    intent), an `expect_fail` target by the model's targets."""
    named = [("defaults.backends", intent.defaults.backends)]
    for index, model in enumerate(intent.models):
        named.append((f"models.{index}.backends", model.backends or []))
        targets = [
            target.name
            for target in (model.targets if model.targets is not None else intent.defaults.targets)
        ]
        for position, expected in enumerate(model.expect_fail):
            key = f"models.{index}.expect_fail.{position}"
            _check_name(path, f"{key}.gate", expected.gate, "gate", GATE_NAMES)
            if expected.target is not None:  # a target the model lacks expected nothing, in silence
                _check_name(path, f"{key}.target", expected.target, "target", targets)
    for key, backends in named:
        for position, backend in enumerate(backends):
            _check_name(path, f"{key}.{position}", backend, "backend", BACKENDS)


def _check_name(path: Path, key: str, name: str, kind: str, known: Collection[str]) -> None:
    if name not in known:
        raise ConfigError(
            f"{path}: intent file key {key}: unknown {kind} {name!r}{did_you_mean(name, known)} "
            f"(known: {', '.join(known)})"
        )


def intent_hash(intent: Intent) -> str:
    """Hash of the intent's meaning, not its text: a new comment does not make a lock stale."""
    # defaults are left out so that a new optional setting in baseline does not stale every lock
    meaning = intent.model_dump(mode="json", exclude_defaults=True)
    canonical = json.dumps(meaning, sort_keys=True, separators=(",", ":"))
    return sha256_bytes(canonical.encode())


@dataclass(frozen=True)
class ResolvedModel:
    """A model's settings with `[defaults]` applied."""

    name: str
    onnx: str
    exporter: ExporterSpec
    targets: list[TargetSpec]
    """Each with its conversion settings resolved: defaults, then the model's, then its own."""
    backends: list[str]
    toolkit: ToolkitSettings
    fixtures: FixtureSpec
    tolerances: ToleranceSpec
    expect_fail: list[ExpectedFailure]
    parts: list[OutputPart]
    tasks: list[TaskSpec]
    conversion: ConversionSpec | None = None
    """The model-wide conversion settings (what the golden's feed and outputs follow)."""
    calibration: CalibrationSpec | None = None


def resolve_models(intent: Intent) -> list[ResolvedModel]:
    defaults = intent.defaults
    resolved = []
    for model in intent.models:
        conversion = _over(model.conversion, defaults.conversion)
        targets = model.targets if model.targets is not None else defaults.targets
        resolved.append(
            ResolvedModel(
                name=model.name,
                onnx=model.onnx,
                exporter=model.exporter,
                targets=[_resolve_target(model.name, target, conversion) for target in targets],
                backends=_with_golden(model.backends if model.backends is not None else defaults.backends),
                toolkit=merge_set_fields(defaults.toolkit, model.toolkit),
                fixtures=merge_set_fields(defaults.fixtures, model.fixtures),
                tolerances=merge_set_fields(defaults.tolerances, model.tolerances),
                expect_fail=model.expect_fail,
                parts=model.parts,
                tasks=model.tasks,
                conversion=conversion,
                calibration=model.calibration or defaults.calibration,
            )
        )
    return resolved


def _over(top: ConversionSpec | None, base: ConversionSpec | None) -> ConversionSpec | None:
    return top.over(base) if top is not None else base


def _resolve_target(model: str, target: TargetSpec, conversion: ConversionSpec | None) -> TargetSpec:
    """The target with its model's conversion settings under its own (target wins, key by key)."""
    own = target.conversion
    for call, keys in MODEL_WIDE.items():
        for key in keys:
            if own is not None and key in own.calls()[call]:
                raise ConfigError(
                    f"model {model!r}, target {target.name!r}: conversion.{call}.{key} decides what "
                    "onnxruntime is fed or returns, one golden per model; set it on the model"
                )
    merged = _over(own, conversion)
    return target if merged is None else target.model_copy(update={"conversion": merged})


def _with_golden(backends: list[str]) -> list[str]:
    """onnxruntime always runs: it is the golden every other backend is compared with."""
    return [GOLDEN, *[name for name in backends if name != GOLDEN]]


def output_tolerances(
    spec: ToleranceSpec, output_names: list[str], parts: list[OutputPart] | None = None
) -> dict[str, GateTolerances]:
    """Resolved tolerances per output (model-wide values, then the output's own overrides) and
    per part (its output's, then the part's own under `outputs."<output>:<part>"`)."""
    model_wide = GateTolerances(
        drift=spec.drift,
        consistency=spec.consistency,
        consistency_quantized=spec.consistency_quantized,
    )
    resolved = {name: merge_set_fields(model_wide, spec.outputs.get(name)) for name in output_names}
    for part in parts or []:
        of_output = resolved.get(part.output, model_wide)
        resolved[part.key] = merge_set_fields(of_output, spec.outputs.get(part.key))
    return resolved
