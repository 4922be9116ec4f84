// Triton's generate extension over HTTP on every engine: /generate, /generate_stream (SSE),
// partial responses before an error, bad requests, /infer on decoupled models and disconnects.

import assert from "node:assert/strict";
import { ENGINES, startServer, watchdog } from "./_helpers.ts";
import { identityModels } from "./_models.ts";
import {
  endlessLog,
  eventually,
  STREAM_FAILURE_MESSAGE,
  streamingModels,
} from "./_streaming_models.ts";

async function post(
  base: string,
  path: string,
  body: string,
): Promise<{ status: number; type: string | null; text: string }> {
  const response = await fetch(`${base}${path}`, { method: "POST", body });
  return {
    status: response.status,
    type: response.headers.get("content-type"),
    text: await response.text(),
  };
}

const SSE = "text/event-stream; charset=utf-8";
const JSON_TYPE = "application/json";

for (const engine of ENGINES) {
  Deno.test(`generate extension (${engine})`, async (t) => {
    const log = endlessLog();
    await using server = await startServer({
      engine,
      models: [...streamingModels(log), ...identityModels()],
    });
    const base = server.urls.http!;

    await t.step("generate_stream sends one SSE event per response", async () => {
      assert.deepEqual(await post(base, "/v2/models/Count/generate_stream", '{"n":3}'), {
        status: 200,
        type: SSE,
        text: 'data: {"i":0,"model_name":"Count","model_version":"1"}\n\n' +
          'data: {"i":1,"model_name":"Count","model_version":"1"}\n\n' +
          'data: {"i":2,"model_name":"Count","model_version":"1"}\n\n',
      });
      assert.deepEqual(
        await post(base, "/v2/models/Count/versions/1/generate_stream", '{"n":0}'),
        { status: 200, type: SSE, text: "" },
      );
      // A batching decoupled model gets its batch axis from the metadata shape.
      assert.deepEqual(
        await post(base, "/v2/models/CountBatched/generate_stream", '{"parameters":{"n":[1]}}'),
        {
          status: 200,
          type: SSE,
          text: 'data: {"i":0,"model_name":"CountBatched","model_version":"1"}\n\n',
        },
      );
    });

    await t.step("generate answers exactly one response", async () => {
      assert.deepEqual(await post(base, "/v2/models/Count/generate", '{"n":1,"id":"r1"}'), {
        status: 200,
        type: JSON_TYPE,
        text: '{"i":0,"id":"r1","model_name":"Count","model_version":"1"}',
      });
      assert.deepEqual(await post(base, "/v2/models/Count/generate", '{"n":2}'), {
        status: 400,
        type: JSON_TYPE,
        text:
          '{"error":"generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses"}',
      });
      // Coupled models work on both endpoints; lists stay lists, single elements are scalars.
      assert.deepEqual(
        await post(base, "/v2/models/identity_int64/generate", '{"INPUT":[1,2,9007199254740993]}'),
        {
          status: 200,
          type: JSON_TYPE,
          text:
            '{"OUTPUT":[1,2,9007199254740993],"model_name":"identity_int64","model_version":"1"}',
        },
      );
      assert.deepEqual(
        await post(base, "/v2/models/identity_bytes/generate_stream", '{"INPUT":"hello"}'),
        {
          status: 200,
          type: SSE,
          text: 'data: {"OUTPUT":"hello","model_name":"identity_bytes","model_version":"1"}\n\n',
        },
      );
    });

    await t.step("a failure after responses is a last error event", async () => {
      assert.deepEqual(await post(base, "/v2/models/FailAfter/generate_stream", '{"n":2}'), {
        status: 200,
        type: SSE,
        text: 'data: {"i":0,"model_name":"FailAfter","model_version":"1"}\n\n' +
          'data: {"i":1,"model_name":"FailAfter","model_version":"1"}\n\n' +
          `data: {"error":"Error: ${STREAM_FAILURE_MESSAGE}"}\n\n`,
      });
      // Before any response the status is still open: a plain JSON error.
      const early = await post(base, "/v2/models/FailAfter/generate_stream", '{"n":0}');
      assert.equal(early.status, 500);
      assert.equal(early.type, JSON_TYPE);
      assert.deepEqual(JSON.parse(early.text), { error: `Error: ${STREAM_FAILURE_MESSAGE}` });
    });

    await t.step("bad requests get clear errors and the server keeps serving", async () => {
      const cases: [string, string, number, RegExp][] = [
        ["Count", "{", 400, /^Unable to parse the generate request JSON/],
        ["Count", "[1]", 400, /^Unable to parse the generate request JSON: expected an object$/],
        ["Count", '{"n":1,"id":5}', 400, /^Unable to parse 'id': expected a string$/],
        ["Count", '{"n":1,"p":[1]}', 400, /^parameter 'p' has invalid type/],
        [
          "Count",
          '{"n":1,"parameters":3}',
          400,
          /^Expected JSON object for keyword: 'parameters'$/,
        ],
        ["Count", '{"n":[1,2]}', 400, /^The schema can not convert input 'n'/],
        [
          "Count",
          '{"n":[[1]]}',
          400,
          /^Unable to parse input 'n': expected a scalar or a flat list$/,
        ],
        ["Count", '{"n":"x"}', 400, /^Unable to parse 'data' of input 'n'/],
        ["Count", "{}", 400, /n/],
        ["Nope", '{"n":1}', 400, /Nope/],
      ];
      for (const [model, body, status, message] of cases) {
        const answer = await post(base, `/v2/models/${model}/generate_stream`, body);
        assert.equal(answer.status === 404 ? 400 : answer.status, status, `${model} ${body}`);
        assert.equal(answer.type, JSON_TYPE);
        assert.match(JSON.parse(answer.text).error, message, body);
      }
      const infer = await post(base, "/v2/models/Count/infer", '{"inputs":[]}');
      assert.equal(infer.status, 501);
      assert.deepEqual(JSON.parse(infer.text), {
        error: "HTTP end point doesn't support models with decoupled transaction policy",
      });
      assert.equal((await post(base, "/v2/models/Count/generate", '{"n":1}')).status, 200);
    });

    await t.step("a client that disconnects cancels its request", async () => {
      const controller = new AbortController();
      const response = await fetch(`${base}/v2/models/Endless/generate_stream`, {
        method: "POST",
        body: '{"n":0,"tag":"sse"}',
        signal: controller.signal,
      });
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      while (!text.includes('"i":1')) {
        text += (await watchdog(reader.read(), "the first events")).value ?? "";
      }
      assert.ok(text.startsWith('data: {"i":0,"model_name":"Endless","model_version":"1"}\n\n'));
      controller.abort();
      await reader.cancel().catch(() => {});
      // The callable sees request.signal aborted and the engine closes its generator.
      assert.ok(await eventually(() => log.cancelled.has("sse") && log.closed.has("sse")), engine);
      assert.equal((await post(base, "/v2/models/Count/generate", '{"n":1}')).status, 200);
    });
  });
}
