"""The gate contract: declared reads are the only reads, and they are what the cache key covers."""

from __future__ import annotations

from pathlib import Path

import pytest

from baseline import gates
from baseline.backends import capabilities, converter
from baseline.gates import GATES, run_gate
from baseline.gates.context import VerifyContext
from baseline.gates.contract import GateInputs, GateJob, Reads, UndeclaredInput, model_view
from baseline.models.lock import MatrixCell, ModelLock
from baseline.models.results import GateMetrics, GateResult
from baseline.project.layout import Project
from baseline.project.lockfile import load_lock
from baseline.verification.jobkeys import VerifyJob, key_recipe, lock_wide_dependencies
from baseline.verification.verify import plan_jobs
from tests.conftest import LOCK

pytestmark = pytest.mark.toolkit  # the locked demo is built with the real toolkit


class ForgetfulGate:
    """A gate that reads the fixtures but declares nothing: the bug the contract must catch."""

    NAME = "forgetful"

    def jobs(self, model: ModelLock) -> list[GateJob]:
        return [GateJob(self.NAME)]

    def reads(self, model: ModelLock, job: GateJob) -> Reads:
        return Reads()

    def check(self, job: GateJob, inputs: GateInputs) -> GateResult:
        inputs.tensors("fixtures")
        return inputs.result()


def context(demo: Path) -> VerifyContext:
    return VerifyContext(project=Project.locate(demo / LOCK), lock=load_lock(demo / LOCK))


def test_a_gate_that_reads_an_undeclared_file_fails(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(gates.GATES_BY_NAME, ForgetfulGate.NAME, ForgetfulGate())
    ctx = context(demo)
    model = ctx.lock.model("classifier")
    assert model is not None
    with pytest.raises(
        UndeclaredInput, match="'forgetful' read the pinned file 'fixtures' without declaring"
    ):
        run_gate(model, GateJob(ForgetfulGate.NAME), ctx)


@pytest.mark.parametrize(
    ("read", "what"),
    [
        (lambda i: i.run("onnxruntime", None), "the onnxruntime run"),
        (lambda i: i.output_stats("onnxruntime", None), "the onnxruntime run"),
        (lambda i: i.boards(), "the lock's boards"),
        (lambda i: i.matrix(), "the lock's matrix"),
        (lambda i: i.toolchain(), "the toolkit environment"),
        (lambda i: i.path("onnx"), "the pinned file 'onnx'"),
    ],
)
def test_every_kind_of_input_needs_a_declaration(demo: Path, read, what: str) -> None:
    ctx = context(demo)
    model = ctx.lock.model("classifier")
    assert model is not None
    inputs = GateInputs(ctx, model, GateJob("any"), Reads())
    with pytest.raises(UndeclaredInput, match=what):
        read(inputs)


def test_every_registered_gate_has_typed_metrics_registered_under_its_name() -> None:
    for gate in GATES:
        assert GateMetrics.for_gate(gate.NAME) is not None, gate.NAME
    # a result read back from a report or the cache gets its gate's record again
    stored = {
        "model": "m",
        "gate": "integrity",
        "status": "pass",
        "summary": "",
        "metrics": {"files": 3, "changed": 0},
    }
    again = GateResult.model_validate(stored)
    assert type(again.metrics).__name__ == "IntegrityMetrics" and again.metrics.headline() is not None  # type: ignore[union-attr]


def test_cache_keys_follow_declarations_a_matrix_cell_reruns_only_compat(demo: Path) -> None:
    """A recorded matrix cell is read by the compat checks alone: no other job's key moves."""
    ctx = context(demo)
    models = ctx.lock.models
    before = {job.label: key_recipe(ctx, job, lock_wide_dependencies(ctx)) for job in plan_jobs(models)}
    cell = {"toolkit": "2.5.0", "model": "classifier", "target": "rk3588", "compiled": True, "stage": "done"}
    ctx.lock = ctx.lock.model_copy(update={"matrix": [MatrixCell.model_validate(cell)]})
    after = {job.label: key_recipe(ctx, job, lock_wide_dependencies(ctx)) for job in plan_jobs(models)}
    changed = sorted(label for label in before if before[label] != after[label])
    assert changed == ["classifier checks/rk3588"]


def test_a_model_run_on_a_board_only_gets_compilable_and_artifact_on_that_backend(demo: Path) -> None:
    """rknn-device converts with the toolkit: its model gets the compilable gate, and the artifact
    gate judges that conversion instead of starting a simulator it never asked for."""
    model = load_lock(demo / LOCK).model("classifier")
    assert model is not None
    board_only = model.model_copy(
        update={
            "backends": ["onnxruntime", "rknn-device"],
            "references": [r for r in model.references if r.backend == "onnxruntime"],
        }
    )
    assert converter(board_only.backends) == "rknn-device" and capabilities("rknn-device").needs_board
    jobs: list[VerifyJob] = plan_jobs([board_only])
    gated = {(check.gate, check.backend) for job in jobs for check in job.checks}
    assert ("compilable", "rknn-device") in gated and ("artifact", "rknn-device") in gated
    assert not any(backend == "rknn-sim" for _, backend in gated)


def test_a_check_sees_only_its_own_target(demo: Path) -> None:
    model = load_lock(demo / LOCK).model("classifier")
    assert model is not None
    view = model_view(model, "rknn-sim", "rk3588")
    assert [t.name for t in view.targets] == ["rk3588"]
    assert {c.target for c in view.conversions} == {"rk3588"}
    assert {r.target for r in view.references} <= {None, "rk3588"}
