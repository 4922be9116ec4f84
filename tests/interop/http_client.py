#!/usr/bin/env python3
"""Drives a DenoTriton server with the official ``tritonclient.http`` client.

The server must serve the models of ``tests/_models.ts`` (``identity_<dtype>``, ``Failing``,
``Slow``, ``Parameters``) plus ``AddSub`` (``examples/add_sub/model.ts``), with
``httpHeaderForwardPattern`` = ``x-forward-.*``.

Each scenario is one function; every one runs, each prints ``PASS <name>`` or
``FAIL <name>: <reason>``, then a summary line ``interop http: <n> passed, <m> failed``.
Exits 1 when any scenario failed. Works with tritonclient 2.51 and later.

Usage: ``python3 http_client.py --url 127.0.0.1:8000 [--only NAME ...]``
"""

import argparse
import json
import re
import sys
import traceback

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

FAILING_MESSAGE = "Deliberate failure: division by zero in the test model"

# dtype name -> (numpy dtype, values used for JSON mode, extra values only binary can carry)
I64 = np.iinfo(np.int64)
U64 = np.iinfo(np.uint64)
IDENTITY_CASES = {
    "BOOL": (np.bool_, [True, False, True, True], []),
    "INT8": (np.int8, [-128, -1, 0, 127], []),
    "INT16": (np.int16, [-32768, -1, 0, 32767], []),
    "INT32": (np.int32, [-(2**31), -1, 0, 2**31 - 1], []),
    "INT64": (np.int64, [-(2**40) - 3, -1, 0, 2**40 + 7], [I64.min, I64.max]),
    "UINT8": (np.uint8, [0, 1, 128, 255], []),
    "UINT16": (np.uint16, [0, 1, 32768, 65535], []),
    "UINT32": (np.uint32, [0, 1, 2**31, 2**32 - 1], []),
    "UINT64": (np.uint64, [0, 1, 2**40 + 7, 2**52], [U64.max, 2**63]),
    "FP16": (np.float16, [0.5, -1.25, 65504.0, 0.0], [np.inf, -np.inf]),
    "FP32": (np.float32, [0.1, -1.5, 3.4e38, 1e-38], [np.inf, -np.inf]),
    "FP64": (np.float64, [0.1, -1.5, 1e300, 5e-324], [np.inf, -np.inf]),
}
BYTES_VALUES = [b"hello", b"nul\x00inside", b"", b"\x00", "caf\u00e9 \u2603".encode()]
BYTES_BINARY_ONLY = [b"\xff\xfe not utf-8"]


class Mismatch(Exception):
    """A scenario's check failed."""


def check(condition, message):
    if not condition:
        raise Mismatch(message)


def check_equal(actual, expected, what):
    if actual != expected:
        raise Mismatch(f"{what}: expected {expected!r}, got {actual!r}")


def check_array(actual, expected, what):
    check(actual is not None, f"{what}: output missing from the response")
    check_equal(actual.dtype, expected.dtype, f"{what} dtype")
    check_equal(tuple(actual.shape), tuple(expected.shape), f"{what} shape")
    if expected.dtype.kind == "f":
        same = np.array_equal(actual, expected, equal_nan=True)
    else:
        same = np.array_equal(actual, expected)
    check(same, f"{what}: expected {expected.tolist()!r}, got {actual.tolist()!r}")


