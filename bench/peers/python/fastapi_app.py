"""FastAPI + uvicorn in the peers benchmark: the plain baseline, no batching.

    PEER_MODEL=add_sub uvicorn fastapi_app:app --host 127.0.0.1 --port 8000 --workers 2 \
        --no-access-log --timeout-keep-alive 600

One model per server (PEER_MODEL), written as FastAPI's tutorial writes an endpoint: Pydantic
bodies in and out, `async def` for the models that do no blocking work, `def` (FastAPI's thread
pool) for those that block (the 5 ms device, the CPU model). uvicorn's workers: 2, one per core
(FastAPI's "Server Workers" page), except for the 5 ms model, one device held by one process.
Keep-alive 600 s instead of uvicorn's 5 s: with a worker's event loop busy for seconds on queued
1M-element requests (c=32), the 5 s timer closed connections whose next request was already sent.
"""

import os

import numpy as np
from fastapi import FastAPI
from pydantic import BaseModel

import peer_models

MODEL = os.environ["PEER_MODEL"]
app = FastAPI()


class X(BaseModel):
    x: list[float]


class Y(BaseModel):
    y: list[float]


class AB(BaseModel):
    a: list[float]
    b: list[float]


class AddSub(BaseModel):
    add: list[float]
    sub: list[float]


def f32(values: list[float]) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


if MODEL in ("identity_small", "identity_large"):

    @app.post(f"/{MODEL}")
    async def identity(body: X) -> Y:
        return Y(y=peer_models.identity(f32(body.x)).tolist())

elif MODEL == "add_sub":

    @app.post("/add_sub")
    async def add_sub(body: AB) -> AddSub:
        add, sub = peer_models.add_sub(f32(body.a), f32(body.b))
        return AddSub(add=add.tolist(), sub=sub.tolist())

elif MODEL == "fixed_5ms":
    fixed = peer_models.Fixed5ms()

    @app.post("/fixed_5ms")
    def fixed_5ms(body: X) -> Y:
        return Y(y=fixed(f32(body.x)[None])[0].tolist())

elif MODEL == "cpu_2":
    cpu = peer_models.Cpu()

    @app.post("/cpu_2")
    def cpu_2(body: X) -> Y:
        return Y(y=cpu(f32(body.x)[None])[0].tolist())

else:
    raise ValueError(f"Unknown model {MODEL!r}")
