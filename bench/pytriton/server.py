"""PyTriton side of the DenoTriton benchmark: the same models as bench/denotriton/server.ts.

    python bench/pytriton/server.py --http-port 8000 --grpc-port 8001 --metrics-port 8002

Models (names, tensors and batching match the DenoTriton script exactly):
  identity_small  x FP32[16] -> y, no batching (serving overhead)
  identity_large  x FP32[1048576] -> y, no batching (data path)
  identity_huge   x FP32[16777216] -> y, no batching (data path through shared memory)
  add_sub         a, b FP32[16] -> add, sub; max batch 32, queue delay 1 ms
  fixed_5ms       x FP32[16] -> y; max batch 32; 5 ms per call whatever the batch size
  cpu_1, cpu_2    x FP32[16] -> y; max batch 32; ~2 ms of arithmetic per sample; 1 and 2 instances
                  (the list-of-callables form)
"""

import argparse
import time

import numpy as np
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig, TritonSecurityConfig

WORK_SIZE = 4096
SAMPLE_MS = 2.0


def rounds(k: int) -> float:
    """Runs k rounds of the benchmark's arithmetic; numpy releases the GIL inside each ufunc."""
    v = np.linspace(0.0, 1.0, WORK_SIZE)
    for _ in range(k):
        v = np.sin(v) * 0.5 + 0.25
    return float(v[0])


def _time_ms(k: int) -> float:
    start = time.perf_counter()
    rounds(k)
    return (time.perf_counter() - start) * 1000


def calibrate() -> int:
    """How many rounds take SAMPLE_MS on this machine (the fastest of several runs: a busy
    machine only ever makes a run slower)."""
    rounds(20)
    k = 16
    while _time_ms(k) < 20:
        k *= 2
    best = min(_time_ms(k) for _ in range(7))
    return max(1, round(k * SAMPLE_MS / best))


ROUNDS = calibrate()


@batch
def identity(x):
    return {"y": x}


@batch
def add_sub(a, b):
    return {"add": a + b, "sub": a - b}


@batch
def fixed_5ms(x):
    time.sleep(0.005)
    return {"y": x}


@batch
def cpu(x):
    acc = 0.0
    for _ in range(x.shape[0]):
        acc += rounds(ROUNDS)
    return {"y": x + np.float32(acc * 0.0)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http-port", type=int, default=8000)
    parser.add_argument("--grpc-port", type=int, default=8001)
    parser.add_argument("--metrics-port", type=int, default=8002)
    args = parser.parse_args()

    f32 = np.float32
    config = TritonConfig(
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        http_address="127.0.0.1",
        grpc_address="127.0.0.1",
    )
    # perf_analyzer reads the statistics endpoint, which PyTriton 0.7.0 restricts by default;
    # DenoTriton restricts nothing, so neither side does here.
    security = TritonSecurityConfig(restricted_endpoints=[])
    with Triton(config=config, security_config=security) as triton:
        triton.bind(
            model_name="identity_small",
            infer_func=identity,
            inputs=[Tensor(name="x", dtype=f32, shape=(16,))],
            outputs=[Tensor(name="y", dtype=f32, shape=(16,))],
            config=ModelConfig(batching=False),
        )
        triton.bind(
            model_name="identity_large",
            infer_func=identity,
            inputs=[Tensor(name="x", dtype=f32, shape=(1048576,))],
            outputs=[Tensor(name="y", dtype=f32, shape=(1048576,))],
            config=ModelConfig(batching=False),
        )
        triton.bind(
            model_name="identity_huge",
            infer_func=identity,
            inputs=[Tensor(name="x", dtype=f32, shape=(16777216,))],
            outputs=[Tensor(name="y", dtype=f32, shape=(16777216,))],
            config=ModelConfig(batching=False),
        )
        triton.bind(
            model_name="add_sub",
            infer_func=add_sub,
            inputs=[Tensor(name="a", dtype=f32, shape=(16,)), Tensor(name="b", dtype=f32, shape=(16,))],
            outputs=[Tensor(name="add", dtype=f32, shape=(16,)), Tensor(name="sub", dtype=f32, shape=(16,))],
            config=ModelConfig(max_batch_size=32, batcher=DynamicBatcher(max_queue_delay_microseconds=1000)),
        )
        triton.bind(
            model_name="fixed_5ms",
            infer_func=fixed_5ms,
            inputs=[Tensor(name="x", dtype=f32, shape=(16,))],
            outputs=[Tensor(name="y", dtype=f32, shape=(16,))],
            config=ModelConfig(max_batch_size=32),
        )
        for count in (1, 2):
            triton.bind(
                model_name=f"cpu_{count}",
                infer_func=[cpu] * count,
                inputs=[Tensor(name="x", dtype=f32, shape=(16,))],
                outputs=[Tensor(name="y", dtype=f32, shape=(16,))],
                config=ModelConfig(max_batch_size=32),
            )
        print(f"pytriton ready: cpu rounds per sample {ROUNDS}", flush=True)
        triton.serve()


if __name__ == "__main__":
    main()
