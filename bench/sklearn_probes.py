"""Tree ensembles as skl2onnx writes them, the real-export evidence of the tree-ensemble rule.

    python -m venv /tmp/skl && /tmp/skl/bin/pip install skl2onnx scikit-learn
    /tmp/skl/bin/python bench/sklearn_probes.py

It writes `bench/.corpus/probes/exports/skl_<model>_<type>_op19.onnx` beside the torch probes of
`bench/export_probes.py` (skl2onnx is not in the toolkit's environment, so it is a script of its
own); `bench/rule_probes.py exports --only skl_` converts them. skl2onnx 1.20 writes
TreeEnsembleRegressor (ai.onnx.ml 1/3) at every target opset, never the opset-5 TreeEnsemble the
node test has; its default opset (22) is past the toolkit's limit, so these ask for 19.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from skl2onnx import to_onnx
from sklearn.ensemble import RandomForestRegressor
from sklearn.tree import DecisionTreeRegressor

OUT = Path(__file__).resolve().parent / ".corpus" / "probes" / "exports"


def main() -> None:
    rng = np.random.default_rng(0)
    features = rng.random((64, 4))
    target = features @ np.array([1.0, 2.0, -1.0, 0.5])
    models = {
        "tree": DecisionTreeRegressor(max_depth=3, random_state=0),
        "forest": RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    for name, model in models.items():
        model.fit(features, target)
        for dtype in (np.float32, np.float64):  # float64 input: double thresholds, as the node test
            onnx_model = to_onnx(model, features[:1].astype(dtype), target_opset={"": 19, "ai.onnx.ml": 3})
            path = OUT / f"skl_{name}_{np.dtype(dtype).name}_op19.onnx"
            path.write_bytes(onnx_model.SerializeToString())
            print(f"{path.name}: {[node.op_type for node in onnx_model.graph.node]}")


if __name__ == "__main__":
    main()
