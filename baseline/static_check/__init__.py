"""Predict, from the ONNX graph alone, whether RKNN-Toolkit2 will compile a model, and why not.

No toolkit is needed and nothing is run: shape inference, a constant-propagation pass
and a set of rules, each with an id, the node it applies to, its source and a remedy.
The per-operator verdicts come from `baseline/data/op_support/`, measured with the real
toolkit by `scripts/measure_op_support.py`.

Modules: `findings` (what is reported), `graph` (shapes, types, constants), `model_rules` and
`node_rules` (the rules), `check` (runs them all).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baseline.static_check.findings import CheckReport, StaticFinding

if TYPE_CHECKING:
    from baseline.static_check.check import check_model
    from baseline.static_check.node_rules import op_support

__all__ = ["CheckReport", "StaticFinding", "check_model", "op_support"]


def __getattr__(name: str) -> Any:
    """`check_model` and `op_support` import onnx (~0.1 s): only when asked for. The verify
    process itself never runs them (the ONNX helper does), but it unpickles the helper's
    `CheckReport`, which imports this package."""
    if name == "check_model":
        from baseline.static_check.check import check_model

        return check_model
    if name == "op_support":
        from baseline.static_check.node_rules import op_support

        return op_support
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
