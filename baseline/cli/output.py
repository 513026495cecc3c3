"""Everything the CLI prints goes through one `Output`: results on stdout, the rest on stderr.

Keeping progress, notes and errors on stderr is what lets `--format json` pipe cleanly.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from baseline.files.textsafe import markup_safe as escape
from baseline.files.textsafe import one_line
from baseline.runtime.progress import CACHED_SUFFIX, JobProgress

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from baseline.report.text import Line

FORCING_A_TERMINAL = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
"""Variables with which rich styles a stream that is not a terminal."""


class Output:
    """The CLI's two streams, with one method per kind of thing it prints.

    In a pipe or a CI log rich would drop every style, so plain text is written as it is and
    rich is not even imported (~0.02 s of CPU of every command there); on a terminal, or where
    a variable forces one, rich renders."""

    # Consoles resolve sys.stdout / sys.stderr at print time, so CliRunner's capture works.
    @functools.cached_property
    def out(self) -> Console:
        from rich.console import Console

        return Console(highlight=False, soft_wrap=True)

    @functools.cached_property
    def err(self) -> Console:
        from rich.console import Console

        return Console(stderr=True, highlight=False, soft_wrap=True)

    def line(self, text: RenderableType, width: int | None = None) -> None:
        """A result line on stdout; `text` may carry rich markup (escape what users wrote)."""
        self.out.print(text, width=width)

    def lines(self, lines: list[Line]) -> None:
        """Many result lines on stdout, rendered in one go: a `print` per line cost ~0.3 ms,
        0.3 s for the 1,000 lines of a large zoo."""
        if not lines:
            return
        from baseline.report.text import plain, styled  # only commands that report pay for it

        if _unstyled(sys.stdout) or self.out.color_system is None:  # styles would be dropped anyway
            sys.stdout.write(plain(lines))
            sys.stdout.flush()
            return
        from rich.text import Text

        self.out.print(Text("\n").join(styled(line) for line in lines))

    def document(self, text: str) -> None:
        """A machine-readable document (JSON, a report) on stdout, byte for byte."""
        sys.stdout.write(text)

    def emit(self, text: str, output: Path | None) -> None:
        """A document to stdout, or atomically to `output` with a note on stderr."""
        if output is None:
            self.document(text)
            return
        from baseline.files.fsutil import write_atomic

        write_atomic(output, text.encode())
        self.note(f"report written to {output}")

    def note(self, message: str) -> None:
        """A line about what the command did, on stderr, as written."""
        if _unstyled(sys.stderr):
            print(message, file=sys.stderr, flush=True)
            return
        self.err.print(message, markup=False)

    def progress(self, message: str) -> None:
        """Progress of long steps (toolkit installs, each model locked), on stderr; in a CI log
        as plain text written as it is (rich's print cost ~1.4 ms a line there)."""
        if _unstyled(sys.stderr) or self.err.color_system is None:
            self._plain(one_line(message))
            return
        self.err.print(f"[dim]… {escape(message)}[/]")

    def _plain(self, text: str) -> None:
        """A progress line on stderr as plain text, written as it is: rich's print costs
        ~0.3-1.4 ms a line, which a CI log of 1,000 models pays 1,000 times."""
        print(f"… {text}", file=sys.stderr, flush=True)

    def warning(self, message: str) -> None:
        """Something the user must know that does not stop the command, on stderr."""
        self._labelled("warning:", "bold yellow", message)

    def error(self, message: str) -> None:
        self._labelled("error:", "bold red", message)

    def _labelled(self, label: str, style: str, message: str) -> None:
        if _unstyled(sys.stderr):  # before `escape`, which imports rich
            print(f"{label} {one_line(message)}", file=sys.stderr, flush=True)
            return
        self.err.print(f"[{style}]{label}[/] {escape(message)}")

    @property
    def width(self) -> int:
        return self.out.width

    @contextlib.contextmanager
    def job_progress(self) -> Iterator[JobProgress]:
        """A progress bar on a terminal; in CI logs, one plain line per model."""
        if not _unstyled(sys.stderr) and self.err.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
            with Progress(*columns, console=self.err, transient=True) as bar:
                task = bar.add_task("verifying", total=None)
                yield lambda done, total, label: bar.update(
                    task, completed=done, total=total, description=label
                )
            return
        yield self._plain_job_progress()

    def _plain_job_progress(self) -> JobProgress:
        """One line per model as its first job runs; jobs answered from the cache are counted
        and the count printed once at the end (a log of 1,000 cached models said nothing 1,000
        times)."""
        seen: set[str] = set()
        cached = 0

        def plain(done: int, total: int, label: str) -> None:
            nonlocal cached
            if label.endswith(CACHED_SUFFIX):
                cached += 1
                return
            if done >= total:
                if cached:
                    self._plain(f"{cached} jobs answered from the cache")
                return
            model = label.split(" ", 1)[0]
            if model not in seen:
                seen.add(model)
                self._plain(f"[{done}/{total}] {model}")

        return plain


def _unstyled(stream: TextIO) -> bool:
    """Whether rich would write plain text to `stream`, known without importing it: not a
    terminal, and no variable forcing one (with one, rich decides)."""
    isatty = getattr(stream, "isatty", None)
    forced = any(name in os.environ for name in FORCING_A_TERMINAL)
    return not forced and not (isatty is not None and isatty())


output = Output()
