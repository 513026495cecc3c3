"""Reality outranks prediction: where `compilable` converted a model for a target, the `static`
prediction for that target never fails it (a "does not compile" the compiler contradicted passes;
one it confirmed, where the intent declares the build's failure, is expected too), and the
outcome is kept for `baseline check`.

Applied to a verification's results after every job ran (or came from the cache), so a cached
prediction is judged against the compiler of the same run.
"""

from __future__ import annotations

from baseline.gates import compilable, static
from baseline.models.lock import ModelLock
from baseline.models.results import GateResult, Status
from baseline.verification.observations import CompileObservations, Observation, observation_key


def reality_first(
    models: list[ModelLock], results: list[GateResult], observations: CompileObservations | None = None
) -> list[GateResult]:
    """`results` with each contradicted prediction turned into a pass that says so; every real
    outcome of a model the static check judged is recorded in `observations`."""
    by_name = {model.name: model for model in models}
    builds = {
        (r.model, r.target): r
        for r in results
        if r.gate == compilable.NAME and r.status != Status.ERROR and r.metrics is not None
    }
    judged = []
    for result in results:
        build = builds.get((result.model, result.target)) if result.gate == static.NAME else None
        if build is None:
            judged.append(result)
            continue
        outcome = compilable.compiled(build)
        if observations is not None and result.target is not None:
            _record(observations, by_name[result.model], result, outcome)
        declared = build.status == Status.XFAIL  # the intent expects this build to fail
        judged.append(static.outranked(result, outcome, declared))
    return judged


def _record(
    observations: CompileObservations, model: ModelLock, prediction: GateResult, compiled: bool
) -> None:
    assert prediction.target is not None
    target = model.target(prediction.target)
    key = observation_key(model.onnx.sha256, model.toolkit.version, target.platform, target.quantized)
    metrics = prediction.metrics
    if isinstance(metrics, static.StaticMetrics):
        rules, verdict = tuple(metrics.rules), metrics.verdict or "unknown"
    else:  # a prediction that could not run
        rules, verdict = (), "unknown"
    observations.put(key, Observation(compiled=compiled, predicted=verdict, rules=rules, model=model.name))