def mentions(message, name):
    """Whether ``message`` names ``name`` as a whole word (so that ``b`` is not any letter b)."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message) is not None


def expect_error(call, what, *fragments, names=()):
    """Runs ``call``; it must raise InferenceServerException whose message has every fragment
    (case-insensitive) and names every one of ``names`` as a whole word."""
    try:
        call()
    except InferenceServerException as error:
        message = str(error.message() or error)
        check(message.strip() != "", f"{what}: the error has no message")
        for fragment in fragments:
            check(
                fragment.lower() in message.lower(),
                f"{what}: error message {message!r} does not mention {fragment!r}",
            )
        for name in names:
            check(mentions(message, name), f"{what}: error message {message!r} does not name {name!r}")
        return message
    raise Mismatch(f"{what}: expected an InferenceServerException, the call succeeded")


def make_input(name, array, binary):
    tensor = httpclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
    tensor.set_data_from_numpy(array, binary_data=binary)
    return tensor


def add_sub_inputs(a, b, binary=True):
    return [make_input("a", a, binary), make_input("b", b, binary)]


def scenario_health(client):
    check(client.is_server_live(), "server is not live")
    check(client.is_server_ready(), "server is not ready")
    check(client.is_model_ready("AddSub"), "AddSub is not ready")
    check(client.is_model_ready("AddSub", "1"), "AddSub version 1 is not ready")
    check(not client.is_model_ready("NoSuchModel"), "an unknown model reports ready")
    check(not client.is_model_ready("AddSub", "2"), "AddSub version 2 (not bound) reports ready")


def scenario_server_metadata(client):
    metadata = client.get_server_metadata()
    check(isinstance(metadata.get("name"), str) and metadata["name"], f"no name in {metadata}")
    check(isinstance(metadata.get("version"), str), f"no version in {metadata}")
    check(isinstance(metadata.get("extensions"), list), f"no extensions list in {metadata}")
    # Triton lists the shared-memory extensions it serves: system and CUDA.
    check("system_shared_memory" in metadata["extensions"], f"extensions: {metadata}")
    check("cuda_shared_memory" in metadata["extensions"], f"extensions: {metadata}")


def scenario_model_metadata(client):
    metadata = client.get_model_metadata("AddSub")
    check_equal(metadata.get("name"), "AddSub", "model name")
    check("1" in metadata.get("versions", []), f"version '1' missing from {metadata}")
    inputs = {t["name"]: t for t in metadata.get("inputs", [])}
    outputs = {t["name"]: t for t in metadata.get("outputs", [])}
    check_equal(sorted(inputs), ["a", "b"], "input names")
    check_equal(sorted(outputs), ["add", "sub"], "output names")
    for tensor in [*inputs.values(), *outputs.values()]:
        check_equal(tensor["datatype"], "FP32", f"datatype of {tensor['name']}")
        # The batch axis shows as -1 in front of the declared [-1].
        check_equal([int(d) for d in tensor["shape"]], [-1, -1], f"shape of {tensor['name']}")
    versioned = client.get_model_metadata("AddSub", "1")
    check_equal(versioned.get("name"), "AddSub", "model name (version 1)")
    expect_error(lambda: client.get_model_metadata("NoSuchModel"), "unknown model metadata",
                 "NoSuchModel")


def scenario_model_config(client):
    config = client.get_model_config("AddSub")
    check_equal(config.get("name"), "AddSub", "config name")
    check_equal(int(config.get("max_batch_size", 0)), 128, "max_batch_size")
    check("dynamic_batching" in config, f"no dynamic_batching in {config}")
    inputs = {t["name"]: t for t in config.get("input", [])}
    outputs = {t["name"]: t for t in config.get("output", [])}
    check_equal(sorted(inputs), ["a", "b"], "config input names")
    check_equal(sorted(outputs), ["add", "sub"], "config output names")
    for tensor in [*inputs.values(), *outputs.values()]:
        check_equal(tensor["data_type"], "TYPE_FP32", f"data_type of {tensor['name']}")
        check_equal([int(d) for d in tensor["dims"]], [-1], f"dims of {tensor['name']}")
    identity = client.get_model_config("identity_bytes")
    check_equal(identity["input"][0]["data_type"], "TYPE_STRING", "BYTES config data_type")
    expect_error(lambda: client.get_model_config("NoSuchModel"), "unknown model config",
                 "NoSuchModel")


def scenario_repository_index(client):
    index = client.get_model_repository_index()
    check(isinstance(index, list), f"the index is not a list: {index!r}")
    by_name = {entry.get("name"): entry for entry in index}
    expected = ["AddSub", "Failing", "Parameters", "Slow",
                *[f"identity_{name.lower()}" for name in [*IDENTITY_CASES, "BYTES"]]]
    for name in expected:
        check(name in by_name, f"{name} missing from the repository index {sorted(by_name)}")
        check_equal(by_name[name].get("state"), "READY", f"state of {name}")
        check_equal(str(by_name[name].get("version")), "1", f"version of {name}")


def run_add_sub(client, binary):
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
    b = np.array([[0.5, 0.25, -1.0], [1.0, 1.0, 1.0]], dtype=np.float32)
    outputs = [httpclient.InferRequestedOutput(name, binary_data=binary) for name in ["add", "sub"]]
    result = client.infer("AddSub", add_sub_inputs(a, b, binary), outputs=outputs)
    check_array(result.as_numpy("add"), a + b, "add")
    check_array(result.as_numpy("sub"), a - b, "sub")
    response = result.get_response()
    check_equal(response.get("model_name"), "AddSub", "response model_name")
    check_equal(response.get("model_version"), "1", "response model_version")
    for output in response["outputs"]:
        check_equal(output["datatype"], "FP32", f"datatype of output {output['name']}")
        check_equal(output["shape"], [2, 3], f"shape of output {output['name']}")
        has_binary = "binary_data_size" in output.get("parameters", {})
        check_equal(has_binary, binary, f"binary_data_size present on {output['name']}")
        check_equal("data" in output, not binary, f"data present on {output['name']}")


def scenario_add_sub_json(client):
    run_add_sub(client, binary=False)


def scenario_add_sub_binary(client):
    run_add_sub(client, binary=True)


def scenario_add_sub_defaults(client):
    # No outputs named: every output comes back, binary (tritonclient sets binary_data_output).
    a = np.arange(8, dtype=np.float32).reshape(1, 8)
    b = np.ones((1, 8), dtype=np.float32)
    result = client.infer("AddSub", add_sub_inputs(a, b, binary=False), model_version="1",
                          request_id="req-42")
    check_array(result.as_numpy("add"), a + b, "add")
    check_array(result.as_numpy("sub"), a - b, "sub")
    check_equal(result.get_response().get("id"), "req-42", "echoed request id")
    # Only the output asked for comes back.
    result = client.infer("AddSub", add_sub_inputs(a, b),
                          outputs=[httpclient.InferRequestedOutput("sub")])
    check_equal([o["name"] for o in result.get_response()["outputs"]], ["sub"], "outputs")
    check_array(result.as_numpy("sub"), a - b, "sub only")


def scenario_compression(client):
    # gzip and deflate request bodies, and compressed responses, in JSON and binary mode.
    a = np.arange(64, dtype=np.float32).reshape(2, 32)
    b = np.full((2, 32), 0.5, dtype=np.float32)
    for algorithm in ("gzip", "deflate"):
        for binary in (False, True):
            outputs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in ["add", "sub"]]
            result = client.infer("AddSub", add_sub_inputs(a, b, binary), outputs=outputs,
                                  request_compression_algorithm=algorithm,
                                  response_compression_algorithm=algorithm)
            check_array(result.as_numpy("add"), a + b, f"add ({algorithm}, binary={binary})")
            check_array(result.as_numpy("sub"), a - b, f"sub ({algorithm}, binary={binary})")


def identity_arrays(kserve, binary):
    if kserve == "BYTES":
        values = BYTES_VALUES + (BYTES_BINARY_ONLY if binary else [])
        return np.array([values, values[1:] + values[:1]], dtype=np.object_)
    np_dtype, json_values, binary_values = IDENTITY_CASES[kserve]
    values = json_values + (binary_values if binary else [])
    return np.array([values, values[1:] + values[:1]], dtype=np_dtype)


def run_identity(client, kserve, binary):
    model = f"identity_{kserve.lower()}"
    array = identity_arrays(kserve, binary)
    outputs = [httpclient.InferRequestedOutput("OUTPUT", binary_data=binary)]
    result = client.infer(model, [make_input("INPUT", array, binary)], outputs=outputs)
    got = result.as_numpy("OUTPUT")
    response_output = result.get_response()["outputs"][0]
    check_equal(response_output["datatype"], kserve, f"{model} output datatype")
    check_equal(response_output["shape"], list(array.shape), f"{model} output shape")
    if kserve == "BYTES":
        check(got is not None, f"{model}: OUTPUT missing")
        check_equal(tuple(got.shape), array.shape, f"{model} shape")
        # JSON mode returns str elements, binary mode bytes.
        expected = array.tolist() if binary else [[v.decode() for v in row] for row in array]
        check_equal(got.tolist(), expected, f"{model} values")
    else:
        check_array(got, array, model)


def scenario_identity_json(client):
    for kserve in [*IDENTITY_CASES, "BYTES"]:
        if kserve == "FP16":
            continue  # KServe JSON cannot carry FP16
        run_identity(client, kserve, binary=False)


def scenario_identity_binary(client):
    for kserve in [*IDENTITY_CASES, "BYTES"]:
        run_identity(client, kserve, binary=True)


def scenario_identity_64bit_extremes_json(client):
    # Triton keeps 64-bit integers exact in JSON; a double would round these.
    for kserve, values in [("INT64", [I64.min, I64.max, -(2**53) - 1]),
                           ("UINT64", [U64.max, 2**63, 2**53 + 1])]:
        np_dtype = IDENTITY_CASES[kserve][0]
        array = np.array([values], dtype=np_dtype)
        outputs = [httpclient.InferRequestedOutput("OUTPUT", binary_data=False)]
        result = client.infer(f"identity_{kserve.lower()}", [make_input("INPUT", array, False)],
                              outputs=outputs)
        check_array(result.as_numpy("OUTPUT"), array, f"{kserve} extremes over JSON")


def scenario_identity_empty_and_batched(client):
    # A zero-element tensor and the largest batch both round-trip.
    empty = np.zeros((1, 0), dtype=np.float32)
    result = client.infer("identity_fp32", [make_input("INPUT", empty, True)])
    output = result.get_response()["outputs"][0]
    check_equal(output["datatype"], "FP32", "empty FP32 datatype")
    check_equal(output["shape"], [1, 0], "empty FP32 shape")
    check_equal(output.get("parameters", {}).get("binary_data_size"), 0, "empty FP32 byte size")
    # tritonclient 2.51 returns float64 for an empty binary output, later versions float32.
    check_equal(tuple(result.as_numpy("OUTPUT").shape), (1, 0), "empty FP32 array shape")
    full = np.arange(8 * 5, dtype=np.int32).reshape(8, 5)
    for binary in (False, True):
        outputs = [httpclient.InferRequestedOutput("OUTPUT", binary_data=binary)]
        result = client.infer("identity_int32", [make_input("INPUT", full, binary)],
                              outputs=outputs)
        check_array(result.as_numpy("OUTPUT"), full, f"batch of 8 (binary={binary})")


def scenario_fp16_json_rejected(client):
    array = np.array([[0.5, 1.5]], dtype=np.float16)
    # FP16 input as JSON: the server refuses it (KServe JSON has no FP16).
    expect_error(
        lambda: client.infer("identity_fp16", [make_input("INPUT", array, False)],
                             outputs=[httpclient.InferRequestedOutput("OUTPUT", binary_data=True)]),
        "FP16 input as JSON")
    # FP16 output as JSON: refused too.
    expect_error(
        lambda: client.infer("identity_fp16", [make_input("INPUT", array, True)],
                             outputs=[httpclient.InferRequestedOutput("OUTPUT", binary_data=False)]),
        "FP16 output as JSON")
    result = client.infer("identity_fp16", [make_input("INPUT", array, True)])
    check_array(result.as_numpy("OUTPUT"), array, "FP16 after the refusals")


def run_parameters(client, parameters=None, headers=None, outputs=True):
    x = np.zeros((1, 2), dtype=np.float32)
    requested = [httpclient.InferRequestedOutput("parameters", binary_data=False)] if outputs else None
    result = client.infer("Parameters", [make_input("x", x, True)], outputs=requested,
                          parameters=parameters, headers=headers)
    got = result.as_numpy("parameters")
    check(got is not None, "Parameters: output missing")
    check_equal(tuple(got.shape), (1, 1), "Parameters output shape")
    value = got[0][0]
    return json.loads(value.decode() if isinstance(value, bytes) else value)


def scenario_parameters(client):
    sent = {"multiplier": 3, "name": "abc", "flag": True, "ratio": 0.5}
    got = run_parameters(client, parameters=sent)
    check_equal(got, sent, "request parameters seen by the model")
    for key, value in sent.items():
        check_equal(type(got[key]), type(value), f"type of parameter {key}")
    check_equal(run_parameters(client), {}, "parameters of a request with none")
    # Without outputs, tritonclient sets binary_data_output: a protocol flag, not a parameter.
    check_equal(run_parameters(client, outputs=False), {}, "parameters with binary_data_output")


def scenario_forwarded_headers(client):
    headers = {"x-forward-alpha": "one", "x-forward-beta": "2", "x-other": "not forwarded"}
    got = run_parameters(client, parameters={"multiplier": 4}, headers=headers)
    check_equal(got, {"multiplier": 4, "x-forward-alpha": "one", "x-forward-beta": "2"},
                "parameters with forwarded headers")


def stats_of(client, model):
    stats = client.get_inference_statistics(model)
    entries = [s for s in stats.get("model_stats", []) if s.get("name") == model]
    check(len(entries) == 1, f"expected one stats entry for {model}, got {stats}")
    entry = entries[0]
    inference = entry["inference_stats"]
    return {
        "success": int(inference["success"]["count"]),
        "fail": int(inference["fail"]["count"]),
        "inference_count": int(entry.get("inference_count", 0)),
        "execution_count": int(entry.get("execution_count", 0)),
    }


def scenario_statistics(client):
    before = stats_of(client, "AddSub")
    a = np.ones((2, 4), dtype=np.float32)
    for _ in range(3):
        client.infer("AddSub", add_sub_inputs(a, a))
    after = stats_of(client, "AddSub")
    check_equal(after["success"] - before["success"], 3, "AddSub success count rise")
    check_equal(after["fail"] - before["fail"], 0, "AddSub fail count rise")
    check_equal(after["inference_count"] - before["inference_count"], 6,
                "AddSub inference_count rise (3 requests of batch 2)")
    check(1 <= after["execution_count"] - before["execution_count"] <= 3,
          f"AddSub execution_count rose from {before} to {after}")
    failing_before = stats_of(client, "Failing")
    expect_error(lambda: client.infer("Failing", [make_input("x", a, True)]), "Failing model")
    failing_after = stats_of(client, "Failing")
    check_equal(failing_after["fail"] - failing_before["fail"], 1, "Failing fail count rise")
    check_equal(failing_after["success"] - failing_before["success"], 0, "Failing success rise")
    everything = client.get_inference_statistics()
    names = {s.get("name") for s in everything.get("model_stats", [])}
    check({"AddSub", "Failing", "Slow"} <= names, f"all-model statistics lack models: {names}")
    expect_error(lambda: client.get_inference_statistics("NoSuchModel"), "unknown model stats",
                 "NoSuchModel")


def scenario_errors(client):
    a = np.ones((1, 4), dtype=np.float32)
    expect_error(lambda: client.infer("NoSuchModel", add_sub_inputs(a, a)), "unknown model",
                 "NoSuchModel")
    expect_error(lambda: client.infer("AddSub", add_sub_inputs(a, a), model_version="7"),
                 "unknown version")
    wrong_dtype = [make_input("a", a.astype(np.int32), True), make_input("b", a, True)]
    message = expect_error(lambda: client.infer("AddSub", wrong_dtype), "wrong dtype")
    check("INT32" in message.upper() or "datatype" in message.lower() or "dtype" in message.lower(),
          f"wrong dtype: message {message!r} names neither the dtype nor 'datatype'")
    rank3 = np.ones((1, 2, 2), dtype=np.float32)
    message = expect_error(lambda: client.infer("AddSub", add_sub_inputs(rank3, rank3)),
                           "wrong rank")
    check("shape" in message.lower(), f"wrong rank: message {message!r} does not say 'shape'")
    too_big = np.ones((129, 2), dtype=np.float32)
    message = expect_error(lambda: client.infer("AddSub", add_sub_inputs(too_big, too_big)),
                           "batch over max_batch_size")
    check("batch" in message.lower(), f"big batch: message {message!r} does not say 'batch'")
    expect_error(lambda: client.infer("AddSub", [make_input("a", a, True)]), "missing input",
                 names=["b"])
    extra = add_sub_inputs(a, a) + [make_input("c", a, True)]
    expect_error(lambda: client.infer("AddSub", extra), "unknown input", names=["c"])
    expect_error(
        lambda: client.infer("AddSub", add_sub_inputs(a, a),
                             outputs=[httpclient.InferRequestedOutput("nope")]),
        "unknown output", names=["nope"])
    expect_error(lambda: client.infer("Failing", [make_input("x", a, True)]), "raising callable",
                 FAILING_MESSAGE)
    # The server keeps serving after every one of those.
    result = client.infer("AddSub", add_sub_inputs(a, a))
    check_array(result.as_numpy("add"), a + a, "add after the errors")


def scenario_logging(client):
    settings = client.get_log_settings()
    check_equal(
        sorted(settings),
        ["log_error", "log_file", "log_format", "log_info", "log_verbose_level", "log_warning"],
        "log setting names",
    )
    before = settings["log_verbose_level"]
    changed = client.update_log_settings({"log_verbose_level": before + 1})
    check_equal(changed["log_verbose_level"], before + 1, "changed log_verbose_level")
    check_equal(client.get_log_settings()["log_verbose_level"], before + 1, "read back")
    expect_error(
        lambda: client.update_log_settings({"log_file": "/tmp/elsewhere.log"}),
        "changing log_file",
        "log_file",
    )
    expect_error(
        lambda: client.update_log_settings({"log_format": "xml"}), "bad log_format", "log_format"
    )
    check_equal(client.update_log_settings({"log_verbose_level": before})["log_verbose_level"],
                before, "restored log_verbose_level")


def scenario_async_infer(client_url):
    concurrency = 8
    client = httpclient.InferenceServerClient(url=client_url, concurrency=concurrency)
    try:
        pending = []
        for i in range(concurrency * 2):
            x = np.full((1, 3), float(i), dtype=np.float32) + np.arange(3, dtype=np.float32)
            request = client.async_infer("Slow", [make_input("x", x, i % 2 == 0)],
                                         request_id=f"async-{i}")
            pending.append((i, x, request))
        for i, x, request in pending:
            result = request.get_result()
            check_array(result.as_numpy("y"), x, f"async request {i}")
            check_equal(result.get_response().get("id"), f"async-{i}", f"async request {i} id")
        # A failing request among them raises from get_result, the others still succeed.
        bad = client.async_infer("Failing", [make_input("x", np.ones((1, 1), np.float32), True)])
        good = client.async_infer("Slow", [make_input("x", np.ones((1, 1), np.float32), True)])
        expect_error(lambda: bad.get_result(), "async failing request", FAILING_MESSAGE)
        check_array(good.get_result().as_numpy("y"), np.ones((1, 1), np.float32), "async good")
    finally:
        client.close()


SCENARIOS = [
    scenario_health,
    scenario_server_metadata,
    scenario_model_metadata,
    scenario_model_config,
    scenario_repository_index,
    scenario_add_sub_json,
    scenario_add_sub_binary,
    scenario_add_sub_defaults,
    scenario_compression,
    scenario_identity_json,
    scenario_identity_binary,
    scenario_identity_64bit_extremes_json,
    scenario_identity_empty_and_batched,
    scenario_fp16_json_rejected,
    scenario_parameters,
    scenario_forwarded_headers,
    scenario_statistics,
    scenario_errors,
    scenario_logging,
    scenario_async_infer,
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="host:port of the HTTP endpoint")
    parser.add_argument("--only", nargs="*", default=None, help="scenario names to run")
    args = parser.parse_args()
    url = args.url.removeprefix("http://")
    selected = [s for s in SCENARIOS
                if args.only is None or s.__name__.removeprefix("scenario_") in args.only]
    client = httpclient.InferenceServerClient(url=url)
    passed = failed = 0
    try:
        for scenario in selected:
            name = scenario.__name__.removeprefix("scenario_")
            try:
                scenario(url if scenario is scenario_async_infer else client)
            except Mismatch as error:
                failed += 1
                print(f"FAIL {name}: {error}", flush=True)
            except Exception as error:  # an unexpected exception is a failure with its trace
                failed += 1
                detail = traceback.format_exc().strip().replace("\n", "\n    ")
                print(f"FAIL {name}: {type(error).__name__}: {error}\n    {detail}", flush=True)
            else:
                passed += 1
                print(f"PASS {name}", flush=True)
    finally:
        client.close()
    print(f"interop http: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
