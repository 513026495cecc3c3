"""The benchmarks' process measurement (`bench/measure.py`): what a run starts is counted, or
the run fails; it never under-counts silently."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO

pytest.importorskip("psutil")


def load_measure() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_measure", REPO / "bench" / "measure.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


measure = load_measure()
BUSY = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_waited_for_grandchild_counts_in_cpu_memory_and_processes(tmp_path: Path) -> None:
    grandchild = BUSY + "import time; b = b'x' * (200 << 20); time.sleep(0.3)"  # written: resident
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}])"
    run = measure.measure(python(child), tmp_path)
    assert run.cpu_s >= 0.4, "the grandchild's CPU is in wait4's count"
    assert run.processes >= 2 and run.tree_peak_mb >= 200


def test_a_process_left_running_fails_the_run(tmp_path: Path) -> None:
    orphan = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], start_new_session=True); "
        "time.sleep(0.5)"
    )
    with pytest.raises(measure.RunFailed, match="outlived it") as failure:
        measure.measure(python(orphan), tmp_path)
    assert len(failure.value.survivors) == 1
    os.kill(failure.value.survivors[0], signal.SIGKILL)


def test_an_unexpected_exit_code_fails_the_run(tmp_path: Path) -> None:
    with pytest.raises(measure.RunFailed, match="exit 3"):
        measure.measure(python("raise SystemExit(3)"), tmp_path)
    assert measure.measure(python("raise SystemExit(1)"), tmp_path, codes=(0, 1)).wall_s > 0


def test_interleaved_alternates_and_takes_medians() -> None:
    order: list[str] = []

    def fake(name: str, seconds: float) -> Callable[[], object]:
        def run() -> object:
            order.append(name)
            return measure.Run(seconds, seconds, 1.0, 1.0, 1, name)

        return run

    a, b = measure.interleaved(fake("a", 1.0), fake("b", 2.0), 3)
    assert order == ["a", "b", "a", "b", "b", "a", "a", "b"]  # warm-ups, then A B, B A, A B
    assert (a.wall_s, b.wall_s, a.stdout) == (1.0, 2.0, "a")


def test_a_child_holding_memory_counts_in_the_tree_peak_not_only_in_its_own(tmp_path: Path) -> None:
    """Two processes at once: the tree's peak is their sum, the largest single one is not."""
    hold = "import time; b = b'x' * (150 << 20); time.sleep(0.6)"
    parent = (
        f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {hold!r}]); {hold}; p.wait()"
    )
    run = measure.measure(python(parent), tmp_path)
    assert run.processes == 2 and run.code == 0
    assert run.largest_mb < 250 < run.tree_peak_mb, (run.largest_mb, run.tree_peak_mb)


def test_the_commands_own_peak_leaves_its_children_out(tmp_path: Path) -> None:
    """The command holds 40 MB while its child holds 150: its own figure is the smaller one
    (what "the main process above `import numpy`" compares), the largest is the child's."""
    child = "import time; b = b'x' * (150 << 20); time.sleep(0.6)"
    parent = (
        "import subprocess, sys; b = b'x' * (40 << 20); "
        f"p = subprocess.Popen([sys.executable, '-c', {child!r}]); p.wait()"
    )
    run = measure.measure(python(parent), tmp_path)
    assert 40 <= run.command_mb < 120 <= run.largest_mb, run


def test_spread_gives_each_number_its_minimum_median_and_maximum() -> None:
    runs = [measure.Run(wall, wall / 2, 100.0 * wall, 10.0, 2, "") for wall in (3.0, 1.0, 2.0)]
    numbers = measure.spread(runs)
    assert numbers["wall_s"] == {"min": 1.0, "median": 2.0, "max": 3.0}
    assert numbers["tree_peak_mb"] == {"min": 100.0, "median": 200.0, "max": 300.0}
    assert set(numbers) == set(measure.NUMBERS)


def test_a_peak_between_two_samples_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """200 MB held and freed within the first of two samples a second apart: the process's
    high-water mark keeps it; the RSS the samples see would not (nor the benchmark's own
    pages, which a forked child holds until it execs)."""
    monkeypatch.setattr(measure, "SAMPLE_EVERY", 1.0)
    spike = "import time; b = b'x' * (200 << 20); del b; time.sleep(1.5)"
    run = measure.measure(python(spike), tmp_path)
    assert run.tree_peak_mb >= 200 and run.largest_mb >= 200, run
    assert measure.measure(python("import time; time.sleep(1.5)"), tmp_path).tree_peak_mb < 100
