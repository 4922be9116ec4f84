/**
 * The OpenAI-compatible front end end to end, on every engine, with deterministic models
 * (`_openai_models.ts`): the Server-Sent Events byte for byte, whole answers, the official npm
 * and Python clients unchanged, bad input with OpenAI's error body (and the server serving on),
 * a client that disconnects mid-stream freeing the instance, the API key, and the model's
 * statistics counting OpenAI requests.
 *
 * @module
 */

import assert from "node:assert/strict";
import OpenAI from "openai";
import { ENGINES, PEERS_REQUIRED, startServer, watchdog } from "./_helpers.ts";
import { fixedModel, type ForeverCounts, foreverModel, lettersModel } from "./_openai_models.ts";

/**
 * The events of a stream with its random id and its time replaced by `ID` and 0, after checking
 * that every event has the same ones.
 */
function normalized(text: string, prefix: string, before: number): string {
  const id = new RegExp(`"id":"(${prefix}-[0-9a-f]{32})"`).exec(text)?.[1];
  assert.ok(id !== undefined, `no ${prefix} id in ${text}`);
  const created = Number(/"created":(\d+)/.exec(text)?.[1]);
  assert.ok(created >= before && created <= Date.now() / 1000 + 1, `created ${created}`);
  return text.replaceAll(`"id":"${id}"`, '"id":"ID"').replaceAll(
    `"created":${created},`,
    '"created":0,',
  );
}

function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

const HI = [{ role: "user", content: "Say hi" }];
const CHUNK = (choices: string, usage = ',"usage":null'): string =>
  `data: {"id":"ID","object":"chat.completion.chunk","created":0,"model":"Fixed","choices":${choices}${usage}}\n\n`;
const DELTA = (delta: string, finish = "null"): string =>
  `[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":${finish}}]`;

