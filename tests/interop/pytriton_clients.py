"""PyTriton's own clients (nvidia-pytriton 0.7.0) against a DenoTriton server.

Runs ModelClient over HTTP and gRPC, and DecoupledModelClient over gRPC, against the models of
tests/_models.ts and tests/_streaming_models.ts. Prints "ok <check>" per check and
"all checks passed" at the end; any failure raises (non-zero exit).

    python pytriton_clients.py --http 127.0.0.1:8000 --grpc 127.0.0.1:8001
"""

import argparse

import numpy as np
from pytriton.client import DecoupledModelClient, ModelClient
from pytriton.client.exceptions import (
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientModelDoesntSupportBatchingError,
)

FAILING_MESSAGE = "Deliberate failure: division by zero in the test model"
STREAM_FAILURE_MESSAGE = "Deliberate failure after the partial responses"


def ok(name):
    print(f"ok {name}", flush=True)


def expect_error(kind, call, contains=None):
    try:
        call()
    except kind as error:
        if contains is not None:
            assert contains in str(error), f"{contains!r} not in {error!r}"
        return error
    raise AssertionError(f"expected {kind.__name__}")


def coupled(url, protocol):
    with ModelClient(url, "identity_int32", init_timeout_s=30) as client:
        out = client.infer_sample(INPUT=np.array([1, 2, 3], dtype=np.int32))
        np.testing.assert_array_equal(out["OUTPUT"], np.array([1, 2, 3], dtype=np.int32))
        batch = np.array([[1, 2], [3, 4]], dtype=np.int32)
        np.testing.assert_array_equal(client.infer_batch(INPUT=batch)["OUTPUT"], batch)
        assert client.model_config.max_batch_size == 8
    ok(f"{protocol} ModelClient infer_sample and infer_batch")

    with ModelClient(url, "identity_bytes", init_timeout_s=30) as client:
        texts = np.array([b"hello", b"nul\x00inside", b""], dtype=np.object_)
        out = client.infer_sample(INPUT=texts)
        assert list(out["OUTPUT"]) == list(texts), out
    ok(f"{protocol} ModelClient bytes")

    with ModelClient(url, "Failing", init_timeout_s=30) as client:
        expect_error(
            PyTritonClientInferenceServerError,
            lambda: client.infer_sample(x=np.array([1.0], dtype=np.float32)),
            FAILING_MESSAGE,
        )
    ok(f"{protocol} ModelClient server error")

    with ModelClient(url, "Slow", init_timeout_s=30, inference_timeout_s=30) as client:
        out = client.infer_sample(x=np.array([0.5], dtype=np.float32))
        np.testing.assert_array_equal(out["y"], np.array([0.5], dtype=np.float32))
    ok(f"{protocol} ModelClient slow model")

    with ModelClient(url, "Count", init_timeout_s=30) as client:
        expect_error(PyTritonClientError, lambda: client.infer_sample(n=np.array([1], dtype=np.int32)))
        expect_error(
            PyTritonClientModelDoesntSupportBatchingError,
            lambda: client.infer_batch(n=np.array([[1]], dtype=np.int32)),
        )
    ok(f"{protocol} ModelClient refuses the decoupled model")


def decoupled(url):
    with DecoupledModelClient(url, "Count", init_timeout_s=30) as client:
        steps = [step["i"].tolist() for step in client.infer_sample(n=np.array([3], dtype=np.int32))]
        assert steps == [[0], [1], [2]], steps
        assert list(client.infer_sample(n=np.array([0], dtype=np.int32))) == []
    ok("grpc DecoupledModelClient streams responses")

    with DecoupledModelClient(url, "CountBatched", init_timeout_s=30) as client:
        steps = [step["i"].tolist() for step in client.infer_sample(n=np.array([2], dtype=np.int32))]
        assert steps == [[0], [1]], steps
        rows = np.array([[1], [2]], dtype=np.int32)
        steps = [step["i"].tolist() for step in client.infer_batch(n=rows)]
        assert steps == [[[0], [0]], [[1], [1]]], steps
    ok("grpc DecoupledModelClient infer_sample and infer_batch on a batching model")

    with DecoupledModelClient(url, "FailAfter", init_timeout_s=30) as client:
        seen = []

        def run():
            for step in client.infer_sample(n=np.array([2], dtype=np.int32)):
                seen.append(step["i"].tolist())

        expect_error(PyTritonClientInferenceServerError, run, STREAM_FAILURE_MESSAGE)
        assert seen == [[0], [1]], seen
    ok("grpc DecoupledModelClient partial responses then the error")

    # No timeout check: 0.7.0's DecoupledModelClient passes inference_timeout_s to queue.get() as
    # its `block` argument, so it waits without a limit.
    with DecoupledModelClient(url, "Late", init_timeout_s=30) as client:
        steps = [step["i"].tolist() for step in client.infer_sample(delay_ms=np.array([50], dtype=np.int32))]
        assert steps == [[0]], steps
    ok("grpc DecoupledModelClient waits for a late response")

    with DecoupledModelClient(url, "Count", init_timeout_s=30) as client:
        steps = [step["i"].tolist() for step in client.infer_sample(n=np.array([1], dtype=np.int32))]
        assert steps == [[0]], steps
    ok("grpc DecoupledModelClient keeps working after an error")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", required=True)
    parser.add_argument("--grpc", required=True)
    args = parser.parse_args()
    coupled(f"http://{args.http}", "http")
    coupled(f"grpc://{args.grpc}", "grpc")
    decoupled(f"grpc://{args.grpc}")
    print("all checks passed", flush=True)


if __name__ == "__main__":
    main()
