"""A stand-in for RKNN-Toolkit-Lite2, which exists only on aarch64 boards.

It behaves like `rknnlite.api.RKNNLite` at the calls capture.py makes, and answers
inference with the outputs in `$FAKE_LITE_OUTPUTS` (what a board would have produced),
one sample per call.
"""

import os

import numpy as np


class RKNNLite:
    def __init__(self):
        self._outputs = np.load(os.environ["FAKE_LITE_OUTPUTS"], allow_pickle=False)
        self._sample = 0
        self._loaded = False

    def load_rknn(self, path):
        with open(path, "rb") as stream:
            self._loaded = stream.read(4) == b"RKNN"
        return 0 if self._loaded else -1

    def init_runtime(self, core_mask=None):
        return 0 if self._loaded else -1

    def inference(self, inputs, data_format=None):
        outputs = [self._outputs[name][self._sample] for name in self._outputs.files]
        self._sample += 1
        return outputs

    def get_sdk_version(self):
        return "API: 2.3.0 (c949ad889d@2024-11-07T11:35:33)\nDRV: rknn_server: 2.3.0; Driver: 0.9.8"

    def release(self):
        pass
