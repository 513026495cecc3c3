"""Task-level comparisons of golden and candidate outputs: what the model does, not what its tensors hold.

Plain numpy. `compare_task(spec, golden, candidate)` is the entry; the modules below it
hold the decoders and metrics, each usable on its own.
"""

from baseline.tasks.compare import compare_task
from baseline.tasks.parts import compare_part, part_statistics, slice_part, split_parts

__all__ = ["compare_part", "compare_task", "part_statistics", "slice_part", "split_parts"]
