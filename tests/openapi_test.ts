/**
 * The OpenAPI document (`GET /v2/openapi.json`) and the docs page (`/docs`), issue 37: every
 * route of the front end's table is described, the document validates (`openapi-spec-validator`,
 * from `.cache/venv-openapi`, which `.ci/run` installs), `proto/openapi.json` is what a default
 * server serves, each model's own paths carry examples the server accepts, and restricted groups
 * carry the token's security scheme; the OpenAI routes name the models bound in their `model`
 * enum, their examples are answered, and their answers, whole and streamed, match their schemas
 * (checked with the `jsonschema` package of the same venv); on both engines.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Triton } from "../mod.ts";
import type { Engine } from "../src/engine/engine.ts";
import { expandPathTemplate } from "../src/frontend/http/path_template.ts";
import { httpRouter } from "../src/frontend/http/server.ts";
import { describedRoutes, openApiDocument } from "../src/frontend/http/openapi.ts";
import { SharedMemoryRegistry } from "../src/shm/registry.ts";
import { defaultOpenApiDocument, OPENAPI_FILE } from "../proto/gen_openapi.ts";
import { ENGINES, PEERS_REQUIRED, startServer, watchdog } from "./_helpers.ts";
import { openApiModels } from "./_openapi_models.ts";
import { fixedModel, lettersModel } from "./_openai_models.ts";

const VALIDATOR = new URL("../.cache/venv-openapi/bin/openapi-spec-validator", import.meta.url)
  .pathname;
const HAS_VALIDATOR = (() => {
  try {
    return Deno.statSync(VALIDATOR).isFile;
  } catch {
    return false;
  }
})();
if (!HAS_VALIDATOR && PEERS_REQUIRED) {
  throw new Error(`openapi-spec-validator is missing at ${VALIDATOR}: run .ci/run's install`);
}

type Document = {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown> };
};
type Operation = {
  operationId: string;
  security?: unknown;
  responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
  requestBody?: {
    content: Record<
      string,
      {
        schema: { properties: Record<string, { enum?: unknown[] }>; anyOf?: unknown[] };
        example?: unknown;
        examples?: Record<string, { value: unknown }>;
      }
    >;
  };
};

async function documentOf(triton: Triton): Promise<Document> {
  const response = await fetch(`${triton.urls.http}/v2/openapi.json`, {
    headers: { "triton-access-token": triton.getAccessToken() ?? "" },
  });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/json");
  return await response.json();
}

async function validate(document: unknown): Promise<void> {
  const file = await Deno.makeTempFile({ suffix: ".json" });
  try {
    await Deno.writeTextFile(file, JSON.stringify(document));
    // Under .ci/asan the server runs with AddressSanitizer preloaded; Python must not.
    const output = await new Deno.Command(VALIDATOR, { args: [file], env: { LD_PRELOAD: "" } })
      .output();
    const text = new TextDecoder().decode(output.stdout) + new TextDecoder().decode(output.stderr);
    assert.equal(output.code, 0, text);
    assert.equal(text.trim(), `${file}: OK`);
  } finally {
    await Deno.remove(file);
  }
}

Deno.test("every route of the front end's table is described, and appears in the document once", () => {
  for (const sharedMemory of [new SharedMemoryRegistry(), undefined]) {
    const router = httpRouter(
      {} as Engine,
      sharedMemory === undefined ? {} : { sharedMemory },
    );
    const document = openApiDocument({ tables: [router] }) as unknown as Document;
    const { undescribed } = describedRoutes([router]);
    assert.deepEqual(undescribed.map((route) => `${route.method} ${route.pattern.source}`), []);
    let operations = 0;
    for (const route of router.routes) {
      if (route.doc === undefined) continue;
      for (const path of expandPathTemplate(route.template!)) {
        const operation = document.paths[path]?.[route.method.toLowerCase()];
        assert.ok(operation !== undefined, `${route.method} ${path} is not in the document`);
        // The path the document names is the path the route serves.
        const concrete = path.replace("{version}", "3").replace(/\{[a-z]+\}/g, "x");
        const found = router.match(route.method, concrete);
        assert.ok(found.kind === "found" && found.route === route, `${path} reaches another route`);
        operations++;
      }
    }
    const described = Object.values(document.paths)
      .reduce((count, item) => count + Object.keys(item).length, 0);
    assert.equal(described, operations);
    // 43 routes (5 of them OpenAI's), 9 of them with a versioned path too: with the system
    // shared-memory routes, and with their "not supported" stand-ins.
    assert.equal(router.routes.length, 43);
    assert.equal(operations, 52);
    // Without models, the OpenAI bodies name none: any name, and an example's placeholder.
    const chat = document.paths["/v1/chat/completions"]!["post"]!.requestBody!
      .content["application/json"]!;
    assert.equal(chat.schema.properties["model"]!.enum, undefined);
    assert.deepEqual(chat.examples!["whole"]!.value, {
      model: "my-chat-model",
      messages: [{ role: "user", content: "Say hello" }],
    });
  }
});

Deno.test("proto/openapi.json is what a default server without models serves (deno task gen:openapi)", async () => {
  const published = JSON.parse(await Deno.readTextFile(OPENAPI_FILE));
  assert.deepEqual(
    await defaultOpenApiDocument(),
    published,
    "proto/openapi.json is stale: run `deno task gen:openapi`",
  );
});

Deno.test({
  name: "proto/openapi.json validates as OpenAPI 3.1",
  ignore: !HAS_VALIDATOR,
  async fn(): Promise<void> {
    await validate(JSON.parse(await Deno.readTextFile(OPENAPI_FILE)));
  },
});

/** What each model's own example answers: the example is zeros, so are the outputs. */
const EXAMPLE_ANSWERS: Record<string, unknown> = {
  "/v2/models/AddSub/infer": {
    model_name: "AddSub",
    model_version: "1",
    outputs: [
      { name: "add", datatype: "FP32", shape: [1, 1], data: [0] },
      { name: "sub", datatype: "FP32", shape: [1, 1], data: [0] },
    ],
  },
  "/v2/models/AddSub/generate": { add: 0, model_name: "AddSub", model_version: "1", sub: 0 },
  "/v2/models/Text/infer": {
    model_name: "Text",
    model_version: "1",
    outputs: [{ name: "echo", datatype: "BYTES", shape: [2], data: ["", ""] }],
  },
  "/v2/models/Text/generate": { echo: ["", ""], model_name: "Text", model_version: "1" },
  "/v2/models/Mixed/infer": {
    model_name: "Mixed",
    model_version: "1",
    outputs: [
      { name: "doubled", datatype: "INT16", shape: [1, 2, 1], data: [0, 0] },
      { name: "any", datatype: "BOOL", shape: [1, 1], data: [false] },
    ],
  },
  "/v2/models/Mixed/generate": {
    any: false,
    doubled: [0, 0],
    model_name: "Mixed",
    model_version: "1",
  },
};

