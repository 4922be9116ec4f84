"""Interop check of DenoTriton's gRPC front end with NVIDIA's official Python client.

Driven by tests/grpc_interop_test.ts, which starts tests/grpc_test_server.ts's models
(AddSub, Identity, Echo, Stream, Fail) on an ephemeral port. Prints one "ok <check>" line per
passed check and exits non-zero with the failing check's message otherwise.
"""

import argparse
import json
import queue
import sys

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def expect_error(run, status, text):
    try:
        run()
    except InferenceServerException as error:
        check(
            error.status() == status,
            f"expected status {status}, got {error.status()}: {error.message()}",
        )
        check(text in error.message(), f"expected {text!r} in {error.message()!r}")
        return error
    raise AssertionError(f"expected an error with status {status}")


def health_and_metadata(client):
    check(client.is_server_live(), "server not live")
    check(client.is_server_ready(), "server not ready")
    check(client.is_model_ready("AddSub"), "AddSub not ready")
    check(client.is_model_ready("AddSub", "1"), "AddSub version 1 not ready")
    check(not client.is_model_ready("Missing"), "unknown model reported ready")
    metadata = client.get_server_metadata(as_json=True)
    check(metadata["version"] == "2.51.0", f"server version: {metadata}")
    check("binary_tensor_data" in metadata["extensions"], f"extensions: {metadata}")
    check("system_shared_memory" in metadata["extensions"], f"extensions: {metadata}")
    check("cuda_shared_memory" in metadata["extensions"], f"extensions: {metadata}")
    model = client.get_model_metadata("AddSub", as_json=True)
    check(model["name"] == "AddSub", f"model metadata: {model}")
    check(model["versions"] == ["1"], f"versions: {model}")
    check(
        model["inputs"] == [
            {"name": "a", "datatype": "FP32", "shape": ["-1", "-1"]},
            {"name": "b", "datatype": "FP32", "shape": ["-1", "-1"]},
        ],
        f"inputs: {model['inputs']}",
    )
    expect_error(
        lambda: client.get_model_metadata("Missing"),
        "StatusCode.NOT_FOUND",
        "Request for unknown model: 'Missing' is not found",
    )
    print("ok health and metadata")


def model_config(client):
    config = client.get_model_config("AddSub", as_json=True)["config"]
    check(config["name"] == "AddSub", f"config name: {config}")
    check(config["max_batch_size"] == 8, f"max_batch_size: {config}")
    check(config["input"][0]["data_type"] == "TYPE_FP32", f"input: {config['input']}")
    check(config["input"][0]["dims"] == ["-1"], f"dims: {config['input']}")
    check("dynamic_batching" in config, f"dynamic_batching: {config}")
    check(config["instance_group"][0]["kind"] == "KIND_CPU", f"instance_group: {config}")
    stream = client.get_model_config("Stream", as_json=True)["config"]
    check(stream["model_transaction_policy"]["decoupled"] is True, f"decoupled: {stream}")
    expect_error(
        lambda: client.get_model_config("Missing"), "StatusCode.NOT_FOUND", "Missing"
    )
    print("ok model config")


def infer_add_sub(client):
    a = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)
    b = np.full((2, 3), 0.5, dtype=np.float32)
    inputs = [
        grpcclient.InferInput("a", [2, 3], "FP32"),
        grpcclient.InferInput("b", [2, 3], "FP32"),
    ]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = client.infer("AddSub", inputs, request_id="req-1")
    check(np.array_equal(result.as_numpy("add"), a + b), "add mismatch")
    check(np.array_equal(result.as_numpy("sub"), a - b), "sub mismatch")
    response = result.get_response(as_json=True)
    check(response["id"] == "req-1", f"id: {response}")
    check(response["model_version"] == "1", f"model_version: {response}")
    # Only the requested output comes back.
    only_sub = client.infer(
        "AddSub", inputs, outputs=[grpcclient.InferRequestedOutput("sub")]
    )
    check(only_sub.as_numpy("add") is None, "unrequested output returned")
    check(np.array_equal(only_sub.as_numpy("sub"), a - b), "sub mismatch (requested)")
    print("ok infer AddSub")


