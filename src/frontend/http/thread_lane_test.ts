import assert from "node:assert/strict";
import {
  LANE_FAILED,
  LANE_INFER,
  LANE_INFERRED,
  readAnswer,
  readInferRequest,
  writeInferFailure,
  writeInferRequest,
  writeInferResponse,
} from "./thread_lane.ts";
import { ringBuffer, RingReader, RingWriter } from "../../isolate/ring.ts";
import { hostTensor, type Tensor } from "../../tensor/device_tensor.ts";
import { ndarray } from "../../tensor/ndarray.ts";

/** Every record in the ring, read with `read` while the ring's callback runs. */
function drainWith<T>(
  buffer: SharedArrayBuffer,
  read: (kind: number, payload: Uint8Array) => T,
): T[] {
  const out: T[] = [];
  new RingReader(buffer).drain((kind, payload) => out.push(read(kind, payload)));
  return out;
}

Deno.test("a request's fields and inputs cross the lane, numeric views and BYTES alike", () => {
  const buffer = ringBuffer(4096);
  // A view into a larger body, at an odd offset: its bytes alone cross.
  const body = new Uint8Array(64);
  const a = new Int16Array(body.buffer, 6, 3);
  a.set([-1, 2, 300]);
  // Every field a request may send besides its inputs.
  const fields = {
    modelName: "m",
    modelVersion: 2,
    id: "r1",
    outputs: ["y"],
    parameters: { p: "é", q: 1.5, r: true },
    priority: 2,
    timeoutMicroseconds: 1000,
  };
  const request = {
    ...fields,
    inputs: new Map<string, Tensor>([
      ["a", ndarray(a, [1, 3])],
      ["s", ndarray([new Uint8Array([104, 105]), new Uint8Array(0)], [1, 2])],
    ]),
  };
  assert.ok(
    writeInferRequest(new RingWriter(buffer), 9, { modelName: "m", modelVersion: 2 }, request),
  );
  const signal = new AbortController().signal;
  const [read] = drainWith(buffer, (kind, payload) => {
    assert.equal(kind, LANE_INFER);
    return readInferRequest(payload, signal);
  });
  const { inputs, ...rest } = read!.request;
  assert.deepEqual([read!.id, read!.model], [9, { modelName: "m", modelVersion: 2 }]);
  assert.deepEqual(rest, { ...fields, signal });
  const got = hostTensor(inputs.get("a")!, "a");
  assert.deepEqual([got.dtype, got.shape, [...(got.data as Int16Array)]], ["int16", [1, 3], [
    -1,
    2,
    300,
  ]]);
  // Its own memory, not the ring's.
  assert.ok(!((got.data as Int16Array).buffer instanceof SharedArrayBuffer));
  const s = hostTensor(inputs.get("s")!, "s");
  assert.deepEqual(
    [s.dtype, s.shape, (s.data as Uint8Array[]).map((e) => [...e])],
    ["bytes", [1, 2], [[104, 105], []]],
  );
});

Deno.test("answers cross the lane: a response's outputs and parameters, and a failure", () => {
  const buffer = ringBuffer(4096);
  const writer = new RingWriter(buffer);
  const y = new Float64Array([0.5, -2]);
  assert.ok(writeInferResponse(writer, 3, {
    modelName: "m",
    modelVersion: "1",
    id: "r1",
    parameters: { triton_final_response: true },
    outputs: new Map([["y", ndarray(y, [2])]]),
  }, true));
  assert.ok(
    writeInferFailure(writer, 4, { name: "InferenceError", message: "no", code: "NOT_FOUND" }),
  );
  const [first, second] = drainWith(
    buffer,
    (kind, payload) => [kind, readAnswer(payload)] as const,
  );
  assert.equal(first![0], LANE_INFERRED);
  const answer = first![1] as Extract<ReturnType<typeof readAnswer>, { response: unknown }>;
  const { outputs, ...rest } = answer.response;
  assert.deepEqual([answer.id, answer.batching, rest], [3, true, {
    modelName: "m",
    modelVersion: "1",
    id: "r1",
    parameters: { triton_final_response: true },
  }]);
  assert.deepEqual([...(hostTensor(outputs.get("y")!, "y").data as Float64Array)], [0.5, -2]);
  // The engine's own output is untouched.
  assert.deepEqual([...y], [0.5, -2]);
  assert.deepEqual(second, [LANE_FAILED, {
    id: 4,
    error: { name: "InferenceError", message: "no", code: "NOT_FOUND" },
  }]);
});

Deno.test("what the lane cannot carry is left for postMessage, and nothing is written", () => {
  const buffer = ringBuffer(1024);
  const writer = new RingWriter(buffer);
  const small = {
    modelName: "m",
    parameters: {},
    inputs: new Map([["x", ndarray(new Float32Array(4), [4])]]),
  };
  // A sequence's correlation ID may be a bigint.
  assert.equal(
    writeInferRequest(writer, 1, { modelName: "m" }, {
      ...small,
      sequence: { id: 2n ** 63n, start: true, end: false },
    }),
    false,
  );
  // Over half the ring.
  const big = { ...small, inputs: new Map([["x", ndarray(new Float32Array(200), [200])]]) };
  assert.equal(writeInferRequest(writer, 2, { modelName: "m" }, big), false);
  // A ring the reader has not emptied: two records of 376 bytes fit, a third does not.
  const medium = { ...small, inputs: new Map([["x", ndarray(new Float32Array(70), [70])]]) };
  assert.ok(writeInferRequest(writer, 3, { modelName: "m" }, medium));
  assert.ok(writeInferRequest(writer, 4, { modelName: "m" }, medium));
  assert.equal(writeInferRequest(writer, 5, { modelName: "m" }, medium), false);
  const signal = new AbortController().signal;
  assert.deepEqual(drainWith(buffer, (_, payload) => readInferRequest(payload, signal).id), [3, 4]);
});
