"""Ray Serve in the peers benchmark.

    python ray_app.py --model add_sub --port 8000

One model per server: a local Ray cluster (`ray.init()`, Ray's defaults: 2 CPUs here) and one
deployment behind Serve's HTTP proxy on 127.0.0.1:<port>, route prefix "/" (POST /). Written as
Ray Serve's guides write a deployment: a class whose `async __call__` reads the Starlette request,
with `@serve.batch` where the model batches (max_batch_size 32, batch_wait_timeout_s 0: what is
queued, as every server here batches). Settings: `num_replicas=2` (one replica
per core, each reserving Ray's default one CPU), except 1 for the 5 ms model (one device);
`max_ongoing_requests=32` on batched deployments (the batching guide: at least max_batch_size, or
batches cannot fill; the default is 5); the proxy's keep-alive 600 s instead of 5 s (see
fastapi_app.py); per-request access logs off
(`LoggingConfig(enable_access_log=False)`), as DenoTriton and tritonserver write none. The
environment may set `RAY_SERVE_THROUGHPUT_OPTIMIZED=1` (the performance guide's throughput mode):
the harness says which it used.
"""

import argparse
import signal
import threading

import numpy as np
import ray
from ray import serve
from ray.serve.schema import LoggingConfig
from starlette.requests import Request

import peer_models


def f32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


@serve.deployment(num_replicas=2)
class Identity:
    async def __call__(self, request: Request) -> dict:
        body = await request.json()
        return {"y": peer_models.identity(f32(body["x"])).tolist()}


@serve.deployment(num_replicas=2, max_ongoing_requests=32)
class AddSub:
    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.0)
    async def infer(self, pairs: list[tuple[np.ndarray, np.ndarray]]) -> list[dict]:
        add, sub = peer_models.add_sub(np.stack([a for a, _ in pairs]), np.stack([b for _, b in pairs]))
        return [{"add": x.tolist(), "sub": y.tolist()} for x, y in zip(add, sub)]

    async def __call__(self, request: Request) -> dict:
        body = await request.json()
        return await self.infer((f32(body["a"]), f32(body["b"])))


@serve.deployment(num_replicas=1, max_ongoing_requests=32)
class Fixed5ms:
    def __init__(self) -> None:
        self.model = peer_models.Fixed5ms()

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.0)
    async def infer(self, xs: list[np.ndarray]) -> list[dict]:
        ys = await self.model.call_async(np.stack(xs))
        return [{"y": y.tolist()} for y in ys]

    async def __call__(self, request: Request) -> dict:
        body = await request.json()
        return await self.infer(f32(body["x"]))


@serve.deployment(num_replicas=2, max_ongoing_requests=32)
class Cpu:
    def __init__(self) -> None:
        self.model = peer_models.Cpu()

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.0)
    async def infer(self, xs: list[np.ndarray]) -> list[dict]:
        ys = self.model(np.stack(xs))
        return [{"y": y.tolist()} for y in ys]

    async def __call__(self, request: Request) -> dict:
        body = await request.json()
        return await self.infer(f32(body["x"]))


DEPLOYMENTS = {
    "identity_small": Identity,
    "identity_large": Identity,
    "add_sub": AddSub,
    "fixed_5ms": Fixed5ms,
    "cpu_2": Cpu,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True, choices=sorted(DEPLOYMENTS))
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ray.init()
    quiet = LoggingConfig(enable_access_log=False)
    serve.start(
        http_options={"host": "127.0.0.1", "port": args.port, "keep_alive_timeout_s": 600},
        logging_config=quiet,
    )
    serve.run(DEPLOYMENTS[args.model].bind(), name=args.model, route_prefix="/", logging_config=quiet)
    print(f"ray serve ready: {args.model}", flush=True)
    stop.wait()
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
