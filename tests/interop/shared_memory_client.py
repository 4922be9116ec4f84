"""System shared memory with the official Python client (tritonclient.utils.shared_memory).

Drives one server over HTTP or gRPC: register/status/unregister, AddSub with inputs and outputs
in regions (all in regions, and mixed with request tensors), a model that writes into its input
(proof that the callable sees the region itself), the bad-input cases with Triton's status
and message, and a region the client shrinks after registering it (refused, not a SIGBUS). Prints `PASS name` / `FAIL name: reason` per scenario and a summary line.

Usage: shared_memory_client.py --protocol http|grpc --url host:port --http-url host:port --tag T
"""

import argparse
import sys
import traceback

import numpy as np
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

parser = argparse.ArgumentParser()
parser.add_argument("--protocol", choices=["http", "grpc"], required=True)
parser.add_argument("--url", required=True)
parser.add_argument("--tag", required=True, help="makes the shm keys unique per run")
args = parser.parse_args()

if args.protocol == "http":
    import tritonclient.http as client_module
else:
    import tritonclient.grpc as client_module

client = client_module.InferenceServerClient(args.url)
results = []
handles = []


def key(name):
    return f"/dt_{args.tag}_{name}"


def region(name, byte_size):
    handle = shm.create_shared_memory_region(name, key(name), byte_size)
    handles.append(handle)
    return handle


def scenario(fn):
    try:
        fn()
        results.append((fn.__name__, True, ""))
        print(f"PASS {fn.__name__}", flush=True)
    except Exception as error:  # noqa: BLE001 - every failure is reported
        detail = f"{type(error).__name__}: {error}"
        results.append((fn.__name__, False, detail))
        print(f"FAIL {fn.__name__}: {detail}", flush=True)
        for line in traceback.format_exc().splitlines():
            print(f"    {line}", flush=True)


def expect_error(call, status, message):
    try:
        call()
    except InferenceServerException as error:
        got_status = str(error.status())
        if message not in error.message():
            raise AssertionError(f"expected message {message!r}, got {error.message()!r}")
        if status not in got_status:
            raise AssertionError(f"expected status {status!r}, got {got_status!r}")
        return
    raise AssertionError(f"expected an error with {message!r}, the call succeeded")


# HTTP statuses and gRPC codes, as the two clients report them.
HTTP = args.protocol == "http"
BAD = "400" if HTTP else "StatusCode.INVALID_ARGUMENT"
NOT_FOUND = "404" if HTTP else "StatusCode.NOT_FOUND"
INTERNAL = "500" if HTTP else "StatusCode.INTERNAL"
EXISTS = "400" if HTTP else "StatusCode.ALREADY_EXISTS"

A = np.arange(16, dtype=np.float32).reshape(1, 16)
B = np.full((1, 16), 2.0, dtype=np.float32)
SIZE = A.nbytes


def infer_input(name, shape):
    return client_module.InferInput(name, shape, "FP32")


def requested(name):
    if HTTP:
        return client_module.InferRequestedOutput(name, binary_data=True)
    return client_module.InferRequestedOutput(name)


def status_names():
    status = client.get_system_shared_memory_status()
    if HTTP:
        return sorted(entry["name"] for entry in status)
    return sorted(status.regions.keys())


def register_status_unregister():
    handle = region("reg", 64)
    client.register_system_shared_memory("reg", key("reg"), 64)
    assert status_names() == ["reg"], status_names()
    one = client.get_system_shared_memory_status("reg")
    if HTTP:
        assert one == [{"name": "reg", "key": key("reg"), "offset": 0, "byte_size": 64}], one
    else:
        entry = one.regions["reg"]
        assert (entry.name, entry.key, entry.offset, entry.byte_size) == ("reg", key("reg"), 0, 64)
    client.unregister_system_shared_memory("reg")
    assert status_names() == [], status_names()
    shm.destroy_shared_memory_region(handle)
    handles.remove(handle)


