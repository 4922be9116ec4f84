// ModelClient.inferStream against the real server on every engine, over HTTP (generate
// extension, SSE) and gRPC (ModelStreamInfer): responses, batching, errors after partial
// responses, per-message timeouts, cancellation on leaving the loop, and every client error type.

import assert from "node:assert/strict";
import { ndarray } from "../mod.ts";
import {
  ClientClosedError,
  ClientError,
  ClientInferenceServerError,
  ClientInvalidUrlError,
  ClientModelDoesntSupportBatchingError,
  ClientModelUnavailableError,
  ClientTimeoutError,
  ClientValueError,
  ModelClient,
  type NDArray,
} from "../src/client/mod.ts";
import { ENGINES, startServer } from "./_helpers.ts";
import { identityModels } from "./_models.ts";
import {
  endlessLog,
  eventually,
  STREAM_FAILURE_MESSAGE,
  streamingModels,
} from "./_streaming_models.ts";

const n = (value: number): NDArray => ndarray(new Int32Array([value]));

function values(tensor: NDArray | undefined): number[] {
  assert.ok(tensor !== undefined);
  return Array.from(tensor.data as Int32Array);
}

async function collect(stream: AsyncIterable<Record<string, NDArray>>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const step of stream) out.push({ shape: step.i?.shape, i: values(step.i) });
  return out;
}

for (const engine of ENGINES) {
  Deno.test(`ModelClient.inferStream (${engine})`, async (t) => {
    const log = endlessLog();
    await using server = await startServer({
      engine,
      models: [...streamingModels(log), ...identityModels()],
    });
    for (const protocol of ["http", "grpc"] as const) {
      const url = server.urls[protocol]!;
      await using client = new ModelClient(url, "Count");

      await t.step(`${protocol}: streams every response`, async () => {
        assert.deepEqual(await collect(client.inferStream([n(3)])), [
          { shape: [1], i: [0] },
          { shape: [1], i: [1] },
          { shape: [1], i: [2] },
        ]);
        assert.deepEqual(await collect(client.inferStream({ n: n(0) })), []);
      });

      await t.step(`${protocol}: samples and batches on a batching model`, async () => {
        await using batched = new ModelClient(url, "CountBatched");
        // A sample gets a batch axis on the way out, and loses it on the way back.
        assert.deepEqual(await collect(batched.inferStream([n(2)])), [
          { shape: [1], i: [0] },
          { shape: [1], i: [1] },
        ]);
        const rows = ndarray(new Int32Array([1, 2]), [2, 1]);
        assert.deepEqual(await collect(batched.inferStream([rows], { batch: true })), [
          { shape: [2, 1], i: [0, 0] },
          { shape: [2, 1], i: [1, 1] },
        ]);
      });

      await t.step(`${protocol}: a failure comes after the partial responses`, async () => {
        await using failing = new ModelClient(url, "FailAfter");
        const seen: number[] = [];
        await assert.rejects(
          (async () => {
            for await (const step of failing.inferStream([n(2)])) seen.push(...values(step.i));
          })(),
          (error: unknown) => {
            assert.ok(error instanceof ClientInferenceServerError);
            assert.match(error.message, new RegExp(STREAM_FAILURE_MESSAGE));
            return true;
          },
        );
        assert.deepEqual(seen, [0, 1]);
      });

      await t.step(`${protocol}: each message has its own timeout`, async () => {
        await using slow = new ModelClient(url, "Count", { inferenceTimeoutS: 0.3 });
        await assert.rejects(
          collect(slow.inferStream([n(2)], { parameters: { delay_ms: 3000 } })),
          {
            name: "ClientTimeoutError",
            message: "Cannot stream from model 'Count': timed out after 0.3 s",
          },
        );
        // Many quick messages pass even if all together take longer than one timeout.
        assert.equal(
          (await collect(slow.inferStream([n(40)], { parameters: { delay_ms: 20 } }))).length,
          40,
        );
      });

      await t.step(`${protocol}: leaving the loop cancels the request`, async () => {
        await using endless = new ModelClient(url, "Endless");
        const tag = `${protocol}-break`;
        let count = 0;
        for await (const _ of endless.inferStream([n(0)], { parameters: { tag } })) {
          if (++count === 2) break;
        }
        assert.ok(await eventually(() => log.cancelled.has(tag) && log.closed.has(tag)));
        // So does aborting the caller's signal.
        const controller = new AbortController();
        const aborted = `${protocol}-abort`;
        const reason = new Error("Stop");
        await assert.rejects(
          (async () => {
            const stream = endless.inferStream([n(0)], {
              parameters: { tag: aborted },
              signal: controller.signal,
            });
            for await (const _ of stream) controller.abort(reason);
          })(),
          (error: unknown) => error === reason,
        );
        assert.ok(await eventually(() => log.cancelled.has(aborted) && log.closed.has(aborted)));
        assert.deepEqual(await collect(client.inferStream([n(1)])), [{ shape: [1], i: [0] }]);
      });

      await t.step(`${protocol}: every client error type`, async () => {
        assert.throws(() => new ModelClient("ftp://x", "Count"), ClientInvalidUrlError);
        await assert.rejects(
          client.inferStream([n(1)], { parameters: { bad: [1] as unknown as number } }).next(),
          ClientValueError,
        );
        await assert.rejects(
          client.inferStream([n(1)], { batch: true }).next(),
          ClientModelDoesntSupportBatchingError,
        );
        await using coupled = new ModelClient(url, "identity_int32");
        await assert.rejects(coupled.inferStream([n(1)]).next(), {
          name: "ClientInferenceServerError",
          message:
            "Cannot stream from model 'identity_int32': it is not decoupled; use inferSample() or inferBatch()",
        });
        await using missing = new ModelClient(url, "Missing", { initTimeoutS: 0.5 });
        await assert.rejects(missing.inferStream([n(1)]).next(), ClientTimeoutError);
        await using unready = new ModelClient(url, "Missing", { ensureModelIsReady: false });
        await assert.rejects(
          unready.inferStream([n(1)]).next(),
          (error: unknown) =>
            error instanceof ClientModelUnavailableError ||
            error instanceof ClientInferenceServerError,
        );
        const closing = new ModelClient(url, "Endless");
        await assert.rejects(
          (async () => {
            for await (const _ of closing.inferStream([n(0)], { parameters: { tag: "close" } })) {
              await closing.close();
            }
          })(),
          ClientClosedError,
        );
        await assert.rejects(closing.inferStream([n(1)]).next(), ClientClosedError);
        for (const type of [ClientValueError, ClientTimeoutError, ClientClosedError]) {
          assert.ok(type.prototype instanceof ClientError);
        }
      });
    }
  });
}
