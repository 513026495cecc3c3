"""op-refused counts a single-op failure for a node only where it was measured with the node's
element types, unless the refusal is about constness (issue 33, session 14: a float8
QuantizeLinear's SIGSEGV stood in for the int8 one, which compiles inside QDQ exports)."""

from __future__ import annotations

from onnx import helper

from baseline.static_check.measured import builds_for, measured_verdict

TOOLKIT = "2.5.0"
QUANTIZE = helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["y"])


def verdict(pattern: set[int], output: str) -> dict[str, bool | None]:
    """rule → thin, for a QuantizeLinear of float32 to `output` on rk3588, looked up in the
    single-op table alone (no real-export signature)."""
    findings = measured_verdict(
        QUANTIZE, "node 'y'", TOOLKIT, "rk3588", frozenset(pattern), "float32", {0: "float32", -1: output}
    )
    return {f.rule: f.thin for f in findings}


def test_the_table_measured_quantizelinear_with_uint8_and_float8_only() -> None:
    # the premise: if an int8 build is ever measured, the test below must be rewritten
    outputs = {b.types[-1] for b in builds_for(TOOLKIT, "QuantizeLinear", "rk3588")}
    assert "int8" not in outputs and {"uint8", "float8_e4m3fn"} <= outputs


def test_a_float8_crash_does_not_stand_for_int8() -> None:
    assert set(verdict({0}, "int8")) == {"op-not-measured"}


def test_the_float8_crash_still_refuses_float8() -> None:
    assert "op-refused" in verdict({0}, "float8_e4m3fn")


def test_a_computed_scale_is_refused_by_name_for_any_type() -> None:
    # "The input 1 of QuantizeLinear('y') need to be constant", measured for uint8 and both float8s
    assert verdict({0, 1, 2}, "int8") == {"op-refused": False}
