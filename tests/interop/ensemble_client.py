"""Interop check of DenoTriton's ensembles with NVIDIA's official Python clients.

Driven by tests/pipeline_test.ts, which serves the ensemble `Chain` (x -> Double -> d,
x -> Plus1 -> p, (d, p) -> Mul -> y: y = 2x * (x + 1)) over HTTP and gRPC. For each protocol:
get_model_config accepts the ensemble's config (platform "ensemble", its steps), the ensemble
returns the chained result, and a failing step fails the request naming the step's model.
Prints one "ok <check>" line per passed check and exits non-zero otherwise.
"""

import argparse

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

STEPS = ["Double", "Plus1", "Mul"]
FAILURE = "in ensemble 'Chain', model 'Double' failed: Error: boom"


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def check_config(config, protocol):
    check(config["name"] == "Chain", f"{protocol}: name {config['name']!r}")
    check(config["platform"] == "ensemble", f"{protocol}: platform {config['platform']!r}")
    steps = config["ensemble_scheduling"]["step"]
    check([step["model_name"] for step in steps] == STEPS, f"{protocol}: steps {steps!r}")
    check(
        steps[2]["input_map"] == {"a": "d", "b": "p"} and steps[2]["output_map"] == {"v": "y"},
        f"{protocol}: Mul's maps {steps[2]!r}",
    )
    check("dynamic_batching" not in config, f"{protocol}: an ensemble has no batcher")
    print(f"ok {protocol} get_model_config")


def run(client, module, protocol):
    x = module.InferInput("x", [1, 2], "FP32")
    x.set_data_from_numpy(np.array([[1, 2]], dtype=np.float32))
    result = client.infer("Chain", [x], outputs=[module.InferRequestedOutput("y")])
    y = result.as_numpy("y")
    check(y.tolist() == [[4.0, 12.0]], f"{protocol}: y = {y.tolist()}")
    print(f"ok {protocol} chained result")
    bad = module.InferInput("x", [1, 2], "FP32")
    bad.set_data_from_numpy(np.array([[99, 2]], dtype=np.float32))
    try:
        client.infer("Chain", [bad])
    except InferenceServerException as error:
        check(FAILURE in error.message(), f"{protocol}: {error.message()!r}")
        print(f"ok {protocol} failing step named")
        return
    raise AssertionError(f"{protocol}: the failing step did not fail the request")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", required=True)
    parser.add_argument("--grpc", required=True)
    args = parser.parse_args()
    http = httpclient.InferenceServerClient(args.http)
    grpc = grpcclient.InferenceServerClient(args.grpc)
    check_config(http.get_model_config("Chain"), "http")
    check_config(grpc.get_model_config("Chain", as_json=True)["config"], "grpc")
    check(http.get_model_metadata("Chain")["platform"] == "ensemble", "http: metadata platform")
    check(grpc.get_model_metadata("Chain").platform == "ensemble", "grpc: metadata platform")
    print("ok metadata")
    run(http, httpclient, "http")
    run(grpc, grpcclient, "grpc")
    print("all checks passed")


if __name__ == "__main__":
    main()
