"""LitServe in the peers benchmark.

    python litserve_app.py --model add_sub --port 8000

One model per server, a LitAPI as LitServe's docs write one (setup, decode_request, batch,
predict, unbatch, encode_response), served at LitServe's default path /predict. Settings, from
LitServer's and LitAPI's documentation: `accelerator="cpu"`, `workers_per_device=2` ("for CPU,
set to the number of cores"), except 1 for the 5 ms model (one device); `fast_queue=True` (ZeroMQ,
"for high-throughput scenarios (>100 RPS)"); `num_api_servers` left to LitServe (as many as
inference workers, "recommended"). Batching where the model batches: `max_batch_size=32`,
`batch_timeout=0` (what is queued), as every server here batches. `timeout=600` instead of the
default 30 s: at c=32 the 1M-element JSON requests queue for longer than that (the other cells
finish far inside either); uvicorn's keep-alive 600 s instead of 5 s, as for FastAPI. Per-request log lines off (`log_level="warning"`): DenoTriton and
tritonserver write none either.
"""

import argparse

import litserve as ls
import numpy as np

import peer_models


def f32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


class Identity(ls.LitAPI):
    def setup(self, device):
        self.model = peer_models.identity

    def decode_request(self, request):
        return f32(request["x"])

    def predict(self, x):
        return self.model(x)

    def encode_response(self, output):
        return {"y": output.tolist()}


class AddSub(ls.LitAPI):
    def setup(self, device):
        self.model = peer_models.add_sub

    def decode_request(self, request):
        return f32(request["a"]), f32(request["b"])

    def batch(self, inputs):
        return np.stack([a for a, _ in inputs]), np.stack([b for _, b in inputs])

    def predict(self, x):
        return self.model(*x)

    def unbatch(self, output):
        add, sub = output
        return list(zip(add, sub))

    def encode_response(self, output):
        add, sub = output
        return {"add": add.tolist(), "sub": sub.tolist()}


class Batched(ls.LitAPI):
    """x float32[16] -> y, batched: the 5 ms model and the CPU model."""

    def __init__(self, make_model, **kwargs):
        super().__init__(**kwargs)
        self._make_model = make_model

    def setup(self, device):
        self.model = self._make_model()

    def decode_request(self, request):
        return f32(request["x"])

    def batch(self, inputs):
        return np.stack(inputs)

    def predict(self, x):
        return self.model(x)

    def unbatch(self, output):
        return list(output)

    def encode_response(self, output):
        return {"y": output.tolist()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    workers = 2
    if args.model in ("identity_small", "identity_large"):
        api = Identity()
    elif args.model == "add_sub":
        api = AddSub(max_batch_size=32, batch_timeout=0.0)
    elif args.model == "fixed_5ms":
        api = Batched(peer_models.Fixed5ms, max_batch_size=32, batch_timeout=0.0)
        workers = 1
    elif args.model == "cpu_2":
        api = Batched(peer_models.Cpu, max_batch_size=32, batch_timeout=0.0)
    else:
        raise ValueError(f"Unknown model {args.model!r}")
    server = ls.LitServer(
        api, accelerator="cpu", workers_per_device=workers, fast_queue=True, timeout=600
    )
    server.run(
        host="127.0.0.1",
        port=args.port,
        generate_client_file=False,
        log_level="warning",
        timeout_keep_alive=600,
    )


if __name__ == "__main__":
    main()
