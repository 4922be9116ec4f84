"""BentoML in the peers benchmark: one service per model.

    bentoml serve bentoml_service:AddSub --host 127.0.0.1 --port 8000

Written as BentoML's guides write a service: a class with `@bentoml.api` methods taking and
returning numpy arrays (the endpoint is the method's name, POST /<model>, JSON `{"x": ...}`).
Where the model batches, the API is `batchable=True` with `max_batch_size=32` and BentoML's
adaptive dispatcher choosing its own window under the default latency budget
(`max_latency_ms` 60 s; BentoML has no fixed wait to set); a batchable API takes one argument, so
add_sub's two inputs travel stacked, `x` of shape [n, 2, 16]. Workers: `"cpu_count"` (2 here), the
workers guide's setting for CPU-bound work, except 1 for the 5 ms model (one device); one thread
per worker (BentoML's default); a 600 s request timeout instead of 60 s (the 1M-element JSON
cells at c=32 queue longer). Per-request access logs off, as DenoTriton and tritonserver write
none.
"""

import bentoml
import numpy as np

import peer_models

NO_ACCESS_LOG = {"access": {"enabled": False}}
# At c=32 the 1M-element JSON requests queue for longer than the default 60 s.
TRAFFIC = {"timeout": 600}


@bentoml.service(workers="cpu_count", logging=NO_ACCESS_LOG, traffic=TRAFFIC)
class IdentitySmall:
    @bentoml.api
    def identity_small(self, x: np.ndarray) -> np.ndarray:
        return peer_models.identity(x.astype(np.float32))


@bentoml.service(workers="cpu_count", logging=NO_ACCESS_LOG, traffic=TRAFFIC)
class IdentityLarge:
    @bentoml.api
    def identity_large(self, x: np.ndarray) -> np.ndarray:
        return peer_models.identity(x.astype(np.float32))


@bentoml.service(workers="cpu_count", logging=NO_ACCESS_LOG, traffic=TRAFFIC)
class AddSub:
    @bentoml.api(batchable=True, max_batch_size=32)
    def add_sub(self, x: np.ndarray) -> np.ndarray:
        add, sub = peer_models.add_sub(x[:, 0].astype(np.float32), x[:, 1].astype(np.float32))
        return np.stack([add, sub], axis=1)


@bentoml.service(workers=1, logging=NO_ACCESS_LOG, traffic=TRAFFIC)
class Fixed5ms:
    def __init__(self) -> None:
        self.model = peer_models.Fixed5ms()

    @bentoml.api(batchable=True, max_batch_size=32)
    def fixed_5ms(self, x: np.ndarray) -> np.ndarray:
        return self.model(x.astype(np.float32))


@bentoml.service(workers="cpu_count", logging=NO_ACCESS_LOG, traffic=TRAFFIC)
class Cpu2:
    def __init__(self) -> None:
        self.model = peer_models.Cpu()

    @bentoml.api(batchable=True, max_batch_size=32)
    def cpu_2(self, x: np.ndarray) -> np.ndarray:
        return self.model(x.astype(np.float32))
