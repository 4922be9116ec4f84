"""The peers benchmark's models, shared by every Python peer (bench/peers/models.ts lists them).

The serving scripts beside this file only wire these functions into each framework, so every
Python peer runs the same model code:

  identity        y = x
  add_sub         add = a + b, sub = a - b
  Fixed5ms        one device: 5 ms per call whatever the batch size, one call at a time
  Cpu             ~2 ms of arithmetic per sample (numpy, calibrated at load on this machine, as
                  bench/pytriton/server.py and bench/denotriton/cpu_work.ts do), one call at a
                  time per instance

Fixed5ms and Cpu hold a lock: an instance runs one call at a time, as a model on a device does.
Where the framework already runs one call at a time per instance (a LitServe worker, a Triton
Python-backend instance, a BentoML worker with one thread) the lock is never contended; where it
runs calls on a thread pool (FastAPI's `def` endpoints) it keeps the instance one instance.
"""

import asyncio
import threading
import time

import numpy as np

WORK_SIZE = 4096
SAMPLE_MS = 2.0
FIXED_S = 0.005


def identity(x: np.ndarray) -> np.ndarray:
    return x


def add_sub(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return a + b, a - b


def rounds(k: int) -> float:
    """Runs k rounds of the benchmark's arithmetic over 4096 float64 values."""
    v = np.linspace(0.0, 1.0, WORK_SIZE)
    for _ in range(k):
        v = np.sin(v) * 0.5 + 0.25
    return float(v[0])


def _time_ms(k: int) -> float:
    start = time.perf_counter()
    rounds(k)
    return (time.perf_counter() - start) * 1000


def calibrate() -> int:
    """How many rounds take SAMPLE_MS here: the fastest of several runs (a busy machine only
    ever makes a run slower)."""
    rounds(20)
    k = 16
    while _time_ms(k) < 20:
        k *= 2
    best = min(_time_ms(k) for _ in range(7))
    return max(1, round(k * SAMPLE_MS / best))


class Fixed5ms:
    """A device that takes 5 ms per call, whatever the batch size, one call at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._async_lock: asyncio.Lock | None = None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        with self._lock:
            time.sleep(FIXED_S)
        return x

    async def call_async(self, x: np.ndarray) -> np.ndarray:
        """The same call for an asyncio framework, waiting without blocking its event loop."""
        if self._async_lock is None:
            self._async_lock = asyncio.Lock()
        async with self._async_lock:
            await asyncio.sleep(FIXED_S)
        return x


class Cpu:
    """~2 ms of arithmetic per sample of the batch (axis 0), one call at a time."""

    def __init__(self) -> None:
        self.rounds = calibrate()
        self._lock = threading.Lock()

    def __call__(self, x: np.ndarray) -> np.ndarray:
        with self._lock:
            acc = 0.0
            for _ in range(x.shape[0]):
                acc += rounds(self.rounds)
        return x + np.float32(acc * 0.0)