for (const engine of ENGINES) {
  Deno.test(`/v2/openapi.json describes each model, validates, and its examples are answered [${engine}]`, async () => {
    await using triton = await startServer({
      engine,
      models: openApiModels(),
      securityConfig: {},
    });
    const document = await documentOf(triton);
    if (HAS_VALIDATOR) await validate(document);
    // A decoupled model has no infer path (HTTP answers it 501), but generate and its stream.
    const own = Object.keys(document.paths).filter((path) => /^\/v2\/models\/[A-Z]/.test(path));
    assert.deepEqual(own, [
      "/v2/models/AddSub/infer",
      "/v2/models/AddSub/generate",
      "/v2/models/AddSub/generate_stream",
      "/v2/models/Mixed/infer",
      "/v2/models/Mixed/generate",
      "/v2/models/Mixed/generate_stream",
      "/v2/models/Repeat/generate",
      "/v2/models/Repeat/generate_stream",
      "/v2/models/Text/infer",
      "/v2/models/Text/generate",
      "/v2/models/Text/generate_stream",
    ]);
    for (const [path, expected] of Object.entries(EXAMPLE_ANSWERS)) {
      const example = document.paths[path]!["post"]!.requestBody!.content["application/json"]!
        .example;
      const response = await fetch(`${triton.urls.http}${path}`, {
        method: "POST",
        body: JSON.stringify(example),
      });
      assert.equal(response.status, 200, `${path}: ${JSON.stringify(example)}`);
      assert.deepEqual(await response.json(), expected, path);
    }
    // Restricted groups (the defaults) carry the token's scheme and its answers.
    const stats = document.paths["/v2/models/stats"]!["get"]!;
    assert.deepEqual(stats.security, [{ tritonAccessToken: [] }]);
    assert.deepEqual(Object.keys(stats.responses), ["200", "401", "403"]);
    const live = document.paths["/v2/health/live"]!["get"]!;
    assert.equal(live.security, undefined);
    assert.deepEqual(Object.keys(live.responses), ["200", "400"]);
  });
}

