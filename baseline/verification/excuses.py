"""A warning when an `expect_fail` on the task gate excuses more than a known loss.

Without `against`, an expected task failure turns every result of that gate into `xfail`: the
build's comparison with its own locked outputs too, so a later regression of that build (a class
swap in an int8 head) would stay xfail and `verify` green. `against = "onnxruntime"` excuses
only the comparison with onnxruntime and keeps judging the build against itself.
"""

from __future__ import annotations

from baseline.models.lock import ModelLock
from baseline.verification.noise import noise_warnings


def broad_excuses(model: ModelLock) -> list[str]:
    """One line per task-gate `expect_fail` of `model` that has no `against`."""
    lines = []
    for expected in model.expect_fail:
        if expected.gate != "task" or expected.against is not None:
            continue
        where = f" on {expected.target}" if expected.target else ""
        lines.append(
            f"model {model.name!r}: the expect_fail of the task gate{where} has no `against`, so it "
            "excuses any result of that gate, a regression of the build against its own locked "
            'outputs included; add against = "onnxruntime" to that entry to excuse only the '
            "comparison with onnxruntime"
        )
    return lines


def model_warnings(model: ModelLock) -> list[str]:
    """What `lock` and every `verify` say about `model` beside the gates' results."""
    return [*noise_warnings(model), *broad_excuses(model)]
