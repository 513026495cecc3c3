"""Strings from files (locks, models, boards, toolkit logs) made safe to print.

A newline in a model name or a log line would forge a line of the report in a CI log (a fake
`PASSED`, a GitHub `::error::` command); an ANSI escape reaches the terminal; `[...]` in a
rich markup string is read as a style tag and swallowed. Every interpolated value goes
through `one_line` (plain text) or `markup_safe` (text printed with rich markup).
"""

from __future__ import annotations


def one_line(value: object) -> str:
    """`value` as one printable line: control characters shown as escapes (`\\n`, `\\x1b`)."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def first_line(text: str, limit: int = 160) -> str:
    """The first line of `text`, cut to `limit` characters with an ellipsis: a multi-line error
    (a toolkit traceback) where a message has room for one line."""
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def markup_safe(value: object) -> str:
    """`one_line(value)` with rich markup escaped, for strings printed with markup on."""
    from rich.markup import escape

    return escape(one_line(value))


def name_list(names: list[str], shown: int = 10) -> str:
    """The first `shown` names, then how many more: a line naming 1,000 models is not read."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
