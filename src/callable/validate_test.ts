import assert from "node:assert/strict";
import { type ModelConfig, resolveModelConfig } from "../config/model_config.ts";
import { resolveTensorSpecs, type TensorSpec } from "../config/tensor_spec.ts";
import { InferenceError } from "../errors.ts";
import { DeviceTensor } from "../tensor/device_tensor.ts";
import { type NDArray, ndarray } from "../tensor/ndarray.ts";
import { inferRequest } from "./request.ts";
import type { InferRequest } from "./types.ts";
import { validateResults } from "./validate.ts";
import type { ModelInfo } from "../config/model_info.ts";

function model(
  options: { strict?: boolean; config?: ModelConfig; outputs?: TensorSpec[] } = {},
): ModelInfo {
  return {
    name: "m",
    version: 1,
    strict: options.strict ?? false,
    inputs: resolveTensorSpecs([{ name: "x", dtype: "float32", shape: [-1] }], "input"),
    outputs: resolveTensorSpecs(
      options.outputs ?? [
        { name: "y", dtype: "float32", shape: [-1] },
        { name: "z", dtype: "bytes", shape: [1] },
      ],
      "output",
    ),
    config: resolveModelConfig(options.config ?? { maxBatchSize: 4 }),
  };
}

function request(rows = 1, requested = ["y", "z"]): InferRequest {
  return {
    data: { x: ndarray(new Float32Array(rows * 2), [rows, 2]) },
    parameters: {},
    requestedOutputNames: requested,
    signal: new AbortController().signal,
  };
}

function rejects(fn: () => unknown, message: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof InferenceError);
    assert.equal(error.code, "INTERNAL");
    assert.match(error.message, /^Invalid output of model 'm': /);
    assert.match(error.message, message);
    return true;
  });
}

const y = (rows = 1): NDArray => ndarray(new Float32Array(rows * 2), [rows, 2]);

Deno.test("validateResults() needs an array with one plain object per request", () => {
  rejects(
    () => validateResults({ y: y() }, [request()], model()),
    /returned Object, expected an array/,
  );
  rejects(() => validateResults([], [request()], model()), /returned 0 results for 1 requests/);
  rejects(() => validateResults([null], [request()], model()), /result 0 is null/);
  rejects(() => validateResults([new Map()], [request()], model()), /result 0 is Map/);
  rejects(
    () => validateResults([{ y: [1, 2] }], [request()], model()),
    /output 'y' of request 0 is an array of length 2, expected an NDArray/,
  );
});

Deno.test("validateResults() checks tensors for consistency", () => {
  rejects(
    () =>
      validateResults([{ y: { dtype: "float32", shape: [1, 3], data: new Float32Array(2) } }], [
        request(),
      ], model()),
    /output 'y' has shape \[1,3\] \(3 elements\) but 2 data elements/,
  );
  rejects(
    () =>
      validateResults([{ y: { dtype: "float32", shape: [1, 2], data: new Float64Array(2) } }], [
        request(),
      ], model()),
    /dtype float32 but its data is a Float64Array/,
  );
  rejects(
    () =>
      validateResults([{ y: { dtype: "complex", shape: [1], data: new Float64Array(1) } }], [
        request(),
      ], model()),
    /unknown dtype "complex"/,
  );
});

Deno.test("validateResults() wants Uint8Array elements in bytes outputs", () => {
  rejects(
    () =>
      validateResults(
        [{ z: { dtype: "bytes", shape: [1, 1], data: ["text"] } }],
        [request()],
        model(),
      ),
    /output 'z' holds a string at element 0; bytes outputs must hold Uint8Array elements .*ndarray\(\)/,
  );
  const [ok] = validateResults([{ z: ndarray(["text"], [1, 1]) }], [request()], model());
  assert.equal(ok!.z!.dtype, "bytes");
});

Deno.test("validateResults() checks axis 0 against each request's batch size", () => {
  rejects(
    () => validateResults([{ y: y(2) }], [request(1)], model()),
    /output 'y' has batch size 2 \(axis 0 of shape \[2,2\]\) but request 0 has batch size 1/,
  );
  rejects(
    () => validateResults([{ y: ndarray(new Float32Array([1]), []) }], [request()], model()),
    /output 'y' is a scalar but the model batches/,
  );
  const results = validateResults([{ y: y(1) }, { y: y(3) }], [request(1), request(3)], model());
  assert.deepEqual(results.map((r) => r.y!.shape[0]), [1, 3]);
});

Deno.test("validateResults() without strict drops, converts and tolerates missing outputs", () => {
  const [result] = validateResults(
    [{ y: ndarray(new Int32Array([1, 2]), [1, 2]), extra: y() }],
    [request(1, ["y"])],
    model(),
  );
  assert.deepEqual(Object.keys(result!), ["y"]);
  assert.equal(result!.y!.dtype, "float32");
  assert.deepEqual([...((result!.y as NDArray).data as Float32Array)], [1, 2]);
  const [unrequested] = validateResults([{ y: y(), z: ndarray(["a"], [1, 1]) }], [
    request(1, ["z"]),
  ], model());
  assert.deepEqual(Object.keys(unrequested!), ["z"]);
  const [empty] = validateResults([{}], [request()], model());
  assert.deepEqual(empty, {});
  rejects(
    () => validateResults([{ z: ndarray(new Float32Array([1]), [1, 1]) }], [request()], model()),
    /output 'z' has dtype float32, expected bytes/,
  );
});

Deno.test("validateResults() converts between numeric dtypes like numpy's astype", () => {
  const outputs: TensorSpec[] = [
    { name: "i", dtype: "int64", shape: [-1] },
    { name: "b", dtype: "bool", shape: [-1] },
    { name: "h", dtype: "bfloat16", shape: [-1] },
  ];
  const [result] = validateResults(
    [{
      i: ndarray(new Float64Array([1.7, -2.5]), [1, 2]),
      b: ndarray(new Float32Array([0, 3]), [1, 2]),
      h: ndarray(new Float32Array([1, -2]), [1, 2]),
    }],
    [request(1, ["i", "b", "h"])],
    model({ outputs }),
  );
  assert.deepEqual([...((result!.i as NDArray).data as BigInt64Array)], [1n, -2n]);
  assert.deepEqual([...((result!.b as NDArray).data as Uint8Array)], [0, 1]);
  assert.deepEqual([...((result!.h as NDArray).data as Uint16Array)], [0x3f80, 0xc000]);
  rejects(
    () =>
      validateResults(
        [{ i: ndarray(new Float32Array([NaN]), [1, 1]) }],
        [request(1, ["i"])],
        model({ outputs }),
      ),
    /output 'i' holds NaN/,
  );
});

Deno.test("validateResults() with strict checks names, dtypes and shapes", () => {
  const strict = model({
    strict: true,
    outputs: [{ name: "y", dtype: "float32", shape: [-1, 3] }],
  });
  const ok = ndarray(new Float32Array(6), [1, 2, 3]);
  assert.equal(validateResults([{ y: ok }], [request(1, ["y"])], strict)[0]!.y, ok);
  rejects(
    () => validateResults([{ w: ok }], [request(1, ["y"])], strict),
    /output 'w' is not declared \(declared outputs: y\)/,
  );
  rejects(
    () =>
      validateResults(
        [{ y: ndarray(new Float64Array(6), [1, 2, 3]) }],
        [request(1, ["y"])],
        strict,
      ),
    /output 'y' has dtype float64, expected float32/,
  );
  rejects(
    () =>
      validateResults(
        [{ y: ndarray(new Float32Array(4), [1, 2, 2]) }],
        [request(1, ["y"])],
        strict,
      ),
    /output 'y' has shape \[1,2,2\], expected \[-1,-1,3\]/,
  );
  rejects(
    () =>
      validateResults([{ y: ndarray(new Float32Array(3), [1, 3]) }], [request(1, ["y"])], strict),
    /output 'y' has shape \[1,3\], expected \[-1,-1,3\]/,
  );
});

