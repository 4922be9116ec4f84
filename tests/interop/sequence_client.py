"""Sequences through NVIDIA's official Python clients (tritonclient.http and tritonclient.grpc).

Driven by tests/sequence_test.ts, which serves the Accumulator (examples/accumulator: a running
total per sequence, integer correlation IDs) and AccumulatorS (the same with string IDs). Each
client runs several sequences interleaved, step by step: blocking infer() over HTTP and gRPC
(the sequences take turns), and with every request of a step in flight at once, HTTP and gRPC
async_infer and one gRPC stream (async_stream_infer).
Prints one JSON object: the running totals each client got, by client and sequence ID, the
error a continued unknown sequence got on each wire, and the Accumulator's sequence_batching as
gRPC's ModelConfig gives it.
"""

import argparse
import json
import queue
import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

# 2**53 and 2**53 + 1 are one double apart: a server that read IDs as doubles would merge them.
INTEGER_SEQUENCES = {
    1001: [1, 2, 3, 4],
    9007199254740992: [10, 20, 30, 40],
    9007199254740993: [100, -100, 7, 0],
}
STRING_SEQUENCES = {"alpha": [5, 5, 5], "beta": [-1, -2, -3]}


def steps(sequences):
    """Yields, per step, the (id, value, start, end) of each sequence that has one."""
    longest = max(len(values) for values in sequences.values())
    for step in range(longest):
        yield [
            (sid, values[step], step == 0, step == len(values) - 1)
            for sid, values in sequences.items()
            if step < len(values)
        ]


def x_input(module, value):
    tensor = module.InferInput("x", [1, 1], "INT32")
    tensor.set_data_from_numpy(np.array([[value]], dtype=np.int32))
    return tensor


def sync_run(client, module, model, sequences):
    """Blocking infer() calls, the sequences taking turns request by request."""
    totals = {}
    for step in steps(sequences):
        for sid, value, start, end in step:
            result = client.infer(
                model, [x_input(module, value)],
                sequence_id=sid, sequence_start=start, sequence_end=end,
            )
            totals.setdefault(str(sid), []).append(int(result.as_numpy("total")[0][0]))
    client.close()
    return totals


def http_sync_run(url, model, sequences):
    return sync_run(httpclient.InferenceServerClient(url), httpclient, model, sequences)


def grpc_sync_run(url, model, sequences):
    return sync_run(grpcclient.InferenceServerClient(url), grpcclient, model, sequences)


def http_run(url, model, sequences):
    client = httpclient.InferenceServerClient(url, concurrency=len(sequences))
    totals = {}
    for step in steps(sequences):
        pending = [
            (sid, client.async_infer(
                model, [x_input(httpclient, value)],
                sequence_id=sid, sequence_start=start, sequence_end=end,
            ))
            for sid, value, start, end in step
        ]
        for sid, request in pending:
            totals.setdefault(str(sid), []).append(
                int(request.get_result().as_numpy("total")[0][0]))
    client.close()
    return totals


def grpc_run(url, model, sequences):
    client = grpcclient.InferenceServerClient(url)
    totals = {}
    for step in steps(sequences):
        answers = queue.Queue()
        for sid, value, start, end in step:
            client.async_infer(
                model, [x_input(grpcclient, value)],
                callback=lambda result, error, sid=sid: answers.put((sid, result, error)),
                sequence_id=sid, sequence_start=start, sequence_end=end,
            )
        got = {}
        for _ in step:
            sid, result, error = answers.get(timeout=60)
            if error is not None:
                raise error
            got[sid] = int(result.as_numpy("total")[0][0])
        for sid, _, _, _ in step:
            totals.setdefault(str(sid), []).append(got[sid])
    client.close()
    return totals


def grpc_stream_run(url, model, sequences):
    client = grpcclient.InferenceServerClient(url)
    answers = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    totals = {}
    for number, step in enumerate(steps(sequences)):
        for sid, value, start, end in step:
            client.async_stream_infer(
                model, [x_input(grpcclient, value)], request_id=f"{sid}/{number}",
                sequence_id=sid, sequence_start=start, sequence_end=end,
            )
        got = {}
        for _ in step:
            result, error = answers.get(timeout=60)
            if error is not None:
                raise error
            sid = result.get_response().id.split("/")[0]
            got[sid] = int(result.as_numpy("total")[0][0])
        for sid, _, _, _ in step:
            totals.setdefault(str(sid), []).append(got[str(sid)])
    client.stop_stream()
    client.close()
    return totals


def continue_unknown(client, module):
    """A request that continues a sequence that never started: the error's status and text."""
    try:
        client.infer("Accumulator", [x_input(module, 1)], sequence_id=4242)
    except InferenceServerException as error:
        return [str(error.status()), error.message()]
    return ["no error", ""]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", required=True)
    parser.add_argument("--grpc", required=True)
    args = parser.parse_args()
    out = {}
    for name, run, url in (
        ("http", http_run, args.http),
        ("http_sync", http_sync_run, args.http),
        ("grpc", grpc_run, args.grpc),
        ("grpc_sync", grpc_sync_run, args.grpc),
        ("grpc_stream", grpc_stream_run, args.grpc),
    ):
        out[name] = run(url, "Accumulator", INTEGER_SEQUENCES)
        out[name + "_strings"] = run(url, "AccumulatorS", STRING_SEQUENCES)
    out["http_unknown"] = continue_unknown(httpclient.InferenceServerClient(args.http), httpclient)
    out["grpc_unknown"] = continue_unknown(grpcclient.InferenceServerClient(args.grpc), grpcclient)
    config = grpcclient.InferenceServerClient(args.grpc).get_model_config("Accumulator", as_json=True)
    out["grpc_config"] = config["config"]["sequence_batching"]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