def add_sub_all_in_regions():
    inputs_handle = region("in", 2 * SIZE)
    outputs_handle = region("out", 2 * SIZE)
    shm.set_shared_memory_region(inputs_handle, [A, B])
    client.register_system_shared_memory("in", key("in"), 2 * SIZE)
    client.register_system_shared_memory("out", key("out"), 2 * SIZE)
    try:
        a, b = infer_input("a", [1, 16]), infer_input("b", [1, 16])
        a.set_shared_memory("in", SIZE)
        b.set_shared_memory("in", SIZE, offset=SIZE)
        add, sub = requested("add"), requested("sub")
        add.set_shared_memory("out", SIZE)
        sub.set_shared_memory("out", SIZE, offset=SIZE)
        result = client.infer("AddSub", [a, b], outputs=[add, sub])
        output = result.get_output("add")
        assert output is not None, "no 'add' in the response"
        shape = list(output["shape"] if HTTP else output.shape)
        assert shape == [1, 16], shape
        got_add = shm.get_contents_as_numpy(outputs_handle, np.float32, [1, 16])
        got_sub = shm.get_contents_as_numpy(outputs_handle, np.float32, [1, 16], offset=SIZE)
        np.testing.assert_array_equal(got_add, A + B)
        np.testing.assert_array_equal(got_sub, A - B)
        # The response carries no bytes for outputs in shared memory.
        if HTTP:
            assert "data" not in output and "binary_data_size" not in output.get(
                "parameters", {}
            ), output
        else:
            raw = result.get_response().raw_output_contents
            assert all(len(entry) == 0 for entry in raw), [len(entry) for entry in raw]
    finally:
        client.unregister_system_shared_memory()


def add_sub_mixed():
    inputs_handle = region("min", SIZE)
    outputs_handle = region("mout", SIZE)
    shm.set_shared_memory_region(inputs_handle, [A])
    client.register_system_shared_memory("min", key("min"), SIZE)
    client.register_system_shared_memory("mout", key("mout"), SIZE)
    try:
        a, b = infer_input("a", [1, 16]), infer_input("b", [1, 16])
        a.set_shared_memory("min", SIZE)
        b.set_data_from_numpy(B)
        add, sub = requested("add"), requested("sub")
        add.set_shared_memory("mout", SIZE)
        result = client.infer("AddSub", [a, b], outputs=[add, sub])
        np.testing.assert_array_equal(result.as_numpy("sub"), A - B)
        got_add = shm.get_contents_as_numpy(outputs_handle, np.float32, [1, 16])
        np.testing.assert_array_equal(got_add, A + B)
    finally:
        client.unregister_system_shared_memory()


def callable_sees_the_region():
    # Scribble writes 42 into INPUT[0] and answers its old value: the client sees the 42 in
    # its own region only if the callable got a view of it, not a copy. ScribbleWorker runs the
    # same callable in a Worker.
    for model in ["Scribble", "ScribbleWorker"]:
        handle = region(f"scribble_{model}", 16)
        shm.set_shared_memory_region(handle, [np.array([[7, 1, 2, 3]], dtype=np.float32)])
        client.register_system_shared_memory("scribble", key(f"scribble_{model}"), 16)
        try:
            x = infer_input("INPUT", [1, 4])
            x.set_shared_memory("scribble", 16)
            result = client.infer(model, [x], outputs=[requested("OUTPUT")])
            np.testing.assert_array_equal(result.as_numpy("OUTPUT").ravel(), [7.0])
            after = shm.get_contents_as_numpy(handle, np.float32, [1, 4])
            assert after.ravel().tolist() == [42, 1, 2, 3], f"{model}: {after}"
        finally:
            client.unregister_system_shared_memory()


