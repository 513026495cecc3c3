"""Whole-process measurements: every process a run starts is counted, and each run is checked.

A measured command runs as a child of this process. Its CPU time comes from `os.wait4`, which
adds the CPU of every descendant the command itself waited for (baseline reaps its toolkit
workers and ONNX helpers before it exits, so they are in it); its memory from psutil, sampling
the whole live process tree (workers run in sessions of their own but stay descendants by
parent pid). A process of the tree still alive when the command has exited was not waited
for, so its cost is missing from the numbers: that fails the run instead of under-counting.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import psutil

SAMPLE_EVERY = 0.02
"""Seconds between memory samples: a toolkit conversion's peak lasts far longer than this."""


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float  # user + system, the command and every descendant it waited for
    tree_peak_mb: float  # the largest sampled sum of RSS over the live process tree
    largest_mb: float  # the largest single process's peak (VmHWM) among those sampled
    processes: int  # distinct processes seen in the tree, the command included
    stdout: str
    code: int = 0  # the exit code (one of those the caller allowed)
    command_mb: float = 0.0  # the command's own process's peak (VmHWM at its last sample)


class RunFailed(RuntimeError):
    """A measured run that did not succeed: its numbers would measure the wrong work."""

    def __init__(self, message: str, survivors: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.survivors = list(survivors)  # processes it left running (the caller may end them)


class TreeSampler(threading.Thread):
    """Samples the summed RSS of `pid` and its descendants until `stop` is set, and each
    process's own high-water mark (`VmHWM`): a peak between two samples, or a run shorter than
    one interval, still counts."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.peak = 0
        self.largest = 0  # the largest VmHWM of a process of the tree
        self.command = 0  # the command's own VmHWM, as last read (it only grows)
        self.seen: dict[int, float] = {}  # pid -> create_time, to tell a reused pid apart
        self.stop = threading.Event()
        self.unexeced = psutil.Process().cmdline()  # a child not yet exec'd holds this one's pages

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(SAMPLE_EVERY)

    def sample(self) -> None:
        try:
            tree = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return  # the root has exited
        total = 0
        for process in tree:
            try:
                if process.pid == self.root.pid and process.cmdline() == self.unexeced:
                    continue  # forked, not yet exec'd: the benchmark's pages, not the command's
                total += process.memory_info().rss
                high_water = _high_water(process.pid)
                self.largest = max(self.largest, high_water)
                if process.pid == self.root.pid:
                    self.command = max(self.command, high_water)
                self.seen.setdefault(process.pid, process.create_time())
            except psutil.Error:
                continue  # exited between the listing and the read
        # the tree holds at least its largest process at that one's peak
        self.peak = max(self.peak, total, self.largest)

    def survivors(self) -> list[int]:
        """Processes of the tree that outlived the command: nobody waited for them."""
        alive = []
        for pid, created in self.seen.items():
            try:
                process = psutil.Process(pid)
                if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.Error:
                continue
        return alive


def _high_water(pid: int) -> int:
    """The process's peak RSS since it exec'd, in bytes (Linux's `VmHWM`); 0 when unreadable."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def measure(
    command: Sequence[str], cwd: Path, env: dict[str, str] | None = None, codes: tuple[int, ...] = (0,)
) -> Run:
    """Run `command` to completion and measure it with all its descendants."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(list(command), cwd=cwd, env=env, stdout=out, stderr=err)
        sampler = TreeSampler(process.pid)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        sampler.stop.set()
        sampler.join()
        out.seek(0), err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    name = " ".join(command[:4])
    if process.returncode not in codes:
        tail = stderr.strip().splitlines()[-3:]
        raise RunFailed(f"{name}: exit {process.returncode}, expected {codes}: {' / '.join(tail)}")
    leaked = sampler.survivors()
    if leaked:
        raise RunFailed(f"{name}: processes {leaked} outlived it, their cost would be missed", leaked)
    return Run(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        tree_peak_mb=sampler.peak / (1 << 20),
        # not `ru_maxrss`: a child's counts the pages it shared with this process before exec
        largest_mb=(sampler.largest or usage.ru_maxrss * 1024) / (1 << 20),
        processes=len(sampler.seen),
        stdout=stdout,
        code=process.returncode,
        command_mb=sampler.command / (1 << 20),
    )


def median_run(runs: list[Run]) -> Run:
    """Each number's median over the runs (the output of the first run)."""
    numbers = {
        f.name: statistics.median(getattr(r, f.name) for r in runs) for f in fields(Run) if f.name in NUMBERS
    }
    return Run(**numbers, stdout=runs[0].stdout, code=runs[0].code)  # type: ignore[arg-type]


NUMBERS = ("wall_s", "cpu_s", "tree_peak_mb", "largest_mb", "processes", "command_mb")


def spread(runs: list[Run]) -> dict[str, dict[str, float]]:
    """Each number's minimum, median and maximum over the runs: a wide range says the machine
    was busy during them, and the median alone would hide it."""
    return {
        name: {
            "min": min(getattr(r, name) for r in runs),
            "median": statistics.median(getattr(r, name) for r in runs),
            "max": max(getattr(r, name) for r in runs),
        }
        for name in NUMBERS
    }


def interleaved(a: Callable[[], Run], b: Callable[[], Run], repeat: int) -> tuple[Run, Run]:
    """A and B alternated (A B, B A, A B, ...) after one unmeasured warm-up each, so that a
    machine that gets busier or quieter during the runs shifts both alike; medians."""
    a(), b()
    runs_a, runs_b = [], []
    for index in range(repeat):
        order = [(a, runs_a), (b, runs_b)]
        for action, runs in order if index % 2 == 0 else reversed(order):
            runs.append(action())
    return median_run(runs_a), median_run(runs_b)


def load_average() -> float:
    """The 1-minute load average: other work on the machine during the runs."""
    return os.getloadavg()[0]
