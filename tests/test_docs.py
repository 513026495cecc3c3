"""The documentation stays true: generated pages match the records, links resolve, the README stays short.

The intent reference and the JSON Schema are generated from `baseline.models` (see
`baseline.reference_docs`): a record that gains, loses or changes a key without a regeneration
fails here, with the command that regenerates them.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pydantic
import pytest

from baseline import reference_docs
from baseline.files.tomlfile import read_toml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_LIMIT = 300
SET_UP_COMMANDS = ("python3 -m pip install nox && nox -s demo", "python3 -m pip install nox && nox -s tests")
"""`.ci/run` runs these as the README gives them; a newcomer copies them from there."""
INTENTS = ("lockfiles/demo/baseline.toml", "bench/battery/baseline.toml")

STALE = f"is out of date with baseline/models; regenerate it: {reference_docs.REGENERATE}"


def test_the_intent_reference_matches_the_records() -> None:
    committed = (DOCS / reference_docs.REFERENCE_FILE).read_text(encoding="utf-8")
    assert committed == reference_docs.render_reference(), f"docs/{reference_docs.REFERENCE_FILE} {STALE}"


def test_the_schema_matches_the_records() -> None:
    committed = (DOCS / reference_docs.SCHEMA_FILE).read_text(encoding="utf-8")
    fresh = reference_docs.render_schema()
    # pydantic spells the same schema differently across the versions baseline admits (2.5 wraps
    # a `$ref` with a default in `allOf`, writes 1.0 for 1): the keys must agree under every one,
    # the bytes under the version that generated the file
    assert keys_of(json.loads(committed)) == keys_of(json.loads(fresh)), (
        f"docs/{reference_docs.SCHEMA_FILE} {STALE}"
    )
    if json.loads(committed)["$comment"] == json.loads(fresh)["$comment"]:
        assert committed == fresh, f"docs/{reference_docs.SCHEMA_FILE} {STALE}"


def keys_of(schema: dict[str, Any]) -> dict[str, tuple[list[str], list[str]]]:
    """Per record (and the top level): its property names and its required ones."""
    records = {"": schema, **schema["definitions"]}
    found = {}
    for name, record in records.items():
        shapes = [record, *record.get("anyOf", [])]
        for shape in (shape for shape in shapes if "properties" in shape):
            found[name] = (sorted(shape["properties"]), sorted(shape.get("required", [])))
    return found


def test_the_schema_names_the_pydantic_version_it_was_generated_with() -> None:
    # the exact comparison above runs only where this matches; a schema generated without it
    # would never be compared byte for byte
    assert f"pydantic {pydantic.VERSION}" in json.loads(reference_docs.render_schema())["$comment"]


@pytest.mark.parametrize("intent", INTENTS)
def test_the_schema_accepts_the_intents_in_the_repository(intent: str) -> None:
    # what baseline reads, an editor must not flag: bare target strings, a target named by its platform
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((DOCS / reference_docs.SCHEMA_FILE).read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    data = read_toml(ROOT / intent, "intent file", "")
    errors = [
        f"{list(error.absolute_path)}: {error.message}"
        for error in jsonschema.Draft7Validator(schema).iter_errors(data)
    ]
    assert errors == []


def test_the_readme_stays_short() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines < README_LIMIT, f"README.md has {lines} lines; move detail to a docs/ page and link it"


@pytest.mark.parametrize("command", SET_UP_COMMANDS)
def test_the_readme_keeps_the_set_up_commands(command: str) -> None:
    assert command in README.read_text(encoding="utf-8")


PAGES = [README, *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_relative_links_point_to_files(page: Path) -> None:
    missing = [
        target
        for target in relative_links(page.read_text(encoding="utf-8"))
        if not (page.parent / target).exists()
    ]
    assert missing == [], f"{page.relative_to(ROOT)} links to files that do not exist"


FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(markdown: str) -> list[str]:
    """Link targets inside the project (no scheme), anchors cut; code is not prose, so skipped."""
    prose = CODE_SPAN.sub("", FENCE.sub("", markdown))
    targets = (match.group(1).split("#")[0] for match in LINK.finditer(prose))
    return [target for target in targets if target and not re.match(r"^[a-z]+:", target)]


def test_the_link_finder_skips_code_and_addresses() -> None:
    text = "[a](docs/a.md#x) [b](https://example.com) [c](#here) `[d](gone.md)`\n```\n[e](gone.md)\n```\n"
    assert relative_links(text) == ["docs/a.md"]


def _documented_code(page: Path, anchor: str) -> str:
    """The first python block after `anchor` on `page`, dedented (it may sit in a list item)."""
    text = page.read_text(encoding="utf-8")
    block = text[text.index(anchor) :].split("```python\n", 1)[1].split("```", 1)[0]
    return textwrap.dedent(block)


def test_the_channels_first_recipe_keeps_the_model_s_arithmetic(tmp_path: Path) -> None:
    """docs/toolkit.md tells a team with only a channels-last ONNX (tf2onnx's WHENet: ImageNet
    colours, which the toolkit cannot hold per colour for an NHWC input) to put a Transpose in
    front. Its code, run as written: the new graph takes NCHW and computes the same numbers (to
    float rounding: onnxruntime may sum a transposed tensor in another order)."""
    import subprocess
    import sys

    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from baseline.files.images import colour_layout

    kernel = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    weight = numpy_helper.from_array(kernel, "w")
    nodes = [
        helper.make_node("Transpose", ["face"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["nchw", "w"], ["map"], pads=[1, 1, 1, 1]),
        helper.make_node("ReduceMean", ["face"], ["mean"], axes=[1, 2], keepdims=0),  # reads the input too
    ]
    graph = helper.make_graph(
        nodes,
        "nhwc",
        [helper.make_tensor_value_info("face", TensorProto.FLOAT, ["n", 16, 16, 3])],
        [
            helper.make_tensor_value_info("map", TensorProto.FLOAT, ["n", 4, 16, 16]),
            helper.make_tensor_value_info("mean", TensorProto.FLOAT, ["n", 3]),
        ],
        [weight],
    )
    source, target = tmp_path / "nhwc.onnx", tmp_path / "nchw.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), source)
    script = _documented_code(DOCS / "toolkit.md", 'id="channels-first"')
    subprocess.run([sys.executable, "-c", script, str(source), str(target)], check=True, timeout=120)
    rewritten = onnx.load(target)
    dims = [d.dim_param or d.dim_value for d in rewritten.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["n", 3, 16, 16] and colour_layout([1, 3, 16, 16]) == "nchw"
    pixels = np.random.default_rng(1).random((2, 16, 16, 3)).astype(np.float32)
    cpu = ["CPUExecutionProvider"]  # the lowest onnxruntime pinned requires the providers named
    before = ort.InferenceSession(str(source), providers=cpu).run(None, {"face": pixels})
    after = ort.InferenceSession(str(target), providers=cpu).run(None, {"face": pixels.transpose(0, 3, 1, 2)})
    for old, new in zip(before, after, strict=True):  # a sum may be taken in another order
        np.testing.assert_allclose(new, old, rtol=1e-6, atol=1e-6)
