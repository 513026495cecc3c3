"""Compat gate: do toolkit, runtime, driver, platform and opset agree with each other and the lock?

Checks the lock's toolkit against the environment that will run, the built `.rknn`
against the target, and the board software (declared in the intent, observed with
`baseline env --device --record`) against Rockchip's rules in `baseline/data/compat.toml`.
"""

from __future__ import annotations

from baseline.backends import uses_toolkit
from baseline.compat import (
    BoardVersions,
    Finding,
    check_features,
    check_opset,
    check_platform,
    check_python,
    check_runtime,
    same_build_family,
)
from baseline.gates.contract import GateInputs, GateJob, Reads
from baseline.models.intent import TargetSpec, expected_failure
from baseline.models.lock import MatrixCell, ModelLock, ObservedBoard, ToolkitPin
from baseline.models.results import GateMetrics, GateResult, Headline
from baseline.toolchain.provision import Toolchain

NAME = "compat"


class CompatMetrics(GateMetrics):
    gate = NAME

    rules: list[str]
    failures: int

    def headline(self) -> Headline:
        return Headline("rule failures", float(self.failures), 0.0, "≤")


def jobs(model: ModelLock) -> list[GateJob]:
    return [GateJob(NAME, target=target.name) for target in model.targets]


def reads(model: ModelLock, job: GateJob) -> Reads:
    return Reads(
        lock=frozenset({"boards", "toolkits", "matrix"}), toolkit_environment=uses_toolkit(model.backends)
    )


def check(job: GateJob, inputs: GateInputs) -> GateResult:
    assert job.target is not None
    model = inputs.model
    target = model.target(job.target)
    installed = inputs.toolchain() if inputs.declared.toolkit_environment else None
    findings = [
        *_toolkit_findings(model, inputs.toolkits(), installed),
        *check_opset(model.toolkit.version, model.onnx.opsets.get("ai.onnx")),
        *_artifact_findings(model, target),
        *_board_findings(model, target, inputs.boards()),
        *_measured_findings(model, target, inputs.matrix()),
    ]
    failures = [f for f in findings if f.severity == "fail"]
    metrics = CompatMetrics(rules=sorted({f.rule for f in findings}), failures=len(failures))
    details = [f.line() for f in findings]
    if failures:
        return inputs.failed(
            failures[0].line(),
            details=details,
            hint="align the versions (upgrade the board runtime, or build with a matching toolkit)",
            metrics=metrics,
        )
    boards = _boards_checked(target, inputs.boards())
    summary = (
        f"toolkit {model.toolkit.version}, {target.platform}, opset "
        f"{model.onnx.opsets.get('ai.onnx', '?')}, {boards}: compatible"
        + (f" ({len(findings)} advice)" if findings else "")
    )
    return inputs.result(metrics, summary=summary, details=details)


def _toolkit_findings(
    model: ModelLock, toolkits: list[ToolkitPin], installed: Toolchain | None
) -> list[Finding]:
    findings = []
    pinned = next((pin for pin in toolkits if pin.version == model.toolkit.version), None)
    if pinned is not None and installed is not None:
        changed = [
            f"{name} {version} → {installed.packages.get(name, 'missing')}"
            for name, version in sorted(pinned.packages.items())
            if installed.packages.get(name) != version
        ]
        if changed:
            findings.append(
                Finding(
                    "toolchain-drift",
                    "advice",
                    "the toolkit environment differs from the lock: " + ", ".join(changed),
                    "lock [[toolkits]] vs `baseline toolchain list`",
                )
            )
    if pinned is not None:
        findings += check_python(model.toolkit.version, pinned.python)
    return findings


def _artifact_findings(model: ModelLock, target: TargetSpec) -> list[Finding]:
    conversion = model.conversion(target.name)
    if conversion is None:
        return []
    findings = check_platform(target.platform, conversion.metadata.target_platforms)
    if conversion.metadata.toolkit_version != model.toolkit.version:
        findings.append(
            Finding(
                "artifact-toolkit",
                "fail",
                f"the pinned .rknn was built by toolkit {conversion.metadata.toolkit_version}, "
                f"the lock pins {model.toolkit.version}",
                "lock",
            )
        )
    return findings


def _measured_findings(model: ModelLock, target: TargetSpec, matrix: list[MatrixCell]) -> list[Finding]:
    """What a recorded `baseline matrix` measured for this model and target."""
    cells = matrix  # already narrowed to this model and target
    expected = expected_failure(model.expect_fail, "compilable", target.name) is not None
    findings = []
    for cell in cells:
        if cell.compiled or expected:
            continue
        severity = "fail" if cell.toolkit == model.toolkit.version else "advice"
        findings.append(
            Finding(
                "measured-compile",
                severity,
                f"toolkit {cell.toolkit} does not compile {model.name} for {target.name}: {cell.error}",
                "baseline matrix (recorded in the lock)",
            )
        )
    return findings


def _board_findings(model: ModelLock, target: TargetSpec, boards: list[ObservedBoard]) -> list[Finding]:
    toolkit = model.toolkit.version
    features = [] if all(spec.is_static for spec in model.onnx.inputs) else ["dynamic-shape"]
    findings: list[Finding] = []
    declared = target.board
    if declared is not None:
        versions = BoardVersions(
            "declared", declared.runtime, declared.driver, declared.rknn_server, target.platform
        )
        findings += check_runtime(toolkit, versions) + check_features(features, versions, toolkit)
    for board in _matching_boards(target, boards):
        versions = BoardVersions(
            f"observed ({board.serial})", board.runtime, board.driver, board.rknn_server, board.soc
        )
        findings += check_runtime(toolkit, versions) + check_features(features, versions, toolkit)
        findings += _declared_vs_observed(declared, board)
    return findings


def _matching_boards(target: TargetSpec, boards: list[ObservedBoard]) -> list[ObservedBoard]:
    return [b for b in boards if b.soc is not None and same_build_family(target.platform, b.soc)]


def _declared_vs_observed(declared: object, board: ObservedBoard) -> list[Finding]:
    findings = []
    for field in ("runtime", "driver", "rknn_server"):
        expected = getattr(declared, field, None)
        seen = getattr(board, field)
        if expected is not None and seen is not None and expected != seen:
            findings.append(
                Finding(
                    "declared-vs-observed",
                    "fail",
                    f"the intent declares {field} {expected}, board {board.serial} has {seen}",
                    "baseline env --device --record",
                )
            )
    return findings


def _boards_checked(target: TargetSpec, boards: list[ObservedBoard]) -> str:
    observed = len(_matching_boards(target, boards))
    declared = "declared board" if target.board is not None else "no declared board"
    return f"{declared}, {observed} observed"
