"""Everything the CLI prints goes through one `Output`: results on stdout, the rest on stderr.

Keeping progress, notes and errors on stderr is what lets `--format json` pipe cleanly.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console, RenderableType
from rich.text import Text

from baseline.progress import CACHED_SUFFIX, JobProgress
from baseline.textsafe import markup_safe as escape
from baseline.textsafe import one_line

if TYPE_CHECKING:
    from baseline.report.text import Line


class Output:
    """The CLI's two streams, with one method per kind of thing it prints."""

    def __init__(self) -> None:
        # Consoles resolve sys.stdout / sys.stderr at print time, so CliRunner's capture works.
        self.out = Console(highlight=False, soft_wrap=True)
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)

    def line(self, text: RenderableType, width: int | None = None) -> None:
        """A result line on stdout; `text` may carry rich markup (escape what users wrote)."""
        self.out.print(text, width=width)

    def lines(self, lines: list[Line]) -> None:
        """Many result lines on stdout, rendered in one go: a `print` per line cost ~0.3 ms,
        0.3 s for the 1,000 lines of a large zoo."""
        if not lines:
            return
        from baseline.report.text import plain, styled  # only commands that report pay for it

        if self.out.color_system is None:  # a pipe or a CI log: styles are dropped anyway
            self.out.file.write(plain(lines))
            self.out.file.flush()
            return
        self.out.print(Text("\n").join(styled(line) for line in lines))

    def document(self, text: str) -> None:
        """A machine-readable document (JSON, a report) on stdout, byte for byte."""
        sys.stdout.write(text)

    def emit(self, text: str, output: Path | None) -> None:
        """A document to stdout, or atomically to `output` with a note on stderr."""
        if output is None:
            self.document(text)
            return
        from baseline.fsutil import write_atomic

        write_atomic(output, text.encode())
        self.err.print(f"report written to {output}", markup=False)

    def progress(self, message: str) -> None:
        """Progress of long steps (toolkit installs, each model locked), on stderr; in a CI log
        as plain text written as it is (rich's print cost ~1.4 ms a line there)."""
        if self.err.color_system is None:
            self._plain(one_line(message))
            return
        self.err.print(f"[dim]… {escape(message)}[/]")

    def _plain(self, text: str) -> None:
        """A progress line on stderr as plain text, written as it is: rich's print costs
        ~0.3-1.4 ms a line, which a CI log of 1,000 models pays 1,000 times."""
        print(f"… {text}", file=self.err.file, flush=True)

    def warning(self, message: str) -> None:
        """Something the user must know that does not stop the command, on stderr."""
        self.err.print(f"[bold yellow]warning:[/] {escape(message)}")

    def error(self, message: str) -> None:
        self.err.print(f"[bold red]error:[/] {escape(message)}")

    @property
    def width(self) -> int:
        return self.out.width

    @contextlib.contextmanager
    def job_progress(self) -> Iterator[JobProgress]:
        """A progress bar on a terminal; in CI logs, one plain line per model."""
        if self.err.is_terminal:
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


output = Output()
