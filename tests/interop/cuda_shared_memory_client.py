"""CUDA shared memory with the official Python client (tritonclient.utils.cuda_shared_memory).

Drives one server of tests/_gpu/cuda_shm_server.ts over HTTP or gRPC, on a GPU host:
register/status/unregister, Double (a host callable) and Identity (a deviceTensor callable on
the GPU) with inputs and outputs in CUDA regions, a handle the driver refuses, and (--elements
N) an Identity round trip of FP32[N] between two CUDA regions with the server's copy counts
around it (the CopyCounts model: DenoTriton's counters of copies through the CUDA driver), which
must show no host copy. Prints `PASS name` / `FAIL name: reason` per scenario, `COPIES ...` and
`FIGURE ...` lines, and a summary line.

Usage: cuda_shared_memory_client.py --protocol http|grpc --url host:port --tag T
       [--elements 16777216] [--device 0]
"""

import argparse
import base64
import json
import sys
import time
import traceback

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--protocol", choices=["http", "grpc"], required=True)
parser.add_argument("--url", required=True)
parser.add_argument("--tag", required=True, help="makes the region names unique per run")
parser.add_argument("--elements", type=int, default=16 * 1024 * 1024)
parser.add_argument("--device", type=int, default=0)
args = parser.parse_args()

try:
    import tritonclient.utils.cuda_shared_memory as cudashm
    from tritonclient.utils import InferenceServerException
except Exception as error:  # noqa: BLE001 - any import failure is reported the same way
    # tritonclient 2.51's module imports `cuda.cudart` and `cuda.cuda` (cuda-python; cuda-bindings
    # 12.x still ships them) and `pkg_resources` (setuptools): name what is missing.
    print(f"FAIL import: tritonclient.utils.cuda_shared_memory: {type(error).__name__}: {error}")
    print(f"cuda shm {args.protocol}: 0 passed, 1 failed")
    sys.exit(2)

if args.protocol == "http":
    import tritonclient.http as client_module
else:
    import tritonclient.grpc as client_module

client = client_module.InferenceServerClient(args.url)
results = []
regions = []


def region(name, byte_size):
    handle = cudashm.create_shared_memory_region(f"{args.tag}_{name}", byte_size, args.device)
    regions.append(handle)
    return handle


def register(name, handle, byte_size):
    client.register_cuda_shared_memory(
        f"{args.tag}_{name}", cudashm.get_raw_handle(handle), args.device, byte_size
    )


def infer(model, input_name, output_name, elements):
    x = client_module.InferInput("x", [elements], "FP32")
    x.set_shared_memory(f"{args.tag}_{input_name}", elements * 4)
    y = client_module.InferRequestedOutput("y")
    y.set_shared_memory(f"{args.tag}_{output_name}", elements * 4)
    return client.infer(model, [x], outputs=[y])


def copy_counts():
    x = client_module.InferInput("x", [1], "INT32")
    x.set_data_from_numpy(np.zeros([1], dtype=np.int32))
    answer = client.infer("CopyCounts", [x])
    return json.loads(answer.as_numpy("counts")[0])


def delta(before, after):
    return {
        way: {k: after[way][k] - before[way][k] for k in ("calls", "bytes")}
        for way in ("hostToDevice", "deviceToHost", "deviceToDevice")
    }


def scenario(fn):
    try:
        fn()
        results.append(True)
        print(f"PASS {fn.__name__}")
    except Exception as error:  # noqa: BLE001 - every failure is reported
        results.append(False)
        detail = "".join(traceback.format_exception_only(type(error), error)).strip()
        print(f"FAIL {fn.__name__}: {detail}")
        traceback.print_exc(file=sys.stderr)
    sys.stdout.flush()


def register_status_unregister():
    handle = region("status", 64)
    register("status", handle, 64)
    status = client.get_cuda_shared_memory_status(f"{args.tag}_status")
    text = json.dumps(status) if args.protocol == "http" else str(status)
    assert f"{args.tag}_status" in text and "64" in text, text
    client.unregister_cuda_shared_memory(f"{args.tag}_status")
    try:
        client.get_cuda_shared_memory_status(f"{args.tag}_status")
        raise AssertionError("the region is still listed after unregister")
    except InferenceServerException as error:
        assert "Unable to find cuda shared memory region" in str(error), str(error)


def double_round_trip():
    values = np.arange(16, dtype=np.float32)
    x, y = region("dx", 64), region("dy", 64)
    cudashm.set_shared_memory_region(x, [values])
    register("dx", x, 64)
    register("dy", y, 64)
    before = copy_counts()
    infer("Double", "dx", "dy", 16)
    copies = delta(before, copy_counts())
    got = cudashm.get_contents_as_numpy(y, np.float32, [16])
    np.testing.assert_array_equal(got, values * 2)
    print(f"COPIES Double fp32[16] {args.protocol}: {json.dumps(copies)}")
    assert copies["deviceToHost"]["calls"] == 1 and copies["hostToDevice"]["calls"] == 1, copies


def identity_round_trip():
    values = np.linspace(-1, 1, 16, dtype=np.float32)
    x, y = region("ix", 64), region("iy", 64)
    cudashm.set_shared_memory_region(x, [values])
    register("ix", x, 64)
    register("iy", y, 64)
    infer("Identity", "ix", "iy", 16)
    np.testing.assert_array_equal(cudashm.get_contents_as_numpy(y, np.float32, [16]), values)
    got = copy_counts()["identityGot"]
    assert got == f"DeviceTensor float32 [16] cuda:{args.device}", got


def bad_handle():
    try:
        client.register_cuda_shared_memory(
            f"{args.tag}_bad", base64.b64encode(bytes(64)), args.device, 64
        )
        raise AssertionError("a handle of zeros was registered")
    except InferenceServerException as error:
        assert "failed to register shared memory region" in str(error), str(error)
        print(f"FIGURE bad handle {args.protocol}: {error}")


def identity_large():
    n = args.elements
    size = n * 4
    values = np.random.default_rng(7).standard_normal(n, dtype=np.float32)
    x, y = region("lx", size), region("ly", size)
    cudashm.set_shared_memory_region(x, [values])
    register("lx", x, size)
    register("ly", y, size)
    infer("Identity", "lx", "ly", n)  # warm-up
    before = copy_counts()
    started = time.perf_counter()
    infer("Identity", "lx", "ly", n)
    elapsed = time.perf_counter() - started
    copies = delta(before, copy_counts())
    got = cudashm.get_contents_as_numpy(y, np.float32, [n])
    np.testing.assert_array_equal(got, values)
    print(f"COPIES Identity fp32[{n}] {args.protocol}: {json.dumps(copies)}")
    print(f"FIGURE Identity fp32[{n}] {args.protocol}: {elapsed * 1000:.2f} ms per request")
    host = copies["hostToDevice"]["calls"] + copies["deviceToHost"]["calls"]
    assert host == 0, f"{host} host copies"
    assert copies["deviceToDevice"] == {"calls": 1, "bytes": size}, copies


for each in (
    register_status_unregister,
    double_round_trip,
    identity_round_trip,
    bad_handle,
    identity_large,
):
    scenario(each)

try:
    client.unregister_cuda_shared_memory()
finally:
    for handle in regions:
        cudashm.destroy_shared_memory_region(handle)

passed = sum(results)
print(f"cuda shm {args.protocol}: {passed} passed, {len(results) - passed} failed")
sys.exit(0 if passed == len(results) else 1)
