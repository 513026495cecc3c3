"""Sign-off: pinned versions and hashes, measured values against limits, deltas, what is left by hand."""

from __future__ import annotations

import pytest

from baseline.models.lock import AuditEntry, Lock
from baseline.models.results import GateResult, Report, Status
from baseline.signoff import ReleaseChange, build_signoff, render_signoff_html, render_signoff_markdown
from tests.report.conftest import SVG_ELEMENT, assert_well_formed

pytestmark = pytest.mark.toolkit  # every test here drives the real toolkit


def _previous(lock: Lock) -> Lock:
    """The lock as it was before: another toolkit commit, another classifier build, other outputs."""
    classifier = lock.models[0]
    build = classifier.conversions[0]
    older_build = build.model_copy(
        update={
            "artifact": build.artifact.model_copy(update={"sha256": "a" * 64}),
            "metadata": build.metadata.model_copy(update={"fingerprint": "b" * 64}),
        }
    )
    golden = classifier.references[0]
    older_logits = golden.outputs[0].model_copy(update={"mean": 0.1, "std": 0.25})
    older_classifier = classifier.model_copy(
        update={
            "conversions": [older_build, *classifier.conversions[1:]],
            "references": [
                golden.model_copy(update={"outputs": [older_logits, *golden.outputs[1:]]}),
                *classifier.references[1:],
            ],
        }
    )
    retired = lock.models[1].model_copy(update={"name": "retired"})
    toolkit = lock.toolkits[0].model_copy(update={"commit": "0ld0ld0l"})
    return lock.model_copy(
        update={
            "models": [older_classifier, retired, *lock.models[2:-1]],  # overflow is new
            "toolkits": [toolkit],
            "toolchain": lock.toolchain.model_copy(update={"onnxruntime": "0.0.1"}),  # no real version
        }
    )


def test_versions_hashes_and_measured_gates(verified: tuple[Report, Lock]) -> None:
    report, lock = verified
    text = render_signoff_markdown(build_signoff(lock, report, None))
    toolkit = lock.toolkits[0]
    assert f"| RKNN-Toolkit2 {toolkit.version} | commit {toolkit.commit}; python {toolkit.python};" in text
    assert f"| host onnxruntime | {lock.toolchain.onnxruntime} |" in text
    for model in lock.models:
        assert f"sha256 {model.onnx.sha256}, opset ai.onnx 13" in text
        for pin in model.conversions:
            assert f"| {pin.artifact.sha256} | {pin.metadata.fingerprint} |" in text
    assert "| rk3588-w8a8 | rk3588 | w8a8 / normal / channel |" in text
    assert "- [x] consistency rknn-sim/rk3588-w8a8: min cosine (logits) 0.99" in text
    assert "≥ 0.99\n" in text and "≥ 0.9999\n" in text  # quantized and fp16 tolerances
    assert "- [x] drift rknn-sim/rk3588: worst drift / allowed (logits) 0 ≤ 1" in text
    assert "- [ ] consistency rknn-sim/rk3588: SKIP not built; see compilable" in text  # nms_head
    assert "- [x] compilable rknn-sim/rk3588: XFAIL expected failure (RKNN cannot compile" in text
    assert "no previous lock given" in text


def test_manual_items_are_open_checkboxes(verified: tuple[Report, Lock]) -> None:
    report, lock = verified
    signoff = build_signoff(lock, report, None)
    text = render_signoff_markdown(signoff)
    manual = text.split("## Still to check by hand\n\n")[1].splitlines()
    assert manual == [f"- [ ] {item}" for item in signoff.manual]
    assert manual[0] == (
        "- [ ] run classifier, detector, overflow on a physical rk3588 board "
        "(the gates above ran on the simulator)"
    )
    assert (
        "- [ ] classifier: accuracy on the real validation set (the gates used 2 random sample(s), seed 0)"
        in manual
    )
    assert any(line.startswith("- [ ] sign-off by") for line in manual)
    assert any("expected failures are still acceptable: nms_head static rk3588" in line for line in manual)


def test_deltas_against_a_previous_lock(verified: tuple[Report, Lock]) -> None:
    report, lock = verified
    signoff = build_signoff(lock, report, _previous(lock))
    sha = lock.models[0].conversions[0].artifact.sha256
    fingerprint = lock.models[0].conversions[0].metadata.fingerprint or ""
    logits = lock.models[0].references[0].outputs[0]
    mean, std = logits.mean or 0.0, logits.std or 0.0
    assert signoff.changes is not None
    assert set(signoff.changes) == {
        ReleaseChange("version", "host onnxruntime", "0.0.1", lock.toolchain.onnxruntime),
        ReleaseChange("version", "RKNN-Toolkit2 2.5.0 commit", "0ld0ld0l", lock.toolkits[0].commit or ""),
        ReleaseChange("model", "model retired", "present", "removed"),
        ReleaseChange("model", "model detector", "absent", "added"),
        ReleaseChange("model", "model overflow", "absent", "added"),
        ReleaseChange("artifact", "classifier rk3588 .rknn sha256", "aaaaaaaaaaaa…", f"{sha[:12]}…"),
        ReleaseChange("artifact", "classifier rk3588 fingerprint", "bbbbbbbbbbbb…", f"{fingerprint[:12]}…"),
        ReleaseChange(
            "statistics",
            "classifier onnxruntime 'logits' mean",
            "0.1",
            f"{mean:.6g} ({(mean - 0.1) / 0.1:+.2%})",
        ),
        ReleaseChange(
            "statistics",
            "classifier onnxruntime 'logits' std",
            "0.25",
            f"{std:.6g} ({(std - 0.25) / 0.25:+.2%})",
        ),
    }
    text = render_signoff_markdown(signoff)
    assert "| classifier rk3588 fingerprint | bbbbbbbbbbbb… |" in text
    assert "| model retired | present | removed |" in text
    assert "- [ ] every change since the previous lock is intended" in text


