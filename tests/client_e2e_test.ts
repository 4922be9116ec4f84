/**
 * `ModelClient` against the real server (the facade with the built-in engine) over loopback, on
 * both protocols.
 */

import assert from "node:assert/strict";
import { InferenceError, type InferRequest, type InferResult, ndarray, Triton } from "../mod.ts";
import { addSub } from "../examples/add_sub/model.ts";
import { watchdog } from "./_helpers.ts";
import {
  ClientClosedError,
  ClientInferenceServerError,
  ClientModelDoesntSupportBatchingError,
  ClientQueueFullError,
  ClientTimeoutError,
  ClientValueError,
  ModelClient,
  type NDArray,
} from "../src/client/mod.ts";

const PROTOCOLS = ["http", "grpc"] as const;
type Protocol = typeof PROTOCOLS[number];

const DTYPE_VALUES: [NDArray["dtype"], NDArray][] = [
  ["bool", ndarray([true, false, true], [1, 3], { dtype: "bool" })],
  ["int8", ndarray(new Int8Array([-128, 0, 127]), [1, 3])],
  ["int16", ndarray(new Int16Array([-32768, 1, 32767]), [1, 3])],
  ["int32", ndarray(new Int32Array([-2147483648, 2, 2147483647]), [1, 3])],
  ["int64", ndarray(new BigInt64Array([2n ** 53n + 1n, -(2n ** 63n), 2n ** 63n - 1n]), [1, 3])],
  ["uint8", ndarray(new Uint8Array([0, 1, 255]), [1, 3])],
  ["uint16", ndarray(new Uint16Array([0, 1, 65535]), [1, 3])],
  ["uint32", ndarray(new Uint32Array([0, 1, 4294967295]), [1, 3])],
  ["uint64", ndarray(new BigUint64Array([0n, 2n ** 53n + 1n, 2n ** 64n - 1n]), [1, 3])],
  ["float16", ndarray(new Float16Array([1.5, -0.25, 65504]), [1, 3])],
  ["bfloat16", ndarray(new Uint16Array([0x3f80, 0xc000, 0x7f80]), [1, 3], { dtype: "bfloat16" })],
  ["float32", ndarray(new Float32Array([0.1, -1e30, Infinity]), [1, 3])],
  ["float64", ndarray(new Float64Array([0.1, -1e300, Number.MIN_VALUE]), [1, 3])],
  ["bytes", ndarray(["a\0b", "", "\0\xff"], [1, 3])],
];

function asArray(tensor: NDArray | undefined): unknown[] {
  assert.ok(tensor !== undefined);
  return tensor.dtype === "bytes" ? tensor.data.map((e) => [...e]) : [...tensor.data];
}

/** The output of the streaming models. */
type Counts = { i: NDArray<"int32"> };

interface Server extends AsyncDisposable {
  urls: Record<Protocol, string>;
  /** Model "Gated": its calls wait until the gate opens; it counts them. */
  gate: { open(): void; readonly inFlight: number; readonly max: number; readonly calls: number };
}