Deno.test("nothing restricted: no operation carries the security scheme", async () => {
  await using triton = await startServer({ engine: "builtin" });
  const document = await documentOf(triton);
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      assert.equal(operation.security, undefined, `${method} ${path}`);
      assert.equal(operation.responses["401"], undefined, `${method} ${path}`);
    }
  }
});

for (const engine of ENGINES) {
  Deno.test(`/docs serves Swagger UI and its files; httpDocs: false turns the page off [${engine}]`, async () => {
    {
      await using triton = await startServer({ engine });
      const base = triton.urls.http!;
      const page = await fetch(`${base}/docs`);
      assert.equal(page.status, 200);
      assert.equal(page.headers.get("content-type"), "text/html; charset=utf-8");
      const html = await page.text();
      for (const file of ["docs/swagger-ui.css", "docs/swagger-ui-bundle.js", "docs/docs.js"]) {
        assert.ok(html.includes(`"${file}"`), file);
      }
      const bundle = await fetch(`${base}/docs/swagger-ui-bundle.js`);
      assert.equal(bundle.headers.get("content-type"), "text/javascript; charset=utf-8");
      const script = await bundle.text();
      assert.ok(script.length > 1_000_000 && script.includes("SwaggerUIBundle"));
      const css = await fetch(`${base}/docs/swagger-ui.css`);
      assert.equal(css.headers.get("content-type"), "text/css; charset=utf-8");
      assert.ok((await css.text()).includes(".swagger-ui"));
      const start = await (await fetch(`${base}/docs/docs.js`)).text();
      assert.ok(start.includes('new URL("v2/openapi.json", document.baseURI)'));
      assert.ok(start.includes("validatorUrl: null"));
    }
    await using off = await startServer({ engine, config: { httpDocs: false } });
    const page = await fetch(`${off.urls.http}/docs`);
    assert.equal(page.status, 404);
    await page.body?.cancel();
    const document = await documentOf(off);
    assert.equal(document.paths["/docs"], undefined);
  });
}

const PYTHON = new URL("../.cache/venv-openapi/bin/python", import.meta.url).pathname;

/** Validates instances against the document's component schemas with Python's `jsonschema`. */
const SCHEMA_CHECK = `
import json, sys
from jsonschema import Draft202012Validator
document = json.load(open(sys.argv[1]))
for name, instance in json.load(open(sys.argv[2])):
    schema = {"$ref": "#/components/schemas/" + name, "components": document["components"]}
    for error in Draft202012Validator(schema).iter_errors(instance):
        print(f"{name} {list(error.absolute_path)}: {error.message}")
`;

async function schemaErrors(document: unknown, cases: [string, unknown][]): Promise<string[]> {
  const documentFile = await Deno.makeTempFile({ suffix: ".json" });
  const casesFile = await Deno.makeTempFile({ suffix: ".json" });
  try {
    await Deno.writeTextFile(documentFile, JSON.stringify(document));
    await Deno.writeTextFile(casesFile, JSON.stringify(cases));
    const output = await new Deno.Command(PYTHON, {
      args: ["-c", SCHEMA_CHECK, documentFile, casesFile],
      env: { LD_PRELOAD: "" },
    }).output();
    const decoder = new TextDecoder();
    assert.equal(output.code, 0, decoder.decode(output.stderr));
    return decoder.decode(output.stdout).split("\n").filter((line) => line !== "");
  } finally {
    await Deno.remove(documentFile);
    await Deno.remove(casesFile);
  }
}

