/**
 * schemathesis (PyPI, in `.cache/venv-openapi`, which `.ci/run` installs) fuzzes every operation
 * of a server's own `/v2/openapi.json` on both engines, with the models of
 * `_openapi_models.ts` and the OpenAI API's deterministic `Fixed` (chat and completions) and
 * `Letters` (embeddings) of `_openai_models.ts`, the default restricted groups and the `openai`
 * group (it sends the token, and the same as OpenAI's Bearer API key), and fails on any failure
 * of its checks: no server error (501, Triton's "not implemented", is allowed by
 * `schemathesis.toml`), documented statuses, content types and response schemas. A fixed seed
 * and a bounded number of examples per operation keep it to about 20 s per engine; the README
 * gives the same command for a user's own server.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ENGINES, PEERS_REQUIRED, startServer, watchdog } from "./_helpers.ts";
import { openApiModels } from "./_openapi_models.ts";
import { fixedModel, lettersModel } from "./_openai_models.ts";
import { DEFAULT_RESTRICTED_ENDPOINTS } from "../src/config/security_config.ts";
import { endlessLog, endlessModel, eventually } from "./_streaming_models.ts";
import { ONE_RESPONSE_MESSAGE } from "../src/frontend/http/generate.ts";
import type { Triton } from "../mod.ts";

const SCHEMATHESIS = new URL("../.cache/venv-openapi/bin/schemathesis", import.meta.url).pathname;
const CONFIG = new URL("./schemathesis.toml", import.meta.url).pathname;
const INSTALLED = (() => {
  try {
    return Deno.statSync(SCHEMATHESIS).isFile;
  } catch {
    return false;
  }
})();
if (!INSTALLED && PEERS_REQUIRED) {
  throw new Error(`schemathesis is missing at ${SCHEMATHESIS}: run .ci/run's install`);
}

/** The checks the issue names; `all` would add checks of behaviour the KServe API does not have. */
const CHECKS = [
  "not_a_server_error",
  "status_code_conformance",
  "content_type_conformance",
  "response_schema_conformance",
];

/** Examples per operation and phase; with 69 operations, about 5,500 requests per engine. */
const MAX_EXAMPLES = 30;
const SEED = 20261128;

/**
 * The operation that changes what the others answer: once it has unloaded a model (the names
 * reach schemathesis through the OpenAI bodies' `model` enums), that model's requests answer
 * 503, as Triton's do. It runs last, on its own.
 */
const RUNS_LAST = "repositoryModelUnload";

/** What one schemathesis run printed: operations selected of all, tested, cases and passed. */
interface RunCounts {
  readonly selected: number;
  readonly total: number;
  readonly tested: number;
  readonly generated: number;
  readonly passed: number;
}

async function schemathesis(triton: Triton, filter: string[]): Promise<RunCounts> {
  const output = await watchdog(
    new Deno.Command(SCHEMATHESIS, {
      args: [
        "--config-file",
        CONFIG,
        "run",
        `${triton.urls.http}/v2/openapi.json`,
        "--checks",
        CHECKS.join(","),
        "--seed",
        String(SEED),
        "--max-examples",
        String(MAX_EXAMPLES),
        "--phases",
        "examples,coverage,fuzzing",
        "--generation-database",
        "none",
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--no-color",
        "--header",
        `triton-access-token: ${triton.getAccessToken()}`,
        // The OpenAI routes take the same token as OpenAI's API key.
        "--header",
        `authorization: Bearer ${triton.getAccessToken()}`,
        ...filter,
      ],
      stdout: "piped",
      stderr: "piped",
      // Under .ci/asan the server runs with AddressSanitizer preloaded; Python must not.
      env: { NO_COLOR: "1", LD_PRELOAD: "" },
    }).output(),
    "schemathesis",
    270_000,
  );
  const text = new TextDecoder().decode(output.stdout) + new TextDecoder().decode(output.stderr);
  assert.equal(output.code, 0, text);
  const tested = /Tested: (\d+)/.exec(text);
  const selected = /Selected: (\d+)\/(\d+)/.exec(text);
  const cases = /(\d+) generated, (\d+) passed/.exec(text);
  assert.ok(tested !== null && selected !== null && cases !== null, text);
  return {
    selected: Number(selected[1]),
    total: Number(selected[2]),
    tested: Number(tested[1]),
    generated: Number(cases[1]),
    passed: Number(cases[2]),
  };
}