async function startServer(): Promise<Server> {
  // Slow calls hang until the server is disposed, so stopping never waits long.
  const release = Promise.withResolvers<void>();
  const opened = Promise.withResolvers<void>();
  const gate = { open: () => opened.resolve(), inFlight: 0, max: 0, calls: 0 };
  const gated = async (
    requests: InferRequest<{ x: NDArray<"int32"> }>[],
  ): Promise<InferResult<{ y: NDArray<"int32"> }>[]> => {
    gate.calls++;
    gate.max = Math.max(gate.max, ++gate.inFlight);
    await Promise.race([opened.promise, release.promise]);
    gate.inFlight--;
    return requests.map((request) => ({ y: request.data.x }));
  };
  const triton = new Triton({
    engine: "builtin",
    config: {
      httpPort: 0,
      grpcPort: 0,
      metricsPort: 0,
      httpHeaderForwardPattern: "^(x-custom|triton-access-token)$",
      grpcHeaderForwardPattern: "^(x-custom|triton-grpc-protocol-triton-access-token)$",
    },
  });
  triton.bind({
    modelName: "AddSub",
    inferFunc: addSub,
    inputs: [{ name: "a", dtype: "float32", shape: [-1] }, {
      name: "b",
      dtype: "float32",
      shape: [-1],
    }],
    outputs: [{ name: "add", dtype: "float32", shape: [-1] }, {
      name: "sub",
      dtype: "float32",
      shape: [-1],
    }],
    config: { maxBatchSize: 8 },
  });
  triton.bind({
    modelName: "Identity",
    inferFunc: (requests: InferRequest[]): InferResult[] =>
      requests.map((request) =>
        Object.fromEntries(
          Object.entries(request.data).map(([name, value]) => [name.replace("in_", "out_"), value]),
        )
      ),
    inputs: DTYPE_VALUES.map(([dtype]) => ({
      name: `in_${dtype}`,
      dtype,
      shape: [-1],
      optional: true,
    })),
    outputs: DTYPE_VALUES.map(([dtype]) => ({ name: `out_${dtype}`, dtype, shape: [-1] })),
    config: { maxBatchSize: 4 },
  });
  triton.bind({
    modelName: "Flat",
    inferFunc: (requests) => requests.map((request) => ({ y: request.x })),
    inputs: [{ name: "x", dtype: "int32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "int32", shape: [-1] }],
    config: { batching: false },
  });
  triton.bind({
    modelName: "Params",
    inferFunc: (requests) =>
      requests.map((request) => ({
        params: ndarray([JSON.stringify(request.parameters)], [1, 1]),
      })),
    inputs: [{ name: "x", dtype: "int32", shape: [1] }],
    outputs: [{ name: "params", dtype: "bytes", shape: [1] }],
    config: { maxBatchSize: 4 },
  });
  triton.bind({
    modelName: "Slow",
    inferFunc: async (requests) => {
      await release.promise;
      return requests.map((request) => ({ y: request.x }));
    },
    inputs: [{ name: "x", dtype: "int32", shape: [1] }],
    outputs: [{ name: "y", dtype: "int32", shape: [1] }],
    config: { batching: false },
  });
  triton.bind({
    modelName: "Gated",
    // Four instances: the server would run four calls at once.
    inferFunc: [gated, gated, gated, gated],
    inputs: [{ name: "x", dtype: "int32", shape: [1] }],
    outputs: [{ name: "y", dtype: "int32", shape: [1] }],
    config: { batching: false },
  });
  triton.bind({
    modelName: "Stream",
    inferFunc: async function* (requests): AsyncGenerator<InferResult<Counts>[]> {
      const n = requests[0]?.n.data[0] ?? 0;
      if (n < 0) {
        throw new InferenceError("Negative count: n must be >= 0", { code: "INVALID_ARG" });
      }
      for (let i = 0; i < n; i++) {
        await Promise.resolve();
        yield [{ i: ndarray(new Int32Array([i * 10]), [1]) }];
      }
    },
    inputs: [{ name: "n", dtype: "int32", shape: [1] }],
    outputs: [{ name: "i", dtype: "int32", shape: [1] }],
    config: { batching: false, decoupled: true },
  });
  triton.bind({
    modelName: "SlowStream",
    inferFunc: async function* (): AsyncGenerator<InferResult<Counts>[]> {
      yield [{ i: ndarray(new Int32Array([1]), [1]) }];
      await release.promise;
      yield [{ i: ndarray(new Int32Array([2]), [1]) }];
    },
    inputs: [{ name: "n", dtype: "int32", shape: [1] }],
    outputs: [{ name: "i", dtype: "int32", shape: [1] }],
    config: { batching: false, decoupled: true },
  });
  await triton.run();
  const { http, grpc } = triton.urls;
  assert.ok(http !== undefined && grpc !== undefined);
  return {
    urls: { http, grpc },
    gate,
    async [Symbol.asyncDispose](): Promise<void> {
      release.resolve();
      await triton.stop();
    },
  };
}

for (const protocol of PROTOCOLS) {
  Deno.test(`ModelClient (${protocol}) runs samples and batches, positional and named`, async () => {
    await using server = await startServer();
    await using client = new ModelClient(server.urls[protocol], "AddSub");
    const a = ndarray(new Float32Array([1, 2]));
    const b = ndarray(new Float32Array([10, 20]));
    const sample = await client.inferSample([a, b]);
    assert.deepEqual(Object.keys(sample), ["add", "sub"]);
    assert.deepEqual(sample.add!.shape, [2]);
    assert.deepEqual(asArray(sample.add), [11, 22]);
    assert.deepEqual(asArray(sample.sub), [-9, -18]);
    const named = await client.inferSample({ b, a });
    assert.deepEqual(asArray(named.sub), [-9, -18]);
    const batched = await client.inferBatch({
      a: ndarray(new Float32Array([1, 2, 3, 4]), [2, 2]),
      b: ndarray(new Float32Array([1, 1, 1, 1]), [2, 2]),
    });
    assert.deepEqual(batched.add!.shape, [2, 2]);
    assert.deepEqual(asArray(batched.add), [2, 3, 4, 5]);
    const config = await client.modelConfig();
    assert.equal(config.maxBatchSize, 8);
    assert.deepEqual(config.inputs.map((spec) => [spec.name, spec.dtype, spec.shape]), [
      ["a", "float32", [-1]],
      ["b", "float32", [-1]],
    ]);
    assert.equal(await client.isBatchingSupported(), true);
  });

  Deno.test(`ModelClient (${protocol}) round-trips every dtype`, async () => {
    await using server = await startServer();
    await using client = new ModelClient(server.urls[protocol], "Identity");
    const inputs = Object.fromEntries(DTYPE_VALUES.map(([dtype, value]) => [`in_${dtype}`, value]));
    const outputs = await client.inferBatch(inputs, {
      outputs: DTYPE_VALUES.map(([dtype]) => `out_${dtype}`),
    });
    for (const [dtype, value] of DTYPE_VALUES) {
      const out = outputs[`out_${dtype}`];
      assert.equal(out?.dtype, dtype, dtype);
      assert.deepEqual(out.shape, [1, 3], dtype);
      assert.deepEqual(asArray(out), asArray(value), dtype);
    }
    // A sample strips the batch axis from every output.
    const sample = await client.inferSample({ in_int64: ndarray(new BigInt64Array([2n ** 60n])) }, {
      outputs: ["out_int64"],
    });
    assert.deepEqual(Object.keys(sample), ["out_int64"]);
    assert.deepEqual(sample.out_int64!.shape, [1]);
    assert.deepEqual(asArray(sample.out_int64), [2n ** 60n]);
  });

  Deno.test(`ModelClient (${protocol}) sends parameters, headers and the access token`, async () => {
    await using server = await startServer();
    await using client = new ModelClient(server.urls[protocol], "Params", { accessToken: "t0ken" });
    const out = await client.inferSample([ndarray(new Int32Array([1]))], {
      parameters: { text: "hi", count: 3, ratio: 0.5, flag: true },
      headers: { "x-custom": "from-header", "x-ignored": "no" },
    });
    const seen = JSON.parse(new TextDecoder().decode((out.params!.data as Uint8Array[])[0]!));
    const tokenKey = protocol === "http"
      ? "triton-access-token"
      : "triton-grpc-protocol-triton-access-token";
    assert.deepEqual(seen, {
      text: "hi",
      count: 3,
      ratio: 0.5,
      flag: true,
      "x-custom": "from-header",
      [tokenKey]: "t0ken",
    });
  });

  Deno.test(`ModelClient (${protocol}) times out slow inferences; the server keeps serving`, async () => {
    await using server = await startServer();
    await using slow = new ModelClient(server.urls[protocol], "Slow", { inferenceTimeoutS: 0.3 });
    await assert.rejects(slow.inferSample([ndarray(new Int32Array([1]))]), {
      name: "ClientTimeoutError",
      message: "Cannot infer with model 'Slow': timed out after 0.3 s",
    });
    await using fast = new ModelClient(server.urls[protocol], "Flat");
    assert.deepEqual(asArray((await fast.inferSample([ndarray(new Int32Array([7]))])).y), [7]);
  });

  Deno.test(`ModelClient (${protocol}) refuses batches for non-batching models`, async () => {
    await using server = await startServer();
    await using client = new ModelClient(server.urls[protocol], "Flat");
    await assert.rejects(
      client.inferBatch([ndarray(new Int32Array([1]))]),
      ClientModelDoesntSupportBatchingError,
    );
    const out = await client.inferSample([ndarray(new Int32Array([1, 2]))]);
    assert.deepEqual(out.y!.shape, [2]);
    assert.equal(await client.isBatchingSupported(), false);
  });

  Deno.test(`ModelClient (${protocol}) reports server errors with the server's message`, async () => {
    await using server = await startServer();
    await using client = new ModelClient(server.urls[protocol], "Flat");
    await assert.rejects(
      client.inferSample([ndarray(new Float32Array([1]))]),
      (error: unknown) => {
        assert.ok(error instanceof ClientInferenceServerError);
        assert.equal(error.status, protocol === "http" ? 400 : 3);
        assert.match(error.serverMessage ?? "", /FP32/);
        assert.match(error.message, /^Inference failed: /);
        return true;
      },
    );
    await assert.rejects(client.unloadModel(), ClientInferenceServerError);
  });

  Deno.test(`ModelClient (${protocol}) waits for unknown models until it times out`, async () => {
    await using server = await startServer();
    await using client = new ModelClient(server.urls[protocol], "Nope", { initTimeoutS: 0.5 });
    await assert.rejects(client.inferSample([ndarray(new Int32Array([1]))]), {
      name: "ClientTimeoutError",
      message: "Timed out after 0.5 s waiting for model 'Nope' to be ready",
    });
    await assert.rejects(client.waitForModel(0.3), ClientTimeoutError);
    await client.waitForServer(10);
  });

  Deno.test(`ModelClient (${protocol}) refuses calls after close`, async () => {
    await using server = await startServer();
    const client = new ModelClient(server.urls[protocol], "Flat");
    await client.inferSample([ndarray(new Int32Array([1]))]);
    await client.close();
    await assert.rejects(client.inferSample([ndarray(new Int32Array([1]))]), ClientClosedError);
    await assert.rejects(client.modelConfig(), ClientClosedError);
  });
}

for (const protocol of PROTOCOLS) {
  Deno.test(`ModelClient (${protocol}) keeps maxConcurrency calls in flight and maxQueueSize waiting, and refuses one more at once`, async () => {
    await using server = await startServer();
    await using client = new ModelClient(server.urls[protocol], "Gated", {
      maxConcurrency: 2,
      maxQueueSize: 2,
    });
    const call = async (value: number, signal?: AbortSignal): Promise<unknown> =>
      asArray(
        (await client.inferSample([ndarray(new Int32Array([value]))], signal ? { signal } : {})).y,
      )[0];
    const first = [call(1), call(2)];
    await watchdog(
      (async () => {
        while (server.gate.inFlight < 2) await new Promise((resolve) => setTimeout(resolve, 10));
      })(),
      "two calls in the model",
    );
    const third = call(3);
    const giveUp = new AbortController();
    const fourth = call(4, giveUp.signal);
    await assert.rejects(call(5), (error: unknown) => {
      assert.ok(error instanceof ClientQueueFullError);
      assert.equal(
        error.message,
        "Cannot infer with model 'Gated': the client's queue is full (2 calls in flight, the maxConcurrency, and 2 waiting, the maxQueueSize)",
      );
      assert.equal(error.status, undefined);
      return true;
    });
    // A call that leaves the line frees its place.
    giveUp.abort(new Error("gave up"));
    await assert.rejects(fourth, /gave up/);
    const sixth = call(6);
    server.gate.open();
    assert.deepEqual(await Promise.all([...first, third, sixth]), [1, 2, 3, 6]);
    assert.equal(server.gate.max, 2, "the server ran more calls at once than maxConcurrency");
    assert.equal(server.gate.calls, 4);
  });
}

Deno.test("ModelClient (grpc) holds a stream's slot until its last response", async () => {
  await using server = await startServer();
  await using client = new ModelClient(server.urls.grpc, "Stream", {
    maxConcurrency: 1,
    maxQueueSize: 0,
  });
  const stream = client.inferStream([ndarray(new Int32Array([3]))]);
  assert.deepEqual(asArray((await stream.next()).value!.i), [0]);
  await assert.rejects(
    client.inferStream([ndarray(new Int32Array([1]))]).next(),
    ClientQueueFullError,
  );
  const rest: unknown[] = [];
  for await (const step of stream) rest.push(asArray(step.i));
  assert.deepEqual(rest, [[10], [20]]);
  const again: unknown[] = [];
  for await (const step of client.inferStream([ndarray(new Int32Array([1]))])) {
    again.push(asArray(step.i));
  }
  assert.deepEqual(again, [[0]]);
});

Deno.test("ModelClient (grpc) streams a decoupled model's responses", async () => {
  await using server = await startServer();
  await using client = new ModelClient(server.urls.grpc, "Stream");
  const steps: unknown[] = [];
  for await (const step of client.inferStream({ n: ndarray(new Int32Array([3])) })) {
    steps.push(asArray(step.i));
  }
  assert.deepEqual(steps, [[0], [10], [20]]);
  const empty: unknown[] = [];
  for await (const step of client.inferStream([ndarray(new Int32Array([0]))])) empty.push(step);
  assert.deepEqual(empty, []);
  // Errors surface while iterating, after the responses sent before them.
  await assert.rejects(
    (async () => {
      for await (const _ of client.inferStream([ndarray(new Int32Array([-1]))]));
    })(),
    (error: unknown) => {
      assert.ok(error instanceof ClientInferenceServerError);
      assert.match(error.message, /Negative count: n must be >= 0/);
      return true;
    },
  );
  // Leaving early cancels the stream; the client keeps working.
  for await (const _ of client.inferStream([ndarray(new Int32Array([100]))])) break;
  const again: unknown[] = [];
  for await (const step of client.inferStream([ndarray(new Int32Array([1]))])) {
    again.push(asArray(step.i));
  }
  assert.deepEqual(again, [[0]]);
  await assert.rejects(client.inferSample([ndarray(new Int32Array([1]))]), /it is decoupled/);
});

Deno.test("ModelClient (grpc) times out a stream whose next message is late", async () => {
  await using server = await startServer();
  await using client = new ModelClient(server.urls.grpc, "SlowStream", { inferenceTimeoutS: 0.5 });
  const steps: unknown[] = [];
  await assert.rejects(
    (async () => {
      for await (const step of client.inferStream([ndarray(new Int32Array([1]))])) {
        steps.push(asArray(step.i));
      }
    })(),
    {
      name: "ClientTimeoutError",
      message: "Cannot stream from model 'SlowStream': timed out after 0.5 s",
    },
  );
  assert.deepEqual(steps, [[1]]);
  await using other = new ModelClient(server.urls.grpc, "Flat");
  assert.deepEqual(asArray((await other.inferSample([ndarray(new Int32Array([3]))])).y), [3]);
});

Deno.test("ModelClient (http) streams over SSE but refuses FP16; coupled models refuse streams", async () => {
  await using server = await startServer();
  await using http = new ModelClient(server.urls.http, "Stream");
  const steps: unknown[] = [];
  for await (const step of http.inferStream([ndarray(new Int32Array([2]))])) {
    steps.push(asArray(step.i));
  }
  assert.deepEqual(steps, [[0], [10]]);
  await assert.rejects(
    http.inferStream([ndarray(new Float16Array([1]))]).next(),
    ClientValueError,
  );
  await using coupled = new ModelClient(server.urls.grpc, "Flat");
  await assert.rejects(
    coupled.inferStream([ndarray(new Int32Array([1]))]).next(),
    /Cannot stream from model 'Flat': it is not decoupled/,
  );
});
