"""What the static check reports: findings, each with a rule id, a place, a remedy and a source."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx

CUT_REMEDY = "cut the graph before it (load_onnx(outputs=[...])) and run that part on the CPU"
MEASURED = "measured with RKNN-Toolkit2 (baseline/data/op_support)"
DATA_DEPENDENT = {"quantized-integer-divisor"}
"""Unknown findings about the calibration data, not about anything left unmeasured."""
BOTH_WAYS = {"if-on-shape"}
"""Unknown findings about patterns measured both ways: real exports compile, other forms fail."""


def node_place(node: onnx.NodeProto) -> str:
    """Where a finding about `node` is: its name, or its first output for a node without one."""
    return f"node {node.name or node.output[0]!r} ({node.op_type})"


@dataclass(frozen=True)
class StaticFinding:
    rule: str
    severity: str  # error: predicted not to compile; warning: compiles, worth knowing
    where: str
    message: str
    remedy: str
    source: str
    unknown: bool = False  # the checker cannot judge this: the verdict is "unknown", not "compiles"
    thin: bool | None = None
    """An error that rests on single-op node tests only (`evidence`); None: as its rule's entry says."""

    @property
    def decisive(self) -> bool:
        """An error strong enough to say "does not compile" alone: real-export evidence or the
        toolkit refusing the pattern by name (issue 33)."""
        if self.severity != "error":
            return False
        if self.thin is not None:
            return not self.thin
        from baseline.static_check.evidence import THIN, evidence

        return evidence(self.rule).kind not in THIN

    def line(self) -> str:
        return f"[{self.rule}] {self.where}: {self.message}; {self.remedy}"


@dataclass
class CheckReport:
    model: str
    target: str
    toolkit: str
    nodes: int
    seconds: float
    findings: list[StaticFinding] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """fails (an error with real-export evidence or a refusal by name), unknown (an error
        that rests on node tests only, or something nothing measured), else compiles."""
        errors = self.errors()
        if any(f.decisive for f in errors):
            return "fails"
        return "unknown" if errors or any(f.unknown for f in self.findings) else "compiles"

    @property
    def reason(self) -> str:
        """Why the verdict is unknown ("" for any other verdict)."""
        if self.verdict != "unknown":
            return ""
        thin = sorted({f.rule for f in self.errors()})
        unmeasured = sum(1 for f in self.findings if f.unknown and f.rule not in DATA_DEPENDENT | BOTH_WAYS)
        on_data = sorted({f.rule for f in self.findings if f.unknown and f.rule in DATA_DEPENDENT})
        both_ways = sorted({f.rule for f in self.findings if f.unknown and f.rule in BOTH_WAYS})
        parts = []
        if thin:
            parts.append(
                f"{', '.join(thin)} rest(s) on node tests only or an unisolated failure, "
                "no real export failing the same way"
            )
        if unmeasured:
            parts.append(f"{unmeasured} pattern(s) not measured")
        if on_data:
            parts.append(f"{', '.join(on_data)} depend(s) on the calibration data")
        if both_ways:
            parts.append(
                f"{', '.join(both_ways)}: measured both ways (real exports compile, other forms fail)"
            )
        return "; ".join(parts)

    @property
    def predicted_compile(self) -> bool:
        """Only a model the checker can judge in full is predicted to compile."""
        return self.verdict == "compiles"

    @property
    def learned_from(self) -> list[str]:
        """The models whose conversions on this machine decided some node here (`conversions`)."""
        models = [
            f.source.rsplit("model ", 1)[-1].strip("'")
            for f in self.findings
            if f.rule.startswith("learned-")
        ]
        return sorted(set(models))

    def errors(self) -> list[StaticFinding]:
        return [f for f in self.findings if f.severity == "error"]