for (const engine of ENGINES) {
  Deno.test({
    name: `schemathesis finds no failure in /v2/openapi.json [${engine}]`,
    ignore: !INSTALLED,
    async fn(): Promise<void> {
      await using triton = await startServer({
        engine,
        models: [...openApiModels(), fixedModel("main"), lettersModel()],
        securityConfig: { restrictedEndpoints: [...DEFAULT_RESTRICTED_ENDPOINTS, "openai"] },
        config: { logFile: "/dev/null" },
      });
      const first = await schemathesis(triton, ["--exclude-operation-id", RUNS_LAST]);
      const last = await schemathesis(triton, ["--include-operation-id", RUNS_LAST]);
      // It ran: every operation was tested, the OpenAI routes too, and every case passed.
      assert.equal(first.total, 69);
      assert.deepEqual([first.selected, first.tested], [68, 68]);
      assert.deepEqual([last.selected, last.tested], [1, 1]);
      for (const run of [first, last]) assert.equal(run.passed, run.generated);
      assert.ok(first.generated > 1000, String(first.generated));
    },
  });
}

// What schemathesis found, each kept as a literal request on both engines (without schemathesis).
for (const engine of ENGINES) {
  Deno.test(`client input schemathesis found answering 5xx now answers 4xx [${engine}]`, async () => {
    const log = endlessLog();
    await using triton = await startServer({
      engine,
      models: [...openApiModels(), endlessModel(log)],
      config: { logFile: "/dev/null" },
    });
    const post = async (path: string, body: unknown): Promise<[number, unknown]> => {
      const response = await fetch(`${triton.urls.http}${path}`, {
        method: "POST",
        body: JSON.stringify(body),
      });
      return [response.status, await response.json()];
    };
    // A model's own code refusing the request's tensors (zip of unequal shapes): was 500.
    assert.deepEqual(await post("/v2/models/AddSub/generate", { a: 0, b: [] }), [400, {
      error:
        "TritonValidationError: Cannot zip tensors of shapes [1,1] and [1,0]: the shapes must be equal",
    }]);
    // A required input left out of a model that also has an optional one: the Triton core
    // counted the inputs only, and the model's code failed (500).
    for (
      const [path, body] of [
        ["/v2/models/Mixed/generate", { flag: false }],
        ["/v2/models/Mixed/infer", {
          inputs: [{ name: "flag", datatype: "BOOL", shape: [1, 1], data: [false] }],
        }],
      ] as const
    ) {
      assert.deepEqual(await post(path, body), [400, {
        error: "Invalid request for model 'Mixed': missing required input 'x'",
      }]);
    }
    // Loading a name never bound: Triton's 500.
    assert.deepEqual(await post("/v2/repository/models/0/load", {}), [404, {
      error: "failed to load '0', failed to poll from model repository",
    }]);
    // A malformed trace or log request was answered 501 (not supported) before it was read.
    assert.deepEqual(await post("/v2/trace/setting", { trace_mode: {} }), [400, {
      error: "Invalid 'trace_mode': expected a string",
    }]);
    // A verbose level the Triton core cannot hold (a C int): 500 on the Triton engine.
    assert.deepEqual(await post("/v2/logging", { log_verbose_level: 4294967294 }), [400, {
      error: "Invalid 'log_verbose_level': expected an integer from 0 to 2147483647",
    }]);
    // /generate of a model that streams without end kept every response (the server ran out of
    // memory with Count and n = 2^31): a second response ends it, and the model is cancelled.
    assert.deepEqual(await post("/v2/models/Endless/generate", { n: 1, tag: "g" }), [400, {
      error: ONE_RESPONSE_MESSAGE,
    }]);
    assert.ok(await eventually(() => log.closed.has("g")));
    assert.ok(log.cancelled.has("g"));
    assert.ok(log.yielded.get("g")! < 1000);
  });
}
