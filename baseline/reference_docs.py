"""The intent file's reference page and JSON Schema, generated from the records it is parsed into.

Written by hand, a reference drifts from the code the day a key is added. Both files here are
rendered from `baseline.models.intent.Intent` and the records it holds: every key, its type,
default, allowed values and the attribute docstring written under it in the model. Run
`python -m baseline.reference_docs` (or `nox -s docs`) after changing a record;
`tests/test_docs.py` fails while the committed files differ from what this renders.

Only the records are read, never the library, so this sits just above `baseline.models`.
"""

from __future__ import annotations

import ast
import inspect
import json
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pydantic
from pydantic import BaseModel

from baseline.models.intent import Intent

REFERENCE_FILE = "intent-reference.md"
SCHEMA_FILE = "baseline.schema.json"
REGENERATE = "nox -s docs  (or: python -m baseline.reference_docs docs)"

CONSTRAINTS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "min_length": "length ≥", "max_length": "length ≤"}
"""Constraint attributes of pydantic / annotated-types metadata, and how the reference writes them."""

# Validators the schema cannot see: each accepts more than the fields alone say, and an editor
# must not flag what baseline reads. Kept next to the schema they correct.
BARE_STRING_RECORDS = {"TargetSpec": 'a bare platform name, an fp16 build: "rk3588"'}
FILLED_BY_VALIDATOR = {
    "TargetSpec": {"name": "the `platform`"},
    "DetectionTask": {"output": "the first of `outputs`"},
}


# ------------------------------------------------------------------ walking the records


@dataclass
class Section:
    """One record class, documented once, with every TOML table that holds it."""

    record: type[BaseModel]
    tables: list[str] = field(default_factory=list)


def walk(root: type[BaseModel] = Intent) -> list[Section]:
    """Every record reachable from `root`, breadth first, each with the tables it appears as."""
    sections: dict[type[BaseModel], Section] = {}
    queue: list[tuple[type[BaseModel], str, str]] = [(root, "", "")]  # record, key path, header
    while queue:  # the records hold no cycles: a record never contains itself
        record, path, header = queue.pop(0)
        sections.setdefault(record, Section(record)).tables.append(header)
        # a task's own tables (`golden`) differ by kind: their headers say which kind they belong to
        context = header[header.index(" kind") :] if " kind" in header else ""
        for name, info in record.model_fields.items():
            child_path = f"{path}.{name}" if path else name
            for child, key_path, table in nested_tables(info.annotation, child_path):
                queue.append((child, key_path, table + (f" ({context.strip()})" if context else "")))
    return list(sections.values())


def nested_tables(
    annotation: Any, path: str, array: bool = False
) -> Iterator[tuple[type[BaseModel], str, str]]:
    """The records a field's type holds, each with its key path and its TOML table header."""
    annotation = unwrap(annotation)
    origin = get_origin(annotation)
    if is_record(annotation):
        kind = discriminator(annotation)
        header = f"[[{path}]]" if array else f"[{path}]"
        yield annotation, path, header + (f' kind = "{kind}"' if kind else "")
    elif origin in (Union, types.UnionType):
        for member in get_args(annotation):
            yield from nested_tables(member, path, array)
    elif origin is list:
        yield from nested_tables(get_args(annotation)[0], path, array=True)
    elif origin is dict:
        yield from nested_tables(get_args(annotation)[1], f'{path}."NAME"', array)