/** An answer with its random id and its time replaced by `ID` and 0. */
function normalized(text: string): string {
  return text.replace(/"id":"(chatcmpl|cmpl)-[0-9a-f]{32}"/g, '"id":"ID"').replace(
    /"created":\d+,/g,
    '"created":0,',
  );
}

const CHAT_CHUNK = (choices: string, usage = ',"usage":null'): string =>
  `data: {"id":"ID","object":"chat.completion.chunk","created":0,"model":"Fixed","choices":${choices}${usage}}\n\n`;
const CHAT_DELTA = (delta: string, finish = "null"): string =>
  `[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":${finish}}]`;
const TEXT_CHUNK = (text: string, finish = "null"): string =>
  `data: {"id":"ID","object":"text_completion","created":0,"model":"Fixed","choices":[{"text":"${text}","index":0,"logprobs":null,"finish_reason":${finish}}]}\n\n`;

/** What each OpenAI example answers (`Fixed` says "Hello, world!", `Letters` counts letters). */
const OPENAI_EXAMPLE_ANSWERS: Record<string, Record<string, string>> = {
  "/v1/chat/completions": {
    whole:
      '{"id":"ID","object":"chat.completion","created":0,"model":"Fixed","choices":[{"index":0,"message":{"role":"assistant","content":"Hello, world!","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":4,"total_tokens":6}}',
    streamed: CHAT_CHUNK(CHAT_DELTA('{"role":"assistant","content":"","refusal":null}')) +
      CHAT_CHUNK(CHAT_DELTA('{"content":"Hello"}')) +
      CHAT_CHUNK(CHAT_DELTA('{"content":","}')) +
      CHAT_CHUNK(CHAT_DELTA('{"content":" world"}')) +
      CHAT_CHUNK(CHAT_DELTA('{"content":"!"}')) +
      CHAT_CHUNK(CHAT_DELTA("{}", '"stop"')) +
      CHAT_CHUNK("[]", ',"usage":{"prompt_tokens":2,"completion_tokens":4,"total_tokens":6}') +
      "data: [DONE]\n\n",
  },
  "/v1/completions": {
    whole:
      '{"id":"ID","object":"text_completion","created":0,"model":"Fixed","choices":[{"text":"Hello, world!","index":0,"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":4,"total_tokens":8}}',
    streamed: TEXT_CHUNK("Hello") + TEXT_CHUNK(",") + TEXT_CHUNK(" world") + TEXT_CHUNK("!") +
      TEXT_CHUNK("", '"stop"') + "data: [DONE]\n\n",
  },
  "/v1/embeddings": {
    float:
      '{"object":"list","data":[{"object":"embedding","index":0,"embedding":[5,0,1]},{"object":"embedding","index":1,"embedding":[5,0,1]}],"model":"Letters","usage":{"prompt_tokens":2,"total_tokens":2}}',
    // [5, 0, 1] as little-endian float32.
    base64:
      '{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AACgQAAAAAAAAIA/"}],"model":"Letters","usage":{"prompt_tokens":1,"total_tokens":1}}',
  },
};

/** The component schema of each answer, and of each streamed event. */
const ANSWER_SCHEMAS: Record<string, [whole: string, chunk: string]> = {
  "/v1/chat/completions": ["ChatCompletion", "ChatCompletionChunk"],
  "/v1/completions": ["Completion", "CompletionChunk"],
  "/v1/embeddings": ["EmbeddingList", "EmbeddingList"],
};

