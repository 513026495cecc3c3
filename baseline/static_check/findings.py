"""What the static check reports: findings, each with a rule id, a place, a remedy and a source."""

from __future__ import annotations

from dataclasses import dataclass, field

CUT_REMEDY = "cut the graph before it (load_onnx(outputs=[...])) and run that part on the CPU"
MEASURED = "measured with RKNN-Toolkit2 (baseline/data/op_support)"


@dataclass(frozen=True)
class StaticFinding:
    rule: str
    severity: str  # error: predicted not to compile; warning: compiles, worth knowing
    where: str
    message: str
    remedy: str
    source: str
    unknown: bool = False  # the checker cannot judge this: the verdict is "unknown", not "compiles"

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
        """fails (an error), unknown (something the checker cannot judge), else compiles."""
        if self.errors():
            return "fails"
        return "unknown" if any(f.unknown for f in self.findings) else "compiles"

    @property
    def predicted_compile(self) -> bool:
        """Only a model the checker can judge in full is predicted to compile."""
        return self.verdict == "compiles"

    def errors(self) -> list[StaticFinding]:
        return [f for f in self.findings if f.severity == "error"]
