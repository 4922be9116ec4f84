"""tritonserver's Python-backend model in the peers benchmark, one class for every model of
bench/peers/tritonserver/models/ (each model's 1/model.py imports it; the model's name picks what
it computes).

Written as the Python backend's README writes a model: `execute` receives every request of the
batch Triton's dynamic batcher formed, runs the model once over their inputs stacked, and answers
each request with its own rows.
"""

import numpy as np
import triton_python_backend_utils as pb_utils

import peer_models


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_name"]
        if self.name in ("identity_small", "identity_large"):
            self.inputs, self.outputs = ["x"], ["y"]
            self.model = lambda x: (peer_models.identity(x),)
        elif self.name == "add_sub":
            self.inputs, self.outputs = ["a", "b"], ["add", "sub"]
            self.model = peer_models.add_sub
        elif self.name == "fixed_5ms":
            fixed = peer_models.Fixed5ms()
            self.inputs, self.outputs = ["x"], ["y"]
            self.model = lambda x: (fixed(x),)
        elif self.name == "cpu_2":
            cpu = peer_models.Cpu()
            self.inputs, self.outputs = ["x"], ["y"]
            self.model = lambda x: (cpu(x),)
        else:
            raise ValueError(f"Unknown model {self.name!r}")

    def execute(self, requests):
        arrays = [
            [pb_utils.get_input_tensor_by_name(request, name).as_numpy() for name in self.inputs]
            for request in requests
        ]
        if len(arrays) == 1:
            stacked = arrays[0]
            sizes = [None]
        else:
            stacked = [np.concatenate([a[i] for a in arrays]) for i in range(len(self.inputs))]
            sizes = [a[0].shape[0] for a in arrays]
        results = self.model(*stacked)
        responses = []
        start = 0
        for size in sizes:
            rows = slice(None) if size is None else slice(start, start + size)
            start += 0 if size is None else size
            tensors = [pb_utils.Tensor(name, result[rows]) for name, result in zip(self.outputs, results)]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses
