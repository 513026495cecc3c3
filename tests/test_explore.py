"""`baseline explore`: real conversions of a quantized target's remedies, judged as an fp16 build."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import tomllib

from baseline.models.intent import QuantizationSpec, TargetSpec
from baseline.verification.explore import candidates, intent_line
from tests.conftest import LOCK

CLI = Callable[..., tuple[int, str, str]]


def w8a8(algorithm: str = "normal") -> TargetSpec:
    return TargetSpec(
        name="rk3588-w8a8",
        platform="rk3588",
        quantization=QuantizationSpec(dtype="w8a8", algorithm=algorithm),
    )


def test_candidates_are_the_target_and_each_single_change() -> None:
    found = candidates(w8a8("mmse"))
    assert [c.label for c in found] == [
        "as locked",
        "algorithm normal",
        "algorithm kl_divergence",
        "per-layer scales",
        "dtype w8a16",
        "dtype w16a16i",
        "dtype w16a16i_dfp",
    ]
    layer = next(c for c in found if c.label == "per-layer scales").target
    assert layer.quantization is not None and layer.quantization.method == "layer"
    assert layer.quantization.algorithm == "mmse" and layer.name == "rk3588-w8a8-layer-scales"
    fp16 = TargetSpec(name="rk3588", platform="rk3588")
    with pytest.raises(Exception, match="not quantized"):
        candidates(fp16)


def test_the_intent_line_keeps_the_target_name_and_is_toml() -> None:
    line = intent_line(candidates(w8a8())[1].target, "rk3588-w8a8")
    target = tomllib.loads(f"t = {line}")["t"]
    assert target == {
        "name": "rk3588-w8a8",
        "platform": "rk3588",
        "quantization": {"dtype": "w8a8", "algorithm": "mmse", "method": "channel"},
    }


@pytest.mark.toolkit
def test_explore_converts_every_candidate_and_writes_nothing(demo: Path, cli: CLI) -> None:
    lock, intent = demo / LOCK, demo / LOCK.with_suffix(".toml")
    before = (lock.read_bytes(), intent.read_bytes())
    code, out, err = cli(demo, "explore", "classifier", "--target", "rk3588-w8a8", "--lock", str(LOCK))
    assert code == 0, out + err
    assert "where rk3588-w8a8 loses accuracy" in out and "\n  [" in out  # layers from the analysis
    rows = {line.split(" | ")[0].strip(): line for line in out.splitlines() if " | " in line}
    assert {"as locked", "algorithm mmse", "algorithm kl_divergence", "per-layer scales"} <= rows.keys()
    assert "classification on 'probs'" in rows["as locked"]
    # rk3588 takes no w8a16 in toolkit 2.5.0: the candidate is shown refused, with the toolkit's reason
    assert "not built: " in rows["dtype w8a16"] and "w8a16" in rows["dtype w8a16"]
    # the demo's w8a8 build already ranks every class as onnxruntime does: nothing to restore
    assert "rk3588-w8a8 as locked already meets what an fp16 build meets: nothing to restore" in out
    assert "restores it" not in out
    assert (lock.read_bytes(), intent.read_bytes()) == before


@pytest.mark.toolkit
def test_explore_names_the_targets_of_a_model_for_an_unknown_one(demo: Path, cli: CLI) -> None:
    code, _, err = cli(demo, "explore", "classifier", "--target", "rk3588-int8", "--lock", str(LOCK))
    assert code == 2 and "has no target 'rk3588-int8' (its targets: rk3588, rk3588-w8a8)" in err


@pytest.mark.toolkit
def test_a_hybrid_target_locks_and_verifies_with_its_float_layers(demo: Path, cli: CLI) -> None:
    """`quantization.float_layers` goes through the toolkit's hybrid_quantization_step1/2 (toolkit
    2.5.0, which runs step 2 only in a new RKNN object): the build differs from plain w8a8 and
    the lock verifies green."""
    from baseline.project.lockfile import load_lock

    intent = demo / LOCK.with_suffix(".toml")
    plain = load_lock(demo / LOCK).model("classifier")
    assert plain is not None
    before = plain.conversion("rk3588-w8a8")
    text = intent.read_text().replace(
        'quantization = { dtype = "w8a8", algorithm = "normal" }',
        'quantization = { dtype = "w8a8", algorithm = "normal", float_layers = ["logits"] }',
    )
    intent.write_text(text)
    code, out, err = cli(demo, "lock", "--lock", str(LOCK))
    assert code == 0, out + err
    hybrid = load_lock(demo / LOCK).model("classifier")
    assert hybrid is not None
    after = hybrid.conversion("rk3588-w8a8")
    assert before is not None and after is not None and after.artifact.sha256 != before.artifact.sha256
    code, out, err = cli(demo, "verify", "--lock", str(LOCK), "--model", "classifier", "--no-cache")
    assert code == 0, out + err