def infer_identity(client):
    arrays = {
        "bool": ("BOOL", np.array([True, False, True])),
        "int8": ("INT8", np.array([-128, 0, 127], dtype=np.int8)),
        "int16": ("INT16", np.array([-32768, 1, 32767], dtype=np.int16)),
        "int32": ("INT32", np.array([-(2**31), 7, 2**31 - 1], dtype=np.int32)),
        "int64": ("INT64", np.array([-(2**63), 7, 2**63 - 1], dtype=np.int64)),
        "uint8": ("UINT8", np.array([0, 1, 255], dtype=np.uint8)),
        "uint16": ("UINT16", np.array([0, 1, 65535], dtype=np.uint16)),
        "uint32": ("UINT32", np.array([0, 1, 2**32 - 1], dtype=np.uint32)),
        "uint64": ("UINT64", np.array([0, 1, 2**64 - 1], dtype=np.uint64)),
        "float16": ("FP16", np.array([0.5, -1.25, 65504], dtype=np.float16)),
        "float32": ("FP32", np.array([0.1, -2.5, 3e38], dtype=np.float32)),
        "float64": ("FP64", np.array([0.1, -2.5, 1e300], dtype=np.float64)),
        "bytes": ("BYTES", np.array([b"a\x00b", b"", b"\x00\xff"], dtype=np.object_)),
    }
    inputs = []
    for name, (datatype, array) in arrays.items():
        tensor = grpcclient.InferInput(f"IN_{name}", list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    result = client.infer("Identity", inputs)
    for name, (datatype, array) in arrays.items():
        out = result.as_numpy(f"OUT_{name}")
        check(out is not None, f"OUT_{name} missing")
        check(out.shape == array.shape, f"OUT_{name} shape {out.shape}")
        check(
            list(out.tolist()) == list(array.tolist()),
            f"OUT_{name}: {out.tolist()} != {array.tolist()}",
        )
        output = result.get_output(f"OUT_{name}")
        check(output.datatype == datatype, f"OUT_{name} datatype {output.datatype}")
    print("ok infer Identity over every dtype (raw contents, BYTES with \\x00)")


def infer_errors(client):
    x = grpcclient.InferInput("x", [1], "FP32")
    x.set_data_from_numpy(np.array([1], dtype=np.float32))
    expect_error(
        lambda: client.infer("Missing", [x]),
        "StatusCode.NOT_FOUND",
        "Request for unknown model: 'Missing' is not found",
    )
    n = grpcclient.InferInput("n", [1], "INT32")
    n.set_data_from_numpy(np.array([2], dtype=np.int32))
    expect_error(
        lambda: client.infer("Stream", [n]),
        "StatusCode.UNIMPLEMENTED",
        "ModelInfer RPC doesn't support models with decoupled transaction policy",
    )
    expect_error(
        lambda: client.infer("Fail", [x]), "StatusCode.INTERNAL", "Model failed on purpose"
    )
    wrong = grpcclient.InferInput("a", [1, 2], "INT32")
    wrong.set_data_from_numpy(np.array([[1, 2]], dtype=np.int32))
    expect_error(lambda: client.infer("AddSub", [wrong]), "StatusCode.INVALID_ARGUMENT", "")
    expect_error(
        lambda: client.load_model("Missing"),
        "StatusCode.NOT_FOUND",
        "failed to load 'Missing', failed to poll from model repository",
    )
    # The server keeps serving after every error.
    check(client.is_server_live(), "server not live after errors")
    print("ok error mapping")


def parameters_and_headers(client):
    text = grpcclient.InferInput("text", [1, 1], "BYTES")
    text.set_data_from_numpy(np.array([[b"hi"]], dtype=np.object_))
    result = client.infer(
        "Echo",
        [text],
        parameters={"flag": True, "count": 3, "ratio": 0.5, "name": "x"},
        headers={"x-forward-user": "alice", "x-other": "hidden"},
        priority=0,
    )
    check(result.as_numpy("text").tolist() == [[b"hi"]], "echo text mismatch")
    params = json.loads(result.as_numpy("params")[0][0])
    check(
        params
        == {"flag": True, "count": 3, "ratio": 0.5, "name": "x", "x-forward-user": "alice"},
        f"parameters: {params}",
    )
    print("ok parameters and forwarded headers")


def statistics_and_index(client):
    stats = client.get_inference_statistics("AddSub", as_json=True)["model_stats"]
    check(len(stats) == 1 and stats[0]["name"] == "AddSub", f"stats: {stats}")
    check(int(stats[0]["inference_count"]) >= 4, f"inference_count: {stats[0]}")
    every = client.get_inference_statistics(as_json=True)["model_stats"]
    check({s["name"] for s in every} >= {"AddSub", "Stream"}, f"all stats: {every}")
    index = client.get_model_repository_index(as_json=True)["models"]
    names = {entry["name"]: entry for entry in index}
    check(names["AddSub"]["state"] == "READY", f"index: {index}")
    print("ok statistics and repository index")


def logging_settings(client):
    settings = client.get_log_settings(as_json=True)["settings"]
    check(
        sorted(settings)
        == ["log_error", "log_file", "log_format", "log_info", "log_verbose_level", "log_warning"],
        f"log settings: {settings}",
    )
    before = settings["log_verbose_level"]["uint32_param"]
    changed = client.update_log_settings({"log_verbose_level": before + 1}, as_json=True)
    check(
        changed["settings"]["log_verbose_level"]["uint32_param"] == before + 1,
        f"changed log settings: {changed}",
    )
    expect_error(
        lambda: client.update_log_settings({"log_file": "/tmp/elsewhere.log"}),
        "StatusCode.UNIMPLEMENTED",
        "log_file",
    )
    expect_error(
        lambda: client.update_log_settings({"log_format": "xml"}),
        "StatusCode.INVALID_ARGUMENT",
        "log_format",
    )
    restored = client.update_log_settings({"log_verbose_level": before}, as_json=True)
    check(
        restored["settings"]["log_verbose_level"]["uint32_param"] == before,
        f"restored log settings: {restored}",
    )
    print("ok log settings")


def streaming(client):
    responses = queue.Queue()

    def callback(result, error):
        responses.put((result, error))

    def take():
        result, error = responses.get(timeout=30)
        if error is not None:
            return None, error
        return result.get_response(as_json=True), result

    client.start_stream(callback=callback)
    try:
        n = grpcclient.InferInput("n", [1], "INT32")
        n.set_data_from_numpy(np.array([3], dtype=np.int32))
        client.async_stream_infer("Stream", [n], request_id="three")
        seen = []
        for _ in range(3):
            response, result = take()
            check(response is not None, f"stream error: {result}")
            check(response["id"] == "three", f"stream id: {response}")
            final = response["parameters"]["triton_final_response"]["bool_param"]
            seen.append((int(result.as_numpy("i")[0]), final))
        # Like Triton, the flags-only final response is not sent unless asked for.
        check(seen == [(0, False), (1, False), (2, False)], f"stream steps: {seen}")

        two = grpcclient.InferInput("n", [1], "INT32")
        two.set_data_from_numpy(np.array([2], dtype=np.int32))
        client.async_stream_infer(
            "Stream", [two], request_id="two", enable_empty_final_response=True
        )
        finals = []
        for _ in range(3):
            response, _ = take()
            check(response["id"] == "two", f"stream id: {response}")
            finals.append(
                (
                    len(response.get("outputs", [])),
                    response["parameters"]["triton_final_response"]["bool_param"],
                )
            )
        check(finals == [(1, False), (1, False), (0, True)], f"with empty final: {finals}")

        # No response for zero steps unless an empty final is asked for.
        zero = grpcclient.InferInput("n", [1], "INT32")
        zero.set_data_from_numpy(np.array([0], dtype=np.int32))
        client.async_stream_infer(
            "Stream", [zero], request_id="zero", enable_empty_final_response=True
        )
        response, _ = take()
        check(response["id"] == "zero", f"empty final id: {response}")
        check(
            response["parameters"]["triton_final_response"]["bool_param"] is True,
            f"empty final: {response}",
        )
        check(not response.get("outputs"), f"empty final outputs: {response}")

        # Errors arrive in the callback and the stream stays open.
        bad = grpcclient.InferInput("n", [1], "INT32")
        bad.set_data_from_numpy(np.array([-1], dtype=np.int32))
        client.async_stream_infer("Stream", [bad], request_id="bad")
        response, error = take()
        check(response is None, "expected an error on the stream")
        check("Negative count" in str(error), f"stream error text: {error}")
        client.async_stream_infer("Missing", [bad], request_id="missing")
        _, error = take()
        check("unknown model" in str(error), f"stream unknown model: {error}")

        # Coupled models also answer over the stream, once, marked final.
        a = grpcclient.InferInput("a", [1, 2], "FP32")
        a.set_data_from_numpy(np.array([[1, 2]], dtype=np.float32))
        b = grpcclient.InferInput("b", [1, 2], "FP32")
        b.set_data_from_numpy(np.array([[3, 4]], dtype=np.float32))
        client.async_stream_infer("AddSub", [a, b], request_id="coupled")
        response, result = take()
        check(response["id"] == "coupled", f"coupled id: {response}")
        check(
            response["parameters"]["triton_final_response"]["bool_param"] is True,
            f"coupled final: {response}",
        )
        check(result.as_numpy("add").tolist() == [[4, 6]], "coupled add mismatch")
    finally:
        client.stop_stream()
    check(responses.empty(), "unexpected extra stream responses")
    print("ok streaming")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    args = parser.parse_args()
    client = grpcclient.InferenceServerClient(url=args.url)
    try:
        health_and_metadata(client)
        model_config(client)
        infer_add_sub(client)
        infer_identity(client)
        infer_errors(client)
        parameters_and_headers(client)
        statistics_and_index(client)
        logging_settings(client)
        streaming(client)
    except AssertionError as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return 1
    finally:
        client.close()
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