Deno.test("validateResults() with strict and no batching checks the full shape", () => {
  const strict = model({
    strict: true,
    config: { batching: false },
    outputs: [{ name: "y", dtype: "float32", shape: [2] }],
  });
  const noBatch: InferRequest = { ...request(), data: {} };
  validateResults([{ y: ndarray(new Float32Array(2), [2]) }], [noBatch], strict);
  rejects(
    () => validateResults([{ y: ndarray(new Float32Array(2), [1, 2]) }], [noBatch], strict),
    /output 'y' has shape \[1,2\], expected \[2\]/,
  );
});

Deno.test("validateResults() reads a request given back as its result through its data", () => {
  const outputs: TensorSpec[] = [{ name: "x", dtype: "float32", shape: [-1] }];
  const echo = inferRequest({ x: y(2) }, { requestedOutputNames: ["x"] });
  const [result] = validateResults([echo], [echo], model({ outputs }));
  assert.deepEqual(Object.keys(result!), ["x"]);
  assert.equal(result!.x, echo.data.x);
  // Without strict, inputs that are not outputs are dropped; with strict they are refused.
  const extra = inferRequest({ x: y(2), w: y(2) }, { requestedOutputNames: ["x"] });
  assert.deepEqual(Object.keys(validateResults([extra], [extra], model({ outputs }))[0]!), ["x"]);
  rejects(
    () => validateResults([extra], [extra], model({ outputs, strict: true })),
    /output 'w' is not declared \(declared outputs: x\)/,
  );
  // Outputs by name are not mistaken for a request: a "data" output is a tensor, not an object.
  rejects(
    () => validateResults([{ data: { x: y() } }], [request()], model()),
    /output 'data' of request 0 is Object, expected an NDArray/,
  );
});

Deno.test("validateResults() takes a DeviceTensor only for a deviceTensor spec of its dtype", () => {
  const onDevice = (dtype: "float32" | "int32") =>
    new DeviceTensor({ dtype, shape: [1, 2], pointer: 4096n, device: 0 });
  const device = model({
    outputs: [{ name: "y", dtype: "float32", shape: [-1], deviceTensor: true }],
  });
  const y = onDevice("float32");
  // Passed on as it is: nothing copies or converts a device tensor.
  const [result] = validateResults([{ y }], [request(1, ["y"])], device);
  assert.equal(result!.y, y);
  rejects(
    () => validateResults([{ y: onDevice("int32") }], [request(1, ["y"])], device),
    /output 'y'.*int32.*float32|float32.*int32/,
  );
  rejects(
    () => validateResults([{ y, z: ndarray(["a"], [1, 1]) }], [request(1, ["y"])], model()),
    /output 'y' of request 0 is a DeviceTensor, but the model does not declare it with deviceTensor: true/,
  );
});

Deno.test("resolveTensorSpecs() refuses a BYTES device tensor and a non-boolean deviceTensor", () => {
  assert.throws(
    () =>
      resolveTensorSpecs([{ name: "s", dtype: "bytes", shape: [1], deviceTensor: true }], "input"),
    /Invalid input 's': a BYTES tensor cannot be a device tensor/,
  );
  assert.throws(
    () =>
      resolveTensorSpecs(
        [{ name: "x", dtype: "float32", shape: [1], deviceTensor: "yes" as unknown as boolean }],
        "output",
      ),
    /Invalid output 'x': deviceTensor must be a boolean/,
  );
  assert.deepEqual(
    resolveTensorSpecs([{ name: "x", dtype: "float32", shape: [1], deviceTensor: true }], "input"),
    [{ name: "x", dtype: "float32", shape: [1], optional: false, deviceTensor: true }],
  );
});