for (const engine of ENGINES) {
  Deno.test(`the OpenAI routes: the models bound in their enums, the API key, examples answered, answers of their schemas [${engine}]`, async () => {
    await using triton = await startServer({
      engine,
      models: [fixedModel("main"), lettersModel()],
      securityConfig: { restrictedEndpoints: ["openai"] },
    });
    const key = triton.getAccessToken()!;
    const document = await documentOf(triton);
    if (HAS_VALIDATOR) await validate(document);
    assert.deepEqual(Object.keys(document.paths).filter((path) => path.startsWith("/v1/")), [
      "/v1/models",
      "/v1/models/{model}",
      "/v1/chat/completions",
      "/v1/completions",
      "/v1/embeddings",
      "/v1/models/Fixed",
      "/v1/models/Letters",
    ]);
    const body = (path: string) =>
      document.paths[path]!["post"]!.requestBody!.content["application/json"]!;
    assert.deepEqual(body("/v1/chat/completions").schema.properties["model"]!.enum, ["Fixed"]);
    assert.deepEqual(body("/v1/completions").schema.properties["model"]!.enum, ["Fixed"]);
    assert.deepEqual(body("/v1/embeddings").schema.properties["model"]!.enum, ["Letters"]);
    // Each embedding model takes its own vector length.
    assert.deepEqual(body("/v1/embeddings").schema.anyOf, [
      { properties: { model: { const: "Letters" }, dimensions: { enum: [3, null] } } },
    ]);
    // The restricted openai group takes the token as a Bearer API key, and answers OpenAI's 401.
    for (const [path, item] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        if (!path.startsWith("/v1/")) {
          assert.equal(operation.security, undefined, `${method} ${path}`);
          continue;
        }
        assert.deepEqual(operation.security, [{ openAIApiKey: [] }, { tritonAccessToken: [] }]);
        assert.deepEqual(operation.responses["401"]!.content!["application/json"]!.schema, {
          $ref: "#/components/schemas/OpenAIError",
        });
        assert.equal(operation.responses["403"], undefined);
      }
    }
    assert.deepEqual(
      Object.keys(document.paths["/v1/chat/completions"]!["post"]!.responses),
      ["200", "400", "401", "404", "413", "429", "500", "503"],
    );

    const checked: [string, unknown][] = [];
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
    for (const [path, answers] of Object.entries(OPENAI_EXAMPLE_ANSWERS)) {
      const examples = body(path).examples!;
      assert.deepEqual(Object.keys(examples), Object.keys(answers), path);
      for (const [name, expected] of Object.entries(answers)) {
        const [response, text] = await watchdog(
          fetch(`${triton.urls.http}${path}`, {
            method: "POST",
            headers,
            body: JSON.stringify(examples[name]!.value),
          }).then(async (response) => [response, await response.text()] as const),
          `${path} ${name}`,
        );
        assert.equal(response.status, 200, `${path} ${name}: ${text}`);
        assert.equal(normalized(text), expected, `${path} ${name}`);
        const [whole, chunk] = ANSWER_SCHEMAS[path]!;
        if (!text.startsWith("data: ")) checked.push([whole, JSON.parse(text)]);
        else {
          assert.equal(response.headers.get("content-type"), "text/event-stream; charset=utf-8");
          const events = text.split("\n\n").filter((event) => event !== "");
          assert.equal(events.at(-1), "data: [DONE]");
          for (const event of events.slice(0, -1)) {
            checked.push([chunk, JSON.parse(event.slice("data: ".length))]);
          }
        }
      }
    }
    const model = await fetch(`${triton.urls.http}/v1/models/Fixed`, { headers });
    checked.push(["OpenAIModel", await model.json()]);
    const list = await fetch(`${triton.urls.http}/v1/models`, { headers });
    checked.push(["OpenAIModelList", await list.json()]);
    const noKey = await fetch(`${triton.urls.http}/v1/models`);
    assert.equal(noKey.status, 401);
    checked.push(["OpenAIError", await noKey.json()]);
    const refused = await fetch(`${triton.urls.http}/v1/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model: "Fixed", messages: [] }),
    });
    assert.equal(refused.status, 400);
    checked.push(["OpenAIError", await refused.json()]);
    // 7 events of the chat stream, 5 of the completion stream, and 8 JSON answers.
    assert.equal(checked.length, 20);
    if (!HAS_VALIDATOR) return;
    assert.deepEqual(await schemaErrors(document, checked), []);
    // The check can fail: an event the chunk schema does not allow.
    assert.deepEqual(
      await schemaErrors(document, [["CompletionChunk", {
        ...checked.find(([name]) => name === "CompletionChunk")![1] as object,
        object: "chat.completion.chunk",
      }]]),
      ["CompletionChunk ['object']: 'text_completion' was expected"],
    );
  });
}
