"""Tree ensembles as skl2onnx writes them, the real-export evidence of the tree-ensemble rule.

    python -m venv /tmp/skl && /tmp/skl/bin/pip install skl2onnx scikit-learn
    /tmp/skl/bin/python bench/sklearn_probes.py

It writes `bench/.corpus/probes/exports/skl_<model>_<type>_op19.onnx` beside the torch probes of
`bench/export_probes.py` (skl2onnx is not in the toolkit's environment, so it is a script of its
own); `bench/rule_probes.py exports --only skl_` converts them. skl2onnx 1.20 writes
TreeEnsembleRegressor (ai.onnx.ml 1/3) at every target opset, never the opset-5 TreeEnsemble the
node test has; its default opset (22) is past the toolkit's limit, so these ask for 19.

After the ninth round's one score (issue 33: a StandardScaler → ExtraTreesClassifier pipeline
was "unknown", its Scaler never measured) it also writes `skl_scaler_*`: a StandardScaler alone,
before a LogisticRegression, an MLPClassifier and an ExtraTreesClassifier (no ZipMap), at
opsets 12 (ai.onnx.ml 1, as skl2onnx 1.19 wrote that pipeline) and 19 (ai.onnx.ml 3). Session 16
added `skl_scaler_mlpregressor_*` and `skl_mlpregressor_*` (the Scaler before a regressor of
plain ops with a float output, and that regressor alone): the Scaler read by the MatMul fails on
every target, the regressor alone compiles (`ml-scaler-read`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from skl2onnx import to_onnx
from sklearn.ensemble import ExtraTreesClassifier, RandomForestRegressor
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
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
    scalers(features, target > np.median(target))
    scaled_regressors(features, target)


def scalers(features: np.ndarray, classes: np.ndarray) -> None:
    """StandardScaler (skl2onnx writes an ai.onnx.ml Scaler) alone and before three classifiers."""
    models = {
        "alone": StandardScaler(),
        "logistic": make_pipeline(StandardScaler(), LogisticRegression()),
        "mlp": make_pipeline(StandardScaler(), MLPClassifier((8,), max_iter=300, random_state=0)),
        "extratrees": make_pipeline(StandardScaler(), ExtraTreesClassifier(3, max_depth=3, random_state=0)),
    }
    for name, model in models.items():
        model.fit(features, classes)
        options = {} if name == "alone" else {id(model): {"zipmap": False}}
        for opset, ml in ((12, 1), (19, 3)):
            onnx_model = to_onnx(
                model,
                features[:1].astype(np.float32),
                target_opset={"": opset, "ai.onnx.ml": ml},
                options=options,
            )
            path = OUT / f"skl_scaler_{name}_op{opset}.onnx"
            path.write_bytes(onnx_model.SerializeToString())
            print(f"{path.name}: {[node.op_type for node in onnx_model.graph.node]}")


def scaled_regressors(features: np.ndarray, target: np.ndarray) -> None:
    """A StandardScaler before an MLPRegressor (Scaler → MatMul → Add → Relu → MatMul → Add, a
    float output), and the same regressor without it: on rv1106 the lone Scaler and the
    classifier pipelines fail for other causes (a quantized build of one op, the classifier's
    label), so this is the Scaler inside a graph the w8a8 build has layers to quantize in."""
    models = {
        "scaler_mlpregressor": make_pipeline(
            StandardScaler(), MLPRegressor(hidden_layer_sizes=(8,), max_iter=300, random_state=0)
        ),
        "mlpregressor": MLPRegressor(hidden_layer_sizes=(8,), max_iter=300, random_state=0),
    }
    for name, model in models.items():
        model.fit(features, target)
        for opset, ml in ((12, 1), (19, 3)):
            onnx_model = to_onnx(
                model, features[:1].astype(np.float32), target_opset={"": opset, "ai.onnx.ml": ml}
            )
            path = OUT / f"skl_{name}_op{opset}.onnx"
            path.write_bytes(onnx_model.SerializeToString())
            print(f"{path.name}: {[node.op_type for node in onnx_model.graph.node]}")


if __name__ == "__main__":
    main()
