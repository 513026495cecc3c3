"""The sign-off's sentences about fixtures and the exporter, from a lock edited by hand (no toolkit)."""

from __future__ import annotations

from baseline.models.lock import ExporterPin, FilePin, ImagesPin, Lock, ModelLock
from baseline.models.results import Report
from baseline.signoff import build_signoff, render_signoff_html, render_signoff_markdown

DIGEST = "0" * 64


def _pin(path: str) -> FilePin:
    return FilePin(path=path, sha256=DIGEST, size=1)


def _with(lock: Lock, name: str, **update: object) -> Lock:
    model = lock.model(name)
    assert model is not None
    changed: ModelLock = model.model_copy(update=update)
    return lock.model_copy(update={"models": [changed if m.name == name else m for m in lock.models]})


def _manual(lock: Lock, report: Report, model: str) -> str:
    sheet = build_signoff(lock, report, None)
    return next(item for item in sheet.manual if item.startswith(f"{model}: accuracy"))


def test_fixtures_are_named_as_the_lock_pins_them(demo_lock: Lock, handmade: Report) -> None:
    classifier = demo_lock.model("classifier")
    assert classifier is not None
    assert _manual(demo_lock, handmade, "classifier").endswith("(the gates used 2 random sample(s), seed 0)")

    photos = [_pin(f"images/{name}.jpg") for name in "abcd"]
    images = ImagesPin(input="image", resize="resize", pad=114, channels="RGB", files=photos)
    pictured = _with(
        demo_lock, "classifier", fixtures=classifier.fixtures.model_copy(update={"images": images})
    )
    assert _manual(pictured, handmade, "classifier") == (
        "classifier: accuracy on the real validation set "
        "(the gates used 4 photograph(s): a.jpg, b.jpg, c.jpg, d.jpg (fixtures.images))"
    )
    many = images.model_copy(update={"files": [_pin(f"images/{i:02}.png") for i in range(11)]})
    crowded = _with(demo_lock, "classifier", fixtures=classifier.fixtures.model_copy(update={"images": many}))
    assert "11 photograph(s): 00.png, 01.png, 02.png, 03.png, 04.png, 05.png, 06.png, 07.png and 3 more" in (
        _manual(crowded, handmade, "classifier")
    )

    user = classifier.fixtures.model_copy(update={"source": _pin("data/inputs.npz"), "seed": None})
    from_file = _with(demo_lock, "classifier", fixtures=user)
    assert _manual(from_file, handmade, "classifier").endswith(
        "(the gates used 2 sample(s) from data/inputs.npz (fixtures.path))"
    )


def test_no_exporter_is_not_an_exporter_outside_git(demo_lock: Lock, handmade: Report) -> None:
    cases = {
        "no exporter declared (exporter.script / exporter.command)": ExporterPin(),
        "exporter command 'python export.py', no script declared to trace in git": ExporterPin(
            command="python export.py"
        ),
        "exporter export.py not under git": ExporterPin(script=_pin("export.py")),
        "exporter export.py in a git work tree but never committed": ExporterPin(
            script=_pin("export.py"), repository=".", dirty=True
        ),
        "exporter export.py: commit not recorded (git is not installed": ExporterPin(
            script=_pin("export.py"), git_gap="git is not installed, so ..."
        ),
        "exporter commit 20c431373543 (clean)": None,  # the demo's own
    }
    for sentence, exporter in cases.items():
        lock = demo_lock if exporter is None else _with(demo_lock, "classifier", exporter=exporter)
        sheet = build_signoff(lock, handmade, None)
        markdown = render_signoff_markdown(sheet)
        line = next(
            line for line in markdown.splitlines() if line.startswith("ONNX fixtures/demo/classifier")
        )
        assert line.split("; ")[-1].startswith(sentence), (sentence, line)
        assert sentence.replace("'", "&#x27;") in render_signoff_html(sheet, handmade, lock)
