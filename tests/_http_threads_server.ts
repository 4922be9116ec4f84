/**
 * A server on three HTTP threads, for `http_threads_test.ts`: `deno run -A --unstable-net
 * tests/_http_threads_server.ts <engine>`. It restricts inference to the token `t0k3n`, allows
 * calls from the origin `http://app.test:3000` (CORS), logs
 * every request (`logVerbose: 1`, to stderr), prints `{"url": ...}` once it serves (and the lines
 * of its model `Slow`, which waits for its client to leave), stops when
 * its stdin closes, and then prints `{"lent": n}`: how many results the main isolate still counts
 * as lent to the core (0 once every response was deleted and reported back).
 *
 * @module
 */

import { batch, type InferRequest, type NDArray, ndarray, Triton } from "../mod.ts";
import { bindAddSub } from "../examples/add_sub/model.ts";
import { bindAccumulator } from "../examples/accumulator/model.ts";
import { bindParamsAndHeaders, HEADER_PATTERN } from "../examples/parameters_headers/model.ts";
import type { EngineKind } from "../src/engine/engine.ts";
import { lentCount } from "../src/engine/native/tensors.ts";

const engine = Deno.args[0] as EngineKind;
const triton = new Triton({
  engine,
  securityConfig: { accessToken: "t0k3n", restrictedEndpoints: ["inference"] },
  config: {
    httpAddress: "127.0.0.1",
    httpPort: 0,
    allowGrpc: false,
    allowMetrics: false,
    httpThreadCount: 3,
    httpHeaderForwardPattern: HEADER_PATTERN,
    httpCorsOrigins: ["http://app.test:3000"],
    logVerbose: 1,
  },
});
await bindAddSub(triton);
await bindParamsAndHeaders(triton);
await bindAccumulator(triton);
triton.bind({
  modelName: "Upper",
  inferFunc: batch(({ text }: { text: NDArray<"bytes"> }) => ({
    text: ndarray(
      text.data.map((bytes) =>
        new TextEncoder().encode(new TextDecoder().decode(bytes).toUpperCase())
      ),
      text.shape,
    ),
  })),
  inputs: [{ name: "text", dtype: "bytes", shape: [-1] }],
  outputs: [{ name: "text", dtype: "bytes", shape: [-1] }],
});
// A large result (128 KiB): the Triton engine lends it to its response instead of copying it.
triton.bind({
  modelName: "Big",
  inferFunc: batch(({ x }: { x: NDArray<"float32"> }) => ({
    y: ndarray(new Float32Array(32768 * x.shape[0]!).fill(x.data[0]!), [x.shape[0]!, 32768]),
  })),
  inputs: [{ name: "x", dtype: "float32", shape: [1] }],
  outputs: [{ name: "y", dtype: "float32", shape: [32768] }],
});
// Waits for its client to leave: prints {"running":true} when called, {"aborted":true} once its
// request's signal aborts.
triton.bind({
  modelName: "Slow",
  inferFunc: async (requests: InferRequest<{ x: NDArray<"float32"> }>[]) => {
    console.log(JSON.stringify({ running: true }));
    const signal = requests[0]!.signal;
    await new Promise<void>((done) => {
      if (signal.aborted) return done();
      signal.addEventListener("abort", () => done(), { once: true });
    });
    console.log(JSON.stringify({ aborted: signal.aborted }));
    return requests.map((request) => ({ y: request.data.x! }));
  },
  inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
  outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
  config: { batching: false },
});
await triton.run();
console.log(JSON.stringify({ url: triton.urls.http }));
for await (const _ of Deno.stdin.readable) { /* until EOF */ }
await triton.stop();
// Every result the main isolate lent to a response a thread read has been given back.
console.log(JSON.stringify({ lent: lentCount() }));