def test_an_unchanged_lock_has_no_deltas(verified: tuple[Report, Lock]) -> None:
    report, lock = verified
    signoff = build_signoff(lock, report, lock)
    assert signoff.changes == []
    assert "## Changes since the previous lock\n\nno changes\n" in render_signoff_markdown(signoff)


def test_failed_gates_stay_unticked_with_their_numbers(retrained: tuple[Report, Lock]) -> None:
    report, lock = retrained
    text = render_signoff_markdown(build_signoff(lock, report, None))
    assert "**FAILED**" in text
    drift = next(line for line in text.splitlines() if line.startswith("- [ ] drift rknn-sim/rk3588:"))
    assert "FAIL" in drift and "worst drift / allowed" in drift and ", needs ≤ 1)" in drift
    assert "- [ ] integrity: FAIL 1 of 8 files changed" in text


def test_audit_entries_are_listed_escaped(verified: tuple[Report, Lock]) -> None:
    report, lock = verified
    entry = AuditEntry(
        model="classifier", author="Ada <ada@example.com>", date="2025-01-02", reason="retrained"
    )
    text = render_signoff_markdown(build_signoff(lock.model_copy(update={"audit": [entry]}), report, None))
    assert "## Audit trail\n\n- 2025-01-02 Ada &lt;ada@\u2060example.com&gt;, classifier: retrained\n" in text


def test_a_pass_on_a_board_ticks_off_the_board_check(verified: tuple[Report, Lock]) -> None:
    report, lock = verified
    on_board = [
        GateResult(
            model="classifier",
            gate="consistency",
            backend="rknnlite",
            target=t,
            status=Status.PASS,
            summary="",
        )
        for t in ("rk3588", "rk3588-w8a8")
    ]
    signoff = build_signoff(lock, Report(lock=report.lock, results=[*report.results, *on_board]), None)
    assert signoff.manual[0].startswith("run detector, overflow on a physical rk3588 board")


def test_signoff_html_is_self_contained_with_plots(verified: tuple[Report, Lock]) -> None:
    report, lock = verified
    document = render_signoff_html(build_signoff(lock, report, _previous(lock)), report, lock)
    assert_well_formed(document)
    assert "<h1>Sign-off: PASSED</h1>" in document
    assert '<input type="checkbox" checked> consistency rknn-sim/rk3588-w8a8: min cosine' in document
    assert '<input type="checkbox"> run classifier, detector, overflow on a physical rk3588 board' in document
    assert f'<td class="hash">{lock.models[0].onnx.sha256}</td>' not in document  # the ONNX hash is prose
    assert f'<td class="hash">{lock.models[0].conversions[0].artifact.sha256}</td>' in document
    assert "<td>classifier rk3588 fingerprint</td>" in document
    assert len(SVG_ELEMENT.findall(document)) >= len(lock.models)


def test_statistics_within_the_drift_tolerance_are_not_changes(verified: tuple[Report, Lock]) -> None:
    report, lock = verified
    classifier = lock.models[0]
    golden = classifier.references[0]
    nudged = [stats.model_copy(update={"mean": (stats.mean or 0.0) + 1e-9}) for stats in golden.outputs]
    previous = lock.model_copy(
        update={
            "models": [
                classifier.model_copy(
                    update={
                        "references": [
                            golden.model_copy(update={"outputs": nudged}),
                            *classifier.references[1:],
                        ]
                    }
                ),
                *lock.models[1:],
            ]
        }
    )
    assert build_signoff(lock, report, previous).changes == []


def test_the_sign_off_names_every_change_baseline_diff_finds_beyond_statistics(
    verified: tuple[Report, Lock],
) -> None:
    report, lock = verified
    classifier = lock.models[0]
    previous = lock.model_copy(
        update={
            "models": [
                classifier.model_copy(
                    update={
                        "fixtures": classifier.fixtures.model_copy(update={"sha256": "c" * 64}),
                        "toolkit": classifier.toolkit.model_copy(update={"unknown_errors": "fail"}),
                    }
                ),
                *lock.models[1:],
            ]
        }
    )
    assert set(build_signoff(lock, report, previous).changes or []) == {
        ReleaseChange(
            "model", "classifier fixtures sha256", "cccccccccccc…", f"{classifier.fixtures.sha256[:12]}…"
        ),
        ReleaseChange(
            "model", "classifier toolkit unknown_errors", "fail", classifier.toolkit.unknown_errors
        ),
    }


def test_limits_measured_at_lock_are_listed_for_review(verified: tuple[Report, Lock]) -> None:
    from baseline.models.calibration import Measured, MeasuredLimit

    report, lock = verified
    classifier = lock.models[0]
    limit = MeasuredLimit(
        key="logits",
        table="consistency",
        max_mismatch_ratio=0.012,
        measured="worst of 2 runs on rknn-sim/rk3588",
    )
    measured = Measured(
        runs=2,
        margin=1.5,
        fixtures_sha256=classifier.fixtures.sha256,
        onnx_sha256=classifier.onnx.sha256,
        limits=[limit],
        varying_fingerprints=["rk3588"],
    )
    pinned = lock.model_copy(
        update={"models": [classifier.model_copy(update={"measured": measured}), *lock.models[1:]]}
    )
    signoff = build_signoff(pinned, report, None)
    for text in (render_signoff_markdown(signoff), render_signoff_html(signoff, report, pinned)):
        assert "Measured at lock beyond the intent" in text
        assert "max_mismatch_ratio = 0.012 (worst of 2 runs on rknn-sim/rk3588)" in text
        assert "rk3588: two conversions gave different fingerprints" in text