for (const engine of ENGINES) {
  for (const where of ["main", "worker"] as const) {
    Deno.test(`OpenAI front end (${engine}, ${where} thread): chat stream byte for byte, whole answers, completions`, async () => {
      await using triton = await startServer({
        engine,
        models: [fixedModel(where), lettersModel()],
      });
      const base = `${triton.urls.http}/v1`;
      const before = Math.floor(Date.now() / 1000);

      const streamed = await watchdog(
        post(`${base}/chat/completions`, {
          model: "Fixed",
          messages: HI,
          stream: true,
          stream_options: { include_usage: true },
        }).then(async (response) => {
          assert.equal(response.status, 200);
          assert.equal(response.headers.get("content-type"), "text/event-stream; charset=utf-8");
          return await response.text();
        }),
        "the chat stream",
      );
      assert.equal(
        normalized(streamed, "chatcmpl", before),
        CHUNK(DELTA('{"role":"assistant","content":"","refusal":null}')) +
          CHUNK(DELTA('{"content":"Hello"}')) +
          CHUNK(DELTA('{"content":","}')) +
          CHUNK(DELTA('{"content":" world"}')) +
          CHUNK(DELTA('{"content":"!"}')) +
          CHUNK(DELTA("{}", '"stop"')) +
          CHUNK("[]", ',"usage":{"prompt_tokens":2,"completion_tokens":4,"total_tokens":6}') +
          "data: [DONE]\n\n",
      );

      // Without include_usage no chunk has usage; max_tokens ends the answer with "length".
      const cut = await watchdog(
        post(`${base}/chat/completions`, {
          model: "Fixed",
          messages: HI,
          stream: true,
          max_completion_tokens: 2,
        }).then((response) => response.text()),
        "the chat stream cut by max_completion_tokens",
      );
      assert.equal(
        normalized(cut, "chatcmpl", before),
        CHUNK(DELTA('{"role":"assistant","content":"","refusal":null}'), "") +
          CHUNK(DELTA('{"content":"Hello"}'), "") +
          CHUNK(DELTA('{"content":","}'), "") +
          CHUNK(DELTA("{}", '"length"'), "") +
          "data: [DONE]\n\n",
      );

      const whole = await post(`${base}/chat/completions`, {
        model: "Fixed",
        messages: [{ role: "system", content: "Be brief" }, ...HI],
        stop: [" wor"],
      });
      assert.equal(whole.status, 200);
      assert.equal(
        normalized(await whole.text(), "chatcmpl", before),
        '{"id":"ID","object":"chat.completion","created":0,"model":"Fixed","choices":[{"index":0,"message":{"role":"assistant","content":"Hello,","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":3,"total_tokens":7}}',
      );

      const completion = await watchdog(
        post(`${base}/completions`, {
          model: "Fixed",
          prompt: "Once upon a time",
          stream: true,
          stream_options: { include_usage: true },
        }).then((response) => response.text()),
        "the completion stream",
      );
      const TEXT = (text: string, finish = "null"): string =>
        `data: {"id":"ID","object":"text_completion","created":0,"model":"Fixed","choices":[{"text":${
          JSON.stringify(text)
        },"index":0,"logprobs":null,"finish_reason":${finish}}],"usage":null}\n\n`;
      assert.equal(
        normalized(completion, "cmpl", before),
        TEXT("Hello") + TEXT(",") + TEXT(" world") + TEXT("!") + TEXT("", '"stop"') +
          'data: {"id":"ID","object":"text_completion","created":0,"model":"Fixed","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":4,"total_tokens":8}}\n\n' +
          "data: [DONE]\n\n",
      );

      const models = await fetch(`${base}/models`);
      const list = await models.json();
      assert.deepEqual(list.data.map((model: { id: string }) => model.id), ["Fixed", "Letters"]);
      assert.equal(list.data[0].owned_by, "denotriton");

      // The requests went through the model's scheduler: its statistics count them.
      const stats = await (await fetch(`${triton.urls.http}/v2/models/Fixed/stats`)).json();
      assert.equal(stats.model_stats[0].inference_count, 4);
    });
  }

  Deno.test(`OpenAI front end (${engine}): the npm openai client, unchanged`, async () => {
    await using triton = await startServer({
      engine,
      models: [fixedModel("main"), lettersModel()],
    });
    const client = new OpenAI({
      baseURL: `${triton.urls.http}/v1`,
      apiKey: "unused",
      maxRetries: 0,
    });

    const models = await client.models.list();
    assert.deepEqual(models.data.map((model) => model.id), ["Fixed", "Letters"]);
    assert.equal((await client.models.retrieve("Letters")).object, "model");

    const answer = await client.chat.completions.create({
      model: "Fixed",
      messages: [{ role: "user", content: "Say hi" }],
    });
    assert.equal(answer.choices[0]!.message.content, "Hello, world!");
    assert.equal(answer.choices[0]!.finish_reason, "stop");
    assert.deepEqual(answer.usage, { prompt_tokens: 2, completion_tokens: 4, total_tokens: 6 });

    const stream = await client.chat.completions.create({
      model: "Fixed",
      messages: [{ role: "user", content: "Say hi" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = "";
    const finishes: string[] = [];
    let usage: OpenAI.CompletionUsage | undefined;
    await watchdog(
      (async () => {
        for await (const chunk of stream) {
          content += chunk.choices[0]?.delta.content ?? "";
          if (chunk.choices[0]?.finish_reason) finishes.push(chunk.choices[0].finish_reason);
          if (chunk.usage) usage = chunk.usage;
        }
      })(),
      "the npm client's stream",
    );
    assert.equal(content, "Hello, world!");
    assert.deepEqual(finishes, ["stop"]);
    assert.deepEqual(usage, { prompt_tokens: 2, completion_tokens: 4, total_tokens: 6 });

    const completion = await client.completions.create({
      model: "Fixed",
      prompt: "Once",
      max_tokens: 3,
    });
    assert.equal(completion.choices[0]!.text, "Hello, world");
    assert.equal(completion.choices[0]!.finish_reason, "length");

    // The client asks for base64 vectors unless told otherwise; both ways give the numbers.
    const vectors = await client.embeddings.create({
      model: "Letters",
      input: ["a cat", "banana", "x", "y", "aa"],
    });
    assert.deepEqual(vectors.data.map((item) => item.embedding), [[5, 2, 1], [6, 3, 1], [1, 0, 1], [
      1,
      0,
      1,
    ], [2, 2, 1]]);
    assert.deepEqual(vectors.usage, { prompt_tokens: 6, total_tokens: 6 });
    const floats = await client.embeddings.create({
      model: "Letters",
      input: "a cat",
      encoding_format: "float",
    });
    assert.deepEqual(floats.data[0]!.embedding, [5, 2, 1]);

    await assert.rejects(
      client.chat.completions.create({
        model: "Nope",
        messages: [{ role: "user", content: "Hi" }],
      }),
      (error: unknown) => {
        assert.ok(error instanceof OpenAI.NotFoundError);
        assert.equal(error.code, "model_not_found");
        assert.equal(error.param, "model");
        return true;
      },
    );
  });

  Deno.test(`OpenAI front end (${engine}): the Python openai client, unchanged`, async (t) => {
    const python = Deno.env.get("DENOTRITON_OPENAI_PYTHON") ?? ".cache/venv-openai/bin/python";
    const found = await Deno.stat(python).then(() => true, () => false);
    if (!found) {
      if (PEERS_REQUIRED) throw new Error(`Python with openai not found at ${python}: run .ci/run`);
      console.warn(`skipped: no Python with openai at ${python}`);
      return;
    }
    await using triton = await startServer({
      engine,
      models: [fixedModel("main"), lettersModel()],
    });
    const run = await watchdog(
      new Deno.Command(python, {
        args: [
          new URL("./interop/openai_client.py", import.meta.url).pathname,
          `${triton.urls.http}/v1`,
          "Fixed",
          "Letters",
        ],
        stdout: "piped",
        stderr: "piped",
      }).output(),
      "the Python client",
    );
    const stderr = new TextDecoder().decode(run.stderr);
    assert.ok(run.success, stderr);
    const out = JSON.parse(new TextDecoder().decode(run.stdout));
    await t.step(`openai ${out.version}`, () => {});
    assert.deepEqual(out.models, ["Fixed", "Letters"]);
    assert.deepEqual(out.chat, {
      content: "Hello, world!",
      role: "assistant",
      finish_reason: "stop",
      usage: {
        prompt_tokens: 11,
        completion_tokens: 4,
        total_tokens: 15,
        completion_tokens_details: null,
        prompt_tokens_details: null,
      },
    });
    assert.deepEqual(out.stream, {
      content: "Hello, world!",
      roles: ["assistant"],
      finish_reasons: ["stop"],
      usage: [{
        prompt_tokens: 6,
        completion_tokens: 4,
        total_tokens: 10,
        completion_tokens_details: null,
        prompt_tokens_details: null,
      }],
      chunks: 7,
    });
    assert.deepEqual(out.completion, {
      text: "Hello, world!",
      finish_reason: "stop",
      usage: {
        prompt_tokens: 4,
        completion_tokens: 4,
        total_tokens: 8,
        completion_tokens_details: null,
        prompt_tokens_details: null,
      },
    });
    assert.deepEqual(out.embeddings, {
      vectors: [[5, 2, 1], [6, 3, 1]],
      usage: { prompt_tokens: 3, total_tokens: 3 },
    });
    assert.deepEqual(out.error, { status: 404, code: "model_not_found", type: "NotFoundError" });
  });

  Deno.test(`OpenAI front end (${engine}): bad input answers OpenAI's error body, and the server serves on`, async () => {
    await using triton = await startServer({
      engine,
      models: [fixedModel("main"), lettersModel()],
    });
    const chat = `${triton.urls.http}/v1/chat/completions`;
    const cases: [string, unknown, number, unknown][] = [
      ["a missing messages", { model: "Fixed" }, 400, {
        message: "Missing required parameter: 'messages'.",
        type: "invalid_request_error",
        param: "messages",
        code: null,
      }],
      ["a wrong role", { model: "Fixed", messages: [{ role: "robot", content: "Hi" }] }, 400, {
        message:
          "Invalid value for 'messages[0].role': 'robot' is not one of system, developer, user, assistant, tool",
        type: "invalid_request_error",
        param: "messages[0].role",
        code: null,
      }],
      ["n above 1", { model: "Fixed", messages: HI, n: 2 }, 400, {
        message: "Invalid 'n': this server generates one choice per request (n = 1), got 2.",
        type: "invalid_request_error",
        param: "n",
        code: null,
      }],
      ["an unknown model", { model: "Nope", messages: HI }, 404, {
        message: "The model 'Nope' does not exist",
        type: "invalid_request_error",
        param: "model",
        code: "model_not_found",
      }],
      ["an embedding model on chat", { model: "Letters", messages: HI }, 404, {
        message: "The model 'Letters' is not served on the chat endpoint (it serves: embeddings)",
        type: "invalid_request_error",
        param: "model",
        code: "model_not_found",
      }],
      ["a body that is not JSON", "{not json", 400, {
        message:
          "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
        type: "invalid_request_error",
        param: null,
        code: null,
      }],
      ["an unknown field", { model: "Fixed", messages: HI, frobnicate: 1 }, 400, {
        message: "Unrecognized request argument supplied: frobnicate",
        type: "invalid_request_error",
        param: "frobnicate",
        code: null,
      }],
      [
        "stream_options without stream",
        { model: "Fixed", messages: HI, stream_options: { include_usage: true } },
        400,
        {
          message: "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
          type: "invalid_request_error",
          param: "stream_options",
          code: null,
        },
      ],
      ["tools", { model: "Fixed", messages: HI, tools: [{ type: "function" }] }, 400, {
        message: "Unsupported value for 'tools': this server does not support it.",
        type: "invalid_request_error",
        param: "tools",
        code: null,
      }],
      // Accepted without effect, but of OpenAI's types (as the OpenAPI document says).
      [
        "a parallel_tool_calls string",
        {
          model: "Fixed",
          messages: HI,
          parallel_tool_calls: "yes",
        },
        400,
        {
          message: "Invalid type for 'parallel_tool_calls': expected a boolean, but got a string.",
          type: "invalid_request_error",
          param: "parallel_tool_calls",
          code: null,
        },
      ],
      ["a metadata number", { model: "Fixed", messages: HI, metadata: { run: 1 } }, 400, {
        message: "Invalid type for 'metadata.run': expected a string, but got a number.",
        type: "invalid_request_error",
        param: "metadata.run",
        code: null,
      }],
    ];
    for (const [what, body, status, error] of cases) {
      const response = await post(chat, body);
      assert.equal(response.status, status, what);
      assert.equal(response.headers.get("content-type"), "application/json", what);
      assert.deepEqual(await response.json(), { error }, what);
    }
    const embeddings = await post(`${triton.urls.http}/v1/embeddings`, {
      model: "Letters",
      input: [1, 2],
    });
    assert.equal(embeddings.status, 400);
    assert.equal((await embeddings.json()).error.param, "input");
    const wrongMethod = await fetch(chat);
    assert.equal(wrongMethod.status, 405);
    assert.equal(wrongMethod.headers.get("allow"), "POST");
    assert.deepEqual(await wrongMethod.json(), {
      error: {
        message: "Invalid method for URL (GET /v1/chat/completions)",
        type: "invalid_request_error",
        param: null,
        code: null,
      },
    });
    const unknownPath = await post(`${triton.urls.http}/v1/images/generations`, {});
    assert.equal(unknownPath.status, 404);
    await unknownPath.body?.cancel();
    // A model name that is not percent-encoding matches no route: 404, not a 405 for GET.
    const badName = await fetch(`${triton.urls.http}/v1/models/%E0%A4%A`);
    assert.equal(badName.status, 404);
    assert.equal((await badName.json()).error.message, "Invalid URL (GET /v1/models/%E0%A4%A)");
    // Still serving.
    const good = await post(chat, { model: "Fixed", messages: HI });
    assert.equal(good.status, 200);
    assert.equal((await good.json()).choices[0].message.content, "Hello, world!");
  });

  Deno.test(`OpenAI front end (${engine}): a client that disconnects mid-stream frees the instance`, async () => {
    const counts: ForeverCounts = { started: 0, ended: 0 };
    await using triton = await startServer({ engine, models: [foreverModel(counts)] });
    const chat = `${triton.urls.http}/v1/chat/completions`;
    const response = await post(chat, { model: "Forever", messages: HI, stream: true });
    assert.equal(response.status, 200);
    const reader = response.body!.getReader();
    let seen = "";
    await watchdog(
      (async () => {
        while (!seen.includes('"content":"tick"')) {
          const { value } = await reader.read();
          seen += new TextDecoder().decode(value);
        }
      })(),
      "the first tick",
    );
    await reader.cancel();
    // The model has one instance, which only a cancelled stream frees: this request can only
    // finish once the first stream was cancelled.
    const next = await watchdog(
      post(chat, { model: "Forever", messages: HI, max_tokens: 3 }).then((r) => r.json()),
      "the request after the disconnect",
    );
    assert.equal(next.choices[0].message.content, "tick".repeat(3));
    assert.equal(next.choices[0].finish_reason, "length");
    // max_tokens ended the second stream by cancelling it too.
    await watchdog(
      (async () => {
        while (counts.ended < 2) await new Promise((resolve) => setTimeout(resolve, 5));
      })(),
      "the second stream's cancellation",
    );
    assert.deepEqual(counts, { started: 2, ended: 2 });
  });

  Deno.test(`OpenAI front end (${engine}): the access token is the API key`, async () => {
    await using triton = await startServer({
      engine,
      models: [fixedModel("main")],
      securityConfig: { accessToken: "sk-local", restrictedEndpoints: ["openai"] },
    });
    const base = `${triton.urls.http}/v1`;
    const missing = await fetch(`${base}/models`);
    assert.equal(missing.status, 401);
    assert.equal((await missing.json()).error.type, "invalid_request_error");
    const wrong = await fetch(`${base}/models`, { headers: { authorization: "Bearer sk-guess" } });
    assert.equal(wrong.status, 401);
    assert.equal((await wrong.json()).error.code, "invalid_api_key");
    const client = new OpenAI({ baseURL: base, apiKey: "sk-local", maxRetries: 0 });
    assert.deepEqual((await client.models.list()).data.map((model) => model.id), ["Fixed"]);
    // KServe's routes are not in the group.
    const live = await fetch(`${triton.urls.http}/v2/health/live`);
    assert.equal(live.status, 200);
  });
}