def bad_inputs():
    handle = region("bad", SIZE)
    shm.set_shared_memory_region(handle, [A])
    expect_error(
        lambda: client.register_system_shared_memory("nokey", key("never_created"), 16),
        BAD,
        f"Unable to open shared memory region: '{key('never_created')}'",
    )
    expect_error(
        lambda: client.register_system_shared_memory("slash", "/dt_dir/inside", 16),
        BAD,
        "Unable to open shared memory region: '/dt_dir/inside'",
    )
    expect_error(
        lambda: client.register_system_shared_memory("escape", "/../../etc/passwd", 16),
        BAD,
        "Unable to open shared memory region: '/../../etc/passwd'",
    )
    expect_error(
        lambda: client.register_system_shared_memory("big", key("bad"), SIZE + 1),
        BAD,
        "failed to register shared memory region 'big': invalid args",
    )
    expect_error(
        lambda: client.register_system_shared_memory("far", key("bad"), 8, offset=SIZE - 4),
        BAD,
        "failed to register shared memory region 'far': invalid args",
    )
    # One rule on both front ends: offsets and sizes are non-negative safe integers.
    expect_error(
        lambda: client.register_system_shared_memory("huge", key("bad"), 16, offset=2**64 - 1),
        BAD,
        "Unable to parse 'offset' of the shared memory register request: "
        "expected a non-negative integer",
    )
    expect_error(
        lambda: client.register_system_shared_memory("huge", key("bad"), 2**63),
        BAD,
        "Unable to parse 'byte_size' of the shared memory register request: "
        "expected a non-negative integer",
    )
    client.register_system_shared_memory("bad", key("bad"), SIZE)
    try:
        expect_error(
            lambda: client.register_system_shared_memory("bad", key("bad"), SIZE),
            EXISTS,
            "shared memory region 'bad' already in manager",
        )
        b = infer_input("b", [1, 16])
        b.set_data_from_numpy(B)

        def infer_a(region_name, byte_size, offset=0, outputs=None):
            a = infer_input("a", [1, 16])
            a.set_shared_memory(region_name, byte_size, offset=offset)
            return client.infer("AddSub", [a, b], outputs=outputs)

        expect_error(
            lambda: infer_a("unregistered", SIZE),
            NOT_FOUND,
            "Unable to find shared memory region: 'unregistered'",
        )
        expect_error(
            lambda: infer_a("bad", SIZE, offset=8),
            BAD,
            "Invalid offset + byte size for shared memory region: 'bad'",
        )
        expect_error(
            lambda: infer_a("bad", 8, offset=SIZE),
            BAD,
            "Invalid offset for shared memory region: 'bad'",
        )
        expect_error(lambda: infer_a("bad", SIZE - 4), BAD, "input 'a'")
        small = requested("add")
        small.set_shared_memory("bad", 8)
        expect_error(
            lambda: infer_a("bad", SIZE, outputs=[small]),
            INTERNAL,
            "shared memory size specified with the request for output 'add' (8 bytes) "
            "should be at least 64 bytes to hold the results",
        )
        expect_error(
            lambda: client.get_system_shared_memory_status("unknown"),
            NOT_FOUND,
            "Unable to find system shared memory region: 'unknown'",
        )
        # The server keeps serving: a good request after the bad ones.
        result = infer_a("bad", SIZE, outputs=[requested("add")])
        np.testing.assert_array_equal(result.as_numpy("add"), A + B)
    finally:
        client.unregister_system_shared_memory()


def shrunk_region_refused():
    # The client truncates its object after registering it: the server's mapping then has no
    # pages behind it, and reading them would raise SIGBUS in the server. It refuses the region
    # instead, and serves the next request.
    handle = region("shrunk", SIZE)
    shm.set_shared_memory_region(handle, [A])
    client.register_system_shared_memory("shrunk", key("shrunk"), SIZE)
    try:
        with open(f"/dev/shm{key('shrunk')}", "r+b") as shrinking:
            shrinking.truncate(0)
        a, b = infer_input("a", [1, 16]), infer_input("b", [1, 16])
        a.set_shared_memory("shrunk", SIZE)
        b.set_data_from_numpy(B)
        expect_error(
            lambda: client.infer("AddSub", [a, b]),
            BAD,
            f"Invalid shared memory region: 'shrunk': '{key('shrunk')}' shrank below offset 0 "
            f"+ byte_size {SIZE} since it was registered",
        )
        a.set_data_from_numpy(A)
        result = client.infer("AddSub", [a, b], outputs=[requested("add")])
        np.testing.assert_array_equal(result.as_numpy("add"), A + B)
    finally:
        client.unregister_system_shared_memory()


for test in [
    register_status_unregister,
    add_sub_all_in_regions,
    add_sub_mixed,
    callable_sees_the_region,
    bad_inputs,
    shrunk_region_refused,
]:
    scenario(test)

for handle in handles:
    try:
        shm.destroy_shared_memory_region(handle)
    except Exception:  # noqa: BLE001 - cleanup
        pass

passed = sum(1 for _, ok, _ in results if ok)
failed = len(results) - passed
print(f"interop shm {args.protocol}: {passed} passed, {failed} failed", flush=True)
sys.exit(0 if failed == 0 else 1)
