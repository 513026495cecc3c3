"""The child side of `baseline.tasks.team`: import the team's functions from the project, run
them on every sample, and answer one JSON object on the real stdout.

The request is a pickle from our own parent (baseline's arrays and names, nothing the
project wrote). The reply is JSON, so the parent never unpickles what team code produced.
Anything the team's code prints goes to stderr: stdout is kept for the reply alone.
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import sys
from pathlib import Path
from typing import Any


class TeamError(Exception):
    """A one-line reason the team's code could not be run or used."""


def main() -> None:
    reply_stream = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # prints, C-level ones included, go to stderr
    request = pickle.loads(sys.stdin.buffer.read())
    try:
        reply: dict[str, Any] = run(request)
    except TeamError as error:
        reply = {"error": str(error)}
    reply_stream.write(json.dumps(reply))
    reply_stream.flush()


def run(request: dict[str, Any]) -> dict[str, Any]:
    where = request["where"]
    sys.path.insert(0, request["root"])
    postprocess = load(request["postprocess"], request["functions"], where)
    golden = [result(postprocess, outputs, where, "golden", i) for i, outputs in enumerate(request["golden"])]
    candidate = [
        result(postprocess, outputs, where, "candidate", i) for i, outputs in enumerate(request["candidate"])
    ]
    reply: dict[str, Any] = {"golden": golden, "candidate": candidate}
    if request["compare"] is not None:
        compare = load(request["compare"], request["functions"], where)
        reply["verdicts"] = [
            verdict(compare, json.loads(g), json.loads(c), request["compare"], i)
            for i, (g, c) in enumerate(zip(golden, candidate, strict=True))
        ]
    return reply


def load(function: str, files: dict[str, str], where: str) -> Any:
    """The function, from exactly the project file the parent resolved."""
    dotted, _, name = function.partition(":")
    try:
        module = importlib.import_module(dotted)
    except Exception as error:
        raise TeamError(f"{where}: importing {dotted!r} raised {type(error).__name__}: {error}") from None
    found = getattr(module, "__file__", None)
    if found is None or Path(found).resolve() != Path(files[function]).resolve():
        raise TeamError(
            f"{where}: {dotted!r} imported from {found or 'no file'}, not the project's "
            f"{files[function]} (an installed module of the same name shadows it); rename the module"
        )
    target = getattr(module, name, None)
    if not callable(target):
        raise TeamError(f"{where}: module {dotted!r} has no function {name!r}; define it or fix the name")
    return target


def result(function: Any, outputs: dict[str, Any], where: str, side: str, index: int) -> str:
    """One sample's structured result as JSON text (keys sorted, so equal results are equal text)."""
    try:
        value = function(outputs)
    except Exception as error:
        raise TeamError(
            f"{where} raised {type(error).__name__} on the {side} outputs of sample {index}: {error}"
        ) from None
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise TeamError(
            f"{where} returned a result that is not JSON (sample {index}, {side}): {error}; "
            "return lists, dicts, numbers and strings (numpy values: `.tolist()` / `float()`)"
        ) from None


def verdict(function: Any, golden: Any, candidate: Any, name: str, index: int) -> list[Any]:
    """`[passed, message, numbers]` from whatever shape of answer the comparator gives."""
    try:
        answer = function(golden, candidate)
    except Exception as error:
        raise TeamError(
            f"compare {name!r} raised {type(error).__name__} on sample {index}: {error}"
        ) from None
    parts = list(answer) if isinstance(answer, tuple | list) else [answer]
    passed = parts[0] if parts else None
    message = parts[1] if len(parts) > 1 else ("passed" if passed else "failed")
    numbers = parts[2] if len(parts) > 2 else {}
    if not isinstance(passed, bool | int) or not isinstance(message, str) or not isinstance(numbers, dict):
        raise TeamError(
            f"compare {name!r} returned {answer!r} on sample {index}; return a bool, "
            "(passed, message) or (passed, message, {name: number})"
        )
    return [bool(passed), message, {str(key): number(value, name) for key, value in numbers.items()}]


def number(value: Any, name: str) -> float:
    try:
        converted = float(value)
    except (TypeError, ValueError):
        raise TeamError(f"compare {name!r}: number {value!r} is not a number") from None
    return converted
