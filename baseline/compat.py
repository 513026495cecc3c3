"""Version-compatibility rules: which toolkit, runtime, driver, platform and opset go together.

The rules are data (`baseline/data/compat.toml`), each citing its source. This module
only evaluates them and returns findings; the `compat` gate and `baseline compat` render them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import tomli
from packaging.version import InvalidVersion, Version


@dataclass(frozen=True)
class Finding:
    """One rule applied: `fail` breaks compatibility, `advice` is worth knowing."""

    rule: str
    severity: str
    message: str
    source: str

    def line(self) -> str:
        return f"{self.message} (rule {self.rule}, source: {self.source})"


@dataclass(frozen=True)
class BoardVersions:
    """Board software versions, declared in the intent or observed on a board."""

    origin: str  # "declared" or "observed on <serial>"
    runtime: str | None = None
    driver: str | None = None
    rknn_server: str | None = None
    platform: str | None = None


@functools.cache
def rules() -> dict[str, Any]:
    text = resources.files("baseline").joinpath("data/compat.toml").read_text(encoding="utf-8")
    data: dict[str, Any] = tomli.loads(text)
    return data


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def _matches(version: str | None, specifier: str) -> bool:
    # imported here: packaging.specifiers pulls in packaging.tags, logging and sysconfig
    # (~0.02 s), which the checks that never compare a range (the static check's) do not need
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    parsed = _version(version)
    try:
        return parsed is not None and SpecifierSet(specifier, prereleases=True).contains(parsed)
    except InvalidSpecifier:
        return False


def warm_up() -> None:
    """Compare one version with one range: imports what `_matches` imports. A cold verify runs
    this while it waits for the ONNX helper (`baseline.runtime.isolated.while_waiting`)."""
    _matches("1.0", ">=1")


def same_build_family(platform: str, other: str) -> bool:
    """Whether a model built for `platform` runs on `other` (RK3566↔RK3568 and friends)."""
    if platform.lower() == other.lower():
        return True
    return any(
        {platform.lower(), other.lower()} <= set(group["platforms"]) for group in rules()["shared_platforms"]
    )


def runtime_library(platform: str) -> str:
    for entry in rules()["runtime_library"]:
        if platform.lower() in entry["platforms"]:
            return str(entry["library"])
    return "librknnrt"


def check_runtime(toolkit: str, board: BoardVersions) -> list[Finding]:
    """Can this board's runtime load a model built by `toolkit`? Plus version advice."""
    findings: list[Finding] = []
    if board.runtime is not None:
        findings += _runtime_loads(toolkit, board)
    findings += _advice(toolkit, board)
    return findings


def _runtime_loads(toolkit: str, board: BoardVersions) -> list[Finding]:
    for rule in rules()["runtime_loads"]:
        if _matches(toolkit, rule["toolkit"]) and not _matches(board.runtime, rule["runtime"]):
            library = runtime_library(board.platform or "")
            return [
                Finding(
                    rule["id"],
                    "fail",
                    f"a model built by toolkit {toolkit} needs {library} {rule['runtime']}; "
                    f"the {board.origin} runtime is {board.runtime}",
                    rule["source"],
                )
            ]
    return []


def _advice(toolkit: str, board: BoardVersions) -> list[Finding]:
    findings = []
    for advice in rules()["advice"]:
        if advice["check"] == "runtime-at-least-toolkit" and _older(board.runtime, toolkit):
            detail = f"toolkit {toolkit}, {board.origin} runtime {board.runtime}"
        elif advice["check"] == "driver-minimum" and _older(board.driver, advice["minimum"]):
            detail = f"the {board.origin} driver is {board.driver}"
        else:
            continue
        findings.append(Finding(advice["id"], "advice", f"{advice['message']}: {detail}", advice["source"]))
    return findings


def _older(version: str | None, than: str) -> bool:
    """Whether `version` is known and its release is below `than`'s."""
    mine, other = _version(version), _version(than)
    return mine is not None and other is not None and mine.release < other.release


def check_platform(
    target_platform: str, built_for: list[str], board_platform: str | None = None
) -> list[Finding]:
    """Was the `.rknn` built for the target (and for the board's SoC, if known)?"""
    findings = []
    source = "S2 §4.2; S3 §10.3 (models run only on their platform family)"
    if built_for and not any(same_build_family(p, target_platform) for p in built_for):
        findings.append(
            Finding(
                "platform-mismatch",
                "fail",
                f"the .rknn was built for {', '.join(built_for)}, the target is {target_platform}",
                source,
            )
        )
    if board_platform and not same_build_family(target_platform, board_platform):
        findings.append(
            Finding(
                "board-platform",
                "fail",
                f"target {target_platform} cannot run on the board's SoC {board_platform}",
                source,
            )
        )
    return findings


def check_opset(toolkit: str, opset: int | None) -> list[Finding]:
    limits = [r for r in rules()["onnx"] if "max_opset" in r and _matches(toolkit, r["toolkit"])]
    return [
        Finding(
            rule["id"],
            "fail",
            f"ONNX opset {opset} is above {rule['max_opset']}, the most toolkit {toolkit} loads; "
            f"re-export at opset {rule['max_opset']}",
            rule["source"],
        )
        for rule in limits
        if opset is not None and opset > rule["max_opset"]
    ]


def check_python(toolkit: str, python: str) -> list[Finding]:
    minor = ".".join(python.split(".")[:2])
    for rule in rules()["python"]:
        if _matches(toolkit, rule["toolkit"]) and minor not in rule["versions"]:
            return [
                Finding(
                    "python-wheel",
                    "advice",
                    f"toolkit {toolkit} has no wheel known for Python {minor} "
                    f"(known: {', '.join(rule['versions'])})",
                    rule["source"],
                )
            ]
    return []


def check_features(features: list[str], board: BoardVersions, toolkit: str) -> list[Finding]:
    """Minimum versions per feature the model uses (dynamic shape, SRAM...)."""
    findings = []
    versions = {
        "toolkit": toolkit,
        "runtime": board.runtime,
        "driver": board.driver,
        "rknn_server": board.rknn_server,
    }
    for feature in rules()["features"]:
        if feature["id"] not in features:
            continue
        for component, specifier in feature["requires"].items():
            have = versions.get(component)
            if have is not None and not _matches(have, specifier):
                findings.append(
                    Finding(
                        feature["id"],
                        "fail",
                        f"{feature['id']} needs {component} {specifier}; the "
                        f"{board.origin} {component} is {have}",
                        feature["source"],
                    )
                )
    return findings
