"""Gate results are built through typed doors: no check edits a record with an unchecked dict."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from baseline import gates
from baseline.models.base import replaced
from baseline.models.results import GateResult, Status
from baseline.models.tolerances import DriftTolerance

GATES_FOLDER = Path(gates.__file__).parent


def test_no_gate_edits_a_record_with_model_copy_update() -> None:
    """`model_copy(update=...)` checks neither keys nor values (issue 30): gates build results
    through `GateInputs` and change them with `GateResult.but` or `replaced`."""
    offenders = [
        f"{path.name}:{number}"
        for path in sorted(GATES_FOLDER.glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"model_copy\(", line)
    ]
    assert offenders == []


def test_replaced_refuses_an_unknown_field_and_a_wrong_value() -> None:
    tolerance = DriftTolerance()
    assert replaced(tolerance, atol=0.5).atol == 0.5
    assert replaced(tolerance, atol=0.5).rtol == tolerance.rtol
    with pytest.raises(TypeError, match="no field 'atoll'"):
        replaced(tolerance, atoll=0.5)
    with pytest.raises(ValidationError):
        replaced(tolerance, atol="wide")


def test_but_changes_only_what_it_names_and_can_clear_the_hint() -> None:
    result = GateResult(model="m", gate="static", status=Status.FAIL, summary="s", hint="h", details=["d"])
    passed = result.but(status=Status.PASS, hint=None)
    assert (passed.status, passed.summary, passed.hint, passed.details) == (Status.PASS, "s", None, ["d"])
    assert result.but(summary="t").hint == "h"
