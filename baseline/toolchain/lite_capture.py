"""On-board capture for RKNN-Toolkit-Lite2: run a pinned .rknn on the fixtures, on the board.

Copied to the board by `baseline capture` together with the model and the fixtures; it
needs only Python 3, numpy and rknn-toolkit-lite2 there, never baseline itself:

    python3 capture.py            # in the bundle directory, on the board

It writes `outputs.npz` (one array per output, sample axis first) and `manifest.json`
(sha256 of the model and fixtures it actually ran, runtime versions, SoC), which the host's
`rknnlite` backend checks against the lock before trusting the outputs.
"""

import hashlib
import json
import os
import sys
import time


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def soc():
    try:
        with open("/proc/device-tree/compatible", "rb") as stream:
            entries = stream.read().decode(errors="replace").split("\x00")
    except OSError:
        return None
    chips = [e.split(",", 1)[1] for e in entries if e.startswith("rockchip,r") and "-" not in e]
    return chips[-1] if chips else None


def main(bundle):
    import numpy as np
    from rknnlite.api import RKNNLite

    with open(os.path.join(bundle, "request.json")) as stream:
        request = json.load(stream)
    model_path = os.path.join(bundle, "model.rknn")
    inputs_path = os.path.join(bundle, "inputs.npz")
    lite = RKNNLite()
    if lite.load_rknn(model_path) != 0:
        raise SystemExit(f"load_rknn failed for {model_path}")
    if lite.init_runtime() != 0:
        raise SystemExit("init_runtime failed: is the NPU driver loaded?")
    with np.load(inputs_path, allow_pickle=False) as archive:
        inputs = [archive[name] for name in request["input_names"]]
    formats = request.get("data_formats") or ["nchw"] * len(inputs)  # image fixtures: nhwc
    runs = []
    for index in range(inputs[0].shape[0]):
        outputs = lite.inference(inputs=[array[index] for array in inputs], data_format=formats)
        if outputs is None:
            raise SystemExit(f"inference failed on sample {index}")
        runs.append(outputs)
    names = request["output_names"]
    stacked = {name: np.stack([np.asarray(run[i]) for run in runs]) for i, name in enumerate(names)}
    np.savez(os.path.join(bundle, "outputs.npz"), **stacked)
    manifest = {
        "model_sha256": sha256(model_path),
        "inputs_sha256": sha256(inputs_path),
        "sdk_version": str(lite.get_sdk_version()),
        "soc": soc(),
        "python": sys.version.split()[0],
        "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with open(os.path.join(bundle, "manifest.json"), "w") as stream:
        json.dump(manifest, stream, indent=2)
    lite.release()
    print(f"captured {len(runs)} samples into {bundle}/outputs.npz")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
