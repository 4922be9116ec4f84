"""The repository extension with NVIDIA's official Python client (HTTP or gRPC).

Driven by tests/repository_test.ts, which serves the model `Scale` (y = 2 * x) with the
model-repository endpoints restricted to a token. Unloads it, checks that an inference fails and
that the index shows it unloaded, loads it again, checks that it answers, and checks Triton's
answers for a model the repository does not hold. Prints one "ok <check>" line per passed check
and exits non-zero with the failing check's message otherwise.
"""

import argparse
import sys

import numpy as np
from tritonclient.utils import InferenceServerException


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def expect_error(run, text):
    try:
        run()
    except InferenceServerException as error:
        check(text in error.message(), f"expected {text!r} in {error.message()!r}")
        return error
    raise AssertionError(f"expected an error with {text!r}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--protocol", choices=["http", "grpc"], required=True)
    parser.add_argument("--token", required=True)
    args = parser.parse_args()
    if args.protocol == "http":
        import tritonclient.http as client_module

        headers = {"triton-access-token": args.token}
    else:
        import tritonclient.grpc as client_module

        headers = {"triton-grpc-protocol-triton-access-token": args.token}
    client = client_module.InferenceServerClient(url=args.url)

    def infer():
        x = client_module.InferInput("x", [1, 2], "FP32")
        x.set_data_from_numpy(np.array([[1, 2]], dtype=np.float32))
        return client.infer("Scale", [x]).as_numpy("y").tolist()

    def index():
        if args.protocol == "http":
            return client.get_model_repository_index(headers=headers)
        models = client.get_model_repository_index(headers=headers, as_json=True)["models"]
        return models

    check(infer() == [[2.0, 4.0]], "Scale does not answer before the unload")
    check(
        index() == [{"name": "Scale", "version": "1", "state": "READY"}],
        f"index before the unload: {index()}",
    )
    print("ok served and indexed as READY")

    expect_error(lambda: client.unload_model("Scale"), "triton-access-token")
    check(client.is_model_ready("Scale"), "an unload without the token unloaded the model")
    print("ok the unload needs the token")

    client.unload_model("Scale", headers=headers)
    check(not client.is_model_ready("Scale"), "Scale ready after the unload")
    expect_error(infer, "Request for unknown model: 'Scale' has no available versions")
    check(
        index() == [
            {"name": "Scale", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"}
        ],
        f"index after the unload: {index()}",
    )
    print("ok unloaded: inference refused, index UNAVAILABLE unloaded")

    client.unload_model("Scale", headers=headers)
    print("ok a second unload succeeds")

    client.load_model("Scale", headers=headers)
    check(client.is_model_ready("Scale"), "Scale not ready after the load")
    check(infer() == [[2.0, 4.0]], "Scale does not answer after the load")
    check(
        index() == [{"name": "Scale", "version": "1", "state": "READY"}],
        f"index after the load: {index()}",
    )
    print("ok loaded again: answers, index READY")

    expect_error(
        lambda: client.load_model("Nope", headers=headers),
        "failed to load 'Nope', failed to poll from model repository",
    )
    client.unload_model("Nope", headers=headers)
    expect_error(
        lambda: client.load_model("Scale", headers=headers, config='{"max_batch_size": 2}'),
        "Cannot load model 'Scale' with a new configuration",
    )
    check(infer() == [[2.0, 4.0]], "Scale does not answer after the refused loads")
    print("ok Triton's answers for a model not in the repository and a new configuration")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as error:
        print(f"FAIL {error}")
        sys.exit(1)