def unwrap(annotation: Any) -> Any:
    """The type under `Annotated[...]` (constraints are read from the field separately)."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def is_record(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def discriminator(record: Any) -> str | None:
    """The `kind` literal a tagged union member is chosen by, if it has one."""
    if not is_record(record) or "kind" not in record.model_fields:
        return None
    values = get_args(unwrap(record.model_fields["kind"].annotation))
    return str(values[0]) if len(values) == 1 else None


# ------------------------------------------------------------------ docstrings


def attribute_docstrings(record: type[BaseModel]) -> dict[str, str]:
    """The string written under each field (`x: int = 0` then `\"\"\"...\"\"\"`), base classes first.

    pydantic only reads these with `use_attribute_docstrings` (2.7+, above our floor of 2.5), so
    they are read from the source, which every install of baseline ships.
    """
    found: dict[str, str] = {}
    for klass in reversed(record.__mro__):
        if not (is_record(klass) and klass.__module__.startswith("baseline.")):
            continue
        body = ast.parse(inspect.getsource(klass)).body[0]
        assert isinstance(body, ast.ClassDef)
        for statement, following in zip(body.body, body.body[1:], strict=False):
            found.update(documented_field(statement, following))
    return found


def documented_field(statement: ast.stmt, following: ast.stmt) -> dict[str, str]:
    """`{name: docstring}` when `statement` declares a field and `following` is a string under it."""
    if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
        return {}
    if not (isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)):
        return {}
    return {statement.target.id: inspect.cleandoc(str(following.value.value))}


def class_doc(record: type[BaseModel]) -> str:
    return inspect.cleandoc(record.__doc__ or "")


# ------------------------------------------------------------------ the Markdown page


def type_name(annotation: Any) -> str:
    """How a TOML writer thinks of the type: string, integer, array of ..., table."""
    annotation = unwrap(annotation)
    origin = get_origin(annotation)
    if annotation is Any or str(annotation).endswith("JsonValue"):
        return "any TOML value"
    if is_record(annotation):
        return f"table, [{annotation.__name__}](#{anchor(annotation)})"
    if origin is Literal:
        return "string"
    if origin in (Union, types.UnionType):
        members = [unwrap(arg) for arg in get_args(annotation) if arg is not type(None)]
        if len(members) > 1 and all(is_record(member) for member in members):
            return "table, one of " + ", ".join(f"[{m.__name__}](#{anchor(m)})" for m in members)
        return " or ".join(dict.fromkeys(type_name(member) for member in members))
    if origin is list:
        item = type_name(get_args(annotation)[0])
        return (
            f"array of tables{item.removeprefix('table')}" if item.startswith("table") else f"array of {item}"
        )
    if origin is tuple:
        items = get_args(annotation)
        return f"array of {len(items)} {type_name(items[0])}s"
    if origin is dict:
        return f"table of name → {type_name(get_args(annotation)[1])}"
    simple = {str: "string", int: "integer", float: "number", bool: "boolean"}
    return simple.get(annotation, getattr(annotation, "__name__", str(annotation)))


def allowed(annotation: Any, metadata: list[Any]) -> str:
    """Literal values and numeric / length / pattern constraints, wherever they are declared."""
    notes: list[str] = []
    for item in [*metadata, *constraints_inside(annotation)]:
        for name, symbol in CONSTRAINTS.items():
            if getattr(item, name, None) is not None:
                notes.append(f"{symbol} {getattr(item, name)}")
        if getattr(item, "pattern", None):
            notes.append(f"matches `{item.pattern}`")
        if getattr(item, "allow_inf_nan", None) is False:
            notes.append("finite")
    literals = literal_values(annotation)
    if literals:
        notes.insert(0, " \\| ".join(f'`"{value}"`' for value in literals))
    return ", ".join(dict.fromkeys(notes))


def constraints_inside(annotation: Any) -> Iterator[Any]:
    """Constraints written inside the type itself (`Annotated[str, StringConstraints(...)]`, items)."""
    if get_origin(annotation) is Annotated:
        yield from get_args(annotation)[1:]
        yield from constraints_inside(get_args(annotation)[0])
    elif get_origin(annotation) in (Union, types.UnionType, list, tuple):
        for arg in dict.fromkeys(get_args(annotation)):
            yield from constraints_inside(arg)


def literal_values(annotation: Any) -> list[Any]:
    annotation = unwrap(annotation)
    if get_origin(annotation) is Literal:
        return list(get_args(annotation))
    if get_origin(annotation) in (Union, types.UnionType):
        return [value for arg in get_args(annotation) for value in literal_values(arg)]
    return []


def default_text(record: type[BaseModel], name: str) -> str:
    info = record.model_fields[name]
    filled = FILLED_BY_VALIDATOR.get(record.__name__, {})
    if name in filled:
        return filled[name]
    if info.is_required():
        return "**required**"
    value = info.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "its own defaults"
    return f"`{json.dumps(to_plain(value), ensure_ascii=False)}`"


def to_plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, list | tuple):
        return [to_plain(item) for item in value]
    return value


def anchor(record: type[BaseModel]) -> str:
    return record.__name__.lower()


def cell(text: str) -> str:
    """One table cell: a docstring's lines joined, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def render_section(section: Section) -> list[str]:
    record = section.record
    tables = [table for table in section.tables if table] or ["top level"]
    lines = [
        f'<a id="{anchor(record)}"></a>',
        "",
        f"## `{tables[0]}`" if tables[0] != "top level" else "## Top level",
    ]
    if len(tables) > 1:
        lines += ["", "Also: " + ", ".join(f"`{table}`" for table in tables[1:]) + "."]
    if record.__name__ in BARE_STRING_RECORDS:
        lines += ["", f"Each entry may also be {BARE_STRING_RECORDS[record.__name__]}."]
    doc = class_doc(record)
    lines += ["", doc] if doc else []
    docs = attribute_docstrings(record)
    lines += ["", "| key | type | default | allowed | what it is |", "|---|---|---|---|---|"]
    for name, info in record.model_fields.items():
        row = [
            f"`{name}`",
            type_name(info.annotation),
            default_text(record, name),
            allowed(info.annotation, list(info.metadata)),
            cell(docs.get(name, "")),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return lines


HEADER = """# `baseline.toml` reference

<!-- Generated by baseline/reference_docs.py from the pydantic records; do not edit by hand.
     Regenerate with: {regenerate} -->

Every key the intent file accepts, table by table, from the records `baseline.toml` is parsed
into (`baseline/models/`). A key that is not listed is an error: records refuse unknown keys, so
a typo never passes silently. "unset" means the key may be left out and nothing is assumed; a
model's unset keys fall back to `[defaults]`. Paths are relative to the project root.

## Editor support

[`baseline.schema.json`](baseline.schema.json) is the JSON Schema of the same records, for
editors that complete and check TOML keys: taplo and the Even Better TOML extension of VS Code,
which uses taplo. Either put a directive on the first line of `baseline.toml`:

```toml
#:schema ./docs/baseline.schema.json
```

(a path relative to the TOML file, or an `https://` address of the raw file), or associate it
for the whole repository in a `.taplo.toml` at the root:

```toml
[[rule]]
include = ["**/baseline.toml"]

[rule.schema]
path = "./docs/baseline.schema.json"
```

The schema follows the records; baseline's own validation stays the judge (it also checks
what spans several keys: unique names, `stop` after `start`, a raw detection head's `outputs`).

"""


def render_reference(root: type[BaseModel] = Intent) -> str:
    lines = HEADER.format(regenerate=REGENERATE).splitlines()
    for section in walk(root):
        lines += ["", *render_section(section)]
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------ the JSON Schema


def render_schema(root: type[BaseModel] = Intent) -> str:
    """Draft-07 JSON Schema (the dialect TOML editors read best) with every docstring as description."""
    schema = root.model_json_schema(ref_template="#/definitions/{model}")
    definitions = schema.pop("$defs", {})
    describe(schema, root)
    for record in (section.record for section in walk(root)):
        if record.__name__ in definitions:
            describe(definitions[record.__name__], record)
    for name, keys in FILLED_BY_VALIDATOR.items():
        required = [key for key in definitions[name].get("required", []) if key not in keys]
        definitions[name]["required"] = required
    for name, note in BARE_STRING_RECORDS.items():
        definitions[name] = {"anyOf": [{"type": "string", "description": note}, definitions[name]]}
    document = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        # pydantic words a schema differently from version to version: the test compares bytes
        # only under the version named here, and the keys under any
        "$comment": f"Generated by baseline/reference_docs.py with pydantic {pydantic.VERSION}; do not edit. "
        f"Regenerate: {REGENERATE}",
        **schema,
        "title": "baseline.toml",
        "definitions": definitions,
    }
    return json.dumps(draft_07(document), indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def describe(schema: dict[str, Any], record: type[BaseModel]) -> None:
    docs = attribute_docstrings(record)
    for name, prop in schema.get("properties", {}).items():
        if name in docs:
            prop.setdefault("description", " ".join(docs[name].split()))


def draft_07(node: Any) -> Any:
    """2020-12's tuple keyword in draft-07 spelling (`input_size`), recursively."""
    if isinstance(node, list):
        return [draft_07(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: draft_07(value) for key, value in node.items()}
    if "prefixItems" in converted:
        converted["items"] = converted.pop("prefixItems")
    return converted


# ------------------------------------------------------------------ writing


def rendered() -> dict[str, str]:
    """File name → content, for every generated page in `docs/`."""
    return {REFERENCE_FILE: render_reference(), SCHEMA_FILE: render_schema()}


def write(docs: Path) -> list[Path]:
    written = []
    for name, text in rendered().items():
        path = docs / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def main(argv: list[str]) -> int:
    docs = Path(argv[0]) if argv else Path("docs")
    if not docs.is_dir():
        print(f"error: {docs} is not a folder; pass the docs/ folder of the checkout", file=sys.stderr)
        return 2
    for path in write(docs):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
