// Logging on both engines: the facade warns when verbose logging is on (into logFile); HTTP
// /v2/logging and gRPC LogSettings read and change one set of settings in Triton's names,
// refuse bad input without changing anything, and the changes reach the log file (on the
// Triton engine, the core's own log lines too); a logger of the user's own gets the same lines.

import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { codecs, type LogSettingsMessage } from "../src/protocol/grpc_codec.ts";
import { Triton } from "../mod.ts";
import { ENGINES, spawnServer, startServer, watchdog } from "./_helpers.ts";
import { identityModelName, identityModels } from "./_models.ts";
import { TestGrpcClient } from "./grpc_test_client.ts";

const WARNING = "Verbose logging is on (logVerbose=1): it costs inference throughput";
const FP32 = identityModelName("FP32");

async function post(url: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const response = await fetch(url, { method: "POST", body: JSON.stringify(body) });
  return { status: response.status, json: await response.json() };
}

async function logSettings(
  client: TestGrpcClient,
  settings: LogSettingsMessage["settings"] = {},
): Promise<LogSettingsMessage["settings"]> {
  const reply = await client.call("LogSettings", codecs.LogSettings, codecs.LogSettings, {
    settings,
  });
  return reply.settings;
}

async function logSettingsError(
  client: TestGrpcClient,
  settings: LogSettingsMessage["settings"],
): Promise<{ code: string; details: string }> {
  try {
    await logSettings(client, settings);
  } catch (error) {
    const { code, details } = error as grpc.ServiceError;
    return { code: grpc.status[code]!, details };
  }
  throw new Error("expected LogSettings to fail");
}

/** The log file's text written after `offset` bytes. */
async function logTail(file: string, offset: number): Promise<string> {
  const bytes = await Deno.readFile(file);
  return new TextDecoder().decode(bytes.subarray(offset));
}

/**
 * The log's text after `offset` once it matches `pattern`: the Triton engine forwards the core's
 * lines a moment after they are written. Gives up (returning what is there) after 10 s.
 */
async function logTailMatching(file: string, offset: number, pattern: RegExp): Promise<string> {
  const until = Date.now() + 10_000;
  for (;;) {
    const text = await logTail(file, offset);
    if (pattern.test(text) || Date.now() > until) return text;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function inferOnce(httpUrl: string): Promise<void> {
  const { status } = await post(`${httpUrl}/v2/models/${FP32}/infer`, {
    inputs: [{ name: "INPUT", datatype: "FP32", shape: [1, 2], data: [1, 2] }],
  });
  assert.equal(status, 200);
}

for (const engine of ENGINES) {
  Deno.test(`logging (${engine}): one set of settings over HTTP and gRPC`, async () => {
    const logFile = await Deno.makeTempFile({ suffix: ".log" });
    try {
      {
        await using triton = await startServer({
          engine,
          config: { logVerbose: 1, logFile, allowMetrics: false },
        });
        using client = new TestGrpcClient(triton.urls.grpc!);
        const url = `${triton.urls.http}/v2/logging`;
        assert.deepEqual(await (await fetch(url)).json(), {
          log_file: logFile,
          log_info: true,
          log_warning: true,
          log_error: true,
          log_verbose_level: 1,
          log_format: "default",
        });
        assert.deepEqual(await logSettings(client), {
          log_file: { string_param: logFile, parameter_choice: "string_param" },
          log_info: { bool_param: true, parameter_choice: "bool_param" },
          log_warning: { bool_param: true, parameter_choice: "bool_param" },
          log_error: { bool_param: true, parameter_choice: "bool_param" },
          log_verbose_level: { uint32_param: 1, parameter_choice: "uint32_param" },
          log_format: { string_param: "default", parameter_choice: "string_param" },
        });

        // A change over gRPC shows over HTTP, and the other way round.
        const changed = await logSettings(client, {
          log_verbose_level: { uint32_param: 2 },
          log_format: { string_param: "ISO8601" },
          log_warning: { bool_param: false },
        });
        assert.equal(changed.log_verbose_level!.uint32_param, 2);
        assert.deepEqual(await (await fetch(url)).json(), {
          log_file: logFile,
          log_info: true,
          log_warning: false,
          log_error: true,
          log_verbose_level: 2,
          log_format: "ISO8601",
        });
        assert.deepEqual(
          await post(url, { log_verbose_level: 0, log_format: "default", log_warning: true }),
          {
            status: 200,
            json: {
              log_file: logFile,
              log_info: true,
              log_warning: true,
              log_error: true,
              log_verbose_level: 0,
              log_format: "default",
            },
          },
        );
        assert.equal((await logSettings(client)).log_verbose_level!.uint32_param, 0);
        // Like Triton, null leaves a setting as it is.
        const nulls = await post(url, { log_info: null, log_file: null });
        assert.equal(nulls.status, 200);
        assert.equal((nulls.json as { log_info: boolean }).log_info, true);

        // Bad input: a clear error, and nothing changes (also not the valid part of a request).
        const fixed = "Cannot change 'log_file' over the network: set logFile in the server's " +
          "TritonConfig";
        assert.deepEqual(await post(url, { log_file: "/tmp/elsewhere.log" }), {
          status: 501,
          json: { error: fixed },
        });
        assert.deepEqual(await post(url, { log_verbose_level: 3, log_info: "yes" }), {
          status: 400,
          json: { error: "Invalid 'log_info': expected a boolean" },
        });
        assert.deepEqual(await post(url, { log_verbose_level: -1 }), {
          status: 400,
          json: { error: "Invalid 'log_verbose_level': expected an integer from 0 to 2147483647" },
        });
        // Found by schemathesis: the core takes a C int, and a uint32 beyond it answered 500.
        assert.deepEqual(await post(url, { log_verbose_level: 4294967294 }), {
          status: 400,
          json: { error: "Invalid 'log_verbose_level': expected an integer from 0 to 2147483647" },
        });
        assert.deepEqual(await post(url, { log_file: {} }), {
          status: 400,
          json: { error: "Invalid 'log_file': expected a string" },
        });
        assert.deepEqual(await post(url, { log_format: "xml" }), {
          status: 400,
          json: { error: `Invalid 'log_format' "xml": expected "default" or "ISO8601"` },
        });
        assert.deepEqual(await post(url, { log_colour: true }), {
          status: 400,
          json: {
            error: "Unknown log setting 'log_colour': expected one of log_file, log_info, " +
              "log_warning, log_error, log_verbose_level, log_format",
          },
        });
        assert.deepEqual(
          await logSettingsError(client, { log_file: { string_param: "/tmp/x.log" } }),
          { code: "UNIMPLEMENTED", details: fixed },
        );
        assert.deepEqual(await logSettingsError(client, { log_info: { uint32_param: 1 } }), {
          code: "INVALID_ARGUMENT",
          details: "Invalid 'log_info': expected a boolean",
        });
        assert.deepEqual(await logSettingsError(client, { log_info: {} }), {
          code: "INVALID_ARGUMENT",
          details: "Invalid 'log_info': no value is set",
        });
        const unchanged = await (await fetch(url)).json();
        assert.equal(unchanged.log_verbose_level, 0);
        assert.equal(unchanged.log_info, true);

        const ready = await fetch(`${triton.urls.http}/v2/health/ready`);
        assert.equal(ready.status, 200);
        await ready.body?.cancel();
      }
      const text = await Deno.readTextFile(logFile);
      assert.ok(text.includes(WARNING), `the log file lacks the warning:\n${text}`);
    } finally {
      await Deno.remove(logFile);
    }
  });

  Deno.test(`logging (${engine}): changed settings take effect in the log file`, async () => {
    const logFile = await Deno.makeTempFile({ suffix: ".log" });
    // Our lines end the prefix (the server id) with "]"; the core's go through our logger and
    // name their C++ source file.
    const ours = (level: string): RegExp =>
      new RegExp(String.raw`^\d{4}-\d\d-\d\dT[\d:.]+Z ${level} triton\] `, "m");
    const core = /^\S+ (?:\S+ )?triton\] Triton core \(\w+\.cc:\d+\): /m;
    const coreIso = /^\d{4}-\d\d-\d\dT[\d:.]+Z [IV] triton\] Triton core \(\w+\.cc:\d+\): /m;
    try {
      let offset = 0;
      {
        await using triton = await startServer({
          engine,
          models: identityModels().filter((model) => model.modelName === FP32),
          config: { logFile, allowGrpc: false, allowMetrics: false },
        });
        const http = triton.urls.http!;
        await inferOnce(http);
        offset = (await Deno.stat(logFile)).size;
        await inferOnce(http);
        assert.doesNotMatch(await logTail(logFile, offset), /\S/, "quiet at verbose level 0");

        await post(`${http}/v2/logging`, { log_verbose_level: 1, log_format: "ISO8601" });
        offset = (await Deno.stat(logFile)).size;
        await inferOnce(http);
        const verbose = await logTailMatching(
          logFile,
          offset,
          engine === "triton" ? coreIso : ours("V"),
        );
        assert.match(verbose, ours("V"), verbose);
        assert.match(verbose, /HTTP request: POST \/v2\/models\/identity_fp32\/infer/);
        if (engine === "triton") assert.match(verbose, coreIso, `no core line in:\n${verbose}`);

        await post(`${http}/v2/logging`, { log_verbose_level: 0, log_info: false });
        offset = (await Deno.stat(logFile)).size;
        await inferOnce(http);
      }
      // Stopping logs at info level, which is now off; verbose lines stopped too.
      const after = await logTail(logFile, offset);
      assert.doesNotMatch(after, ours("[IV]"), after);
      assert.doesNotMatch(after, core, after);
    } finally {
      await Deno.remove(logFile);
    }
  });

  Deno.test(`logging (${engine}): no warning when verbose logging is off`, async () => {
    const logFile = await Deno.makeTempFile({ suffix: ".log" });
    try {
      {
        await using _triton = await startServer({
          engine,
          config: { logFile, allowGrpc: false, allowMetrics: false },
        });
      }
      const text = await Deno.readTextFile(logFile);
      assert.ok(!text.includes("Verbose logging is on"));
      assert.ok(text.includes("HTTP/REST (KServe v2) listening at"), text);
    } finally {
      await Deno.remove(logFile);
    }
  });
}

/**
 * A server on two HTTP threads (in a process of its own: they need `--unstable-net`) that logs to
 * a logger of the user's own, which prints each line as JSON on stdout. It prints `READY <url>`
 * once it serves, and stops when its stdin closes.
 */
const SINK_SERVER = `
  import { Triton } from ${JSON.stringify(new URL("../mod.ts", import.meta.url).href)};
  import { identityModels } from ${JSON.stringify(new URL("./_models.ts", import.meta.url).href)};
  const line = (level) => (message) => console.log(JSON.stringify({ level, message }));
  const triton = await Triton.start({
    engine: Deno.args[0],
    logger: { error: line("error"), warn: line("warn"), info: line("info"), debug: line("debug") },
    securityConfig: { restrictedEndpoints: [] },
    config: {
      httpAddress: "127.0.0.1", httpPort: 0, httpThreadCount: 2,
      allowGrpc: false, allowMetrics: false, logVerbose: 1,
    },
    models: identityModels().filter((model) => model.modelName === ${JSON.stringify(FP32)}),
  });
  console.log("READY " + triton.urls.http);
  for await (const _ of Deno.stdin.readable) { /* until EOF */ }
  await triton.stop();
`;

for (const engine of ENGINES) {
  Deno.test(`logging (${engine}): a logger of the user's own gets every line at its level, the HTTP threads' and the core's too, and nothing goes to stderr`, async () => {
    const { child, firstLine, lines: rest, log } = await spawnServer([
      "eval",
      "--unstable-net",
      "--ext=ts",
      SINK_SERVER,
      engine,
    ]);
    let stdout = `${firstLine}\n`;
    const reading = (async () => {
      for (;;) {
        const { value, done } = await rest.read();
        if (done) return;
        stdout += value;
      }
    })();
    // The first lines come before READY: the server logs while it starts.
    const ready = async (): Promise<string> => {
      for (;;) {
        const match = /^READY (\S+)$/m.exec(stdout);
        if (match) return match[1]!;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    try {
      const http = await watchdog(ready(), "the server's READY line");
      // On a connection of its own per request, so either HTTP thread may take it.
      for (let i = 0; i < 4; i++) {
        const client = Deno.createHttpClient({});
        const response = await fetch(`${http}/v2/models/${FP32}/infer`, {
          method: "POST",
          client,
          body: JSON.stringify({
            inputs: [{ name: "INPUT", datatype: "FP32", shape: [1, 2], data: [1, 2] }],
          }),
        });
        assert.equal(response.status, 200);
        await response.body?.cancel();
        client.close();
      }
      // /v2/logging still chooses the lines: info off, so "Server stopped" never arrives.
      const off = await post(`${http}/v2/logging`, { log_info: false });
      assert.equal(off.status, 200);
      await child.stdin.close();
      assert.equal((await watchdog(child.status, "the server's exit")).code, 0);
      await reading;

      const lines = stdout.split("\n").filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as { level: string; message: string });
      const at = (level: string, pattern: RegExp): string[] =>
        lines.filter((line) => line.level === level && pattern.test(line.message))
          .map((line) => line.message);
      assert.deepEqual(at("warn", /./), [WARNING]);
      assert.deepEqual(at("info", /^HTTP\/REST/), [
        `HTTP/REST (KServe v2) listening at ${http}`,
      ]);
      // Loaded before the front ends open, so without a URL.
      assert.deepEqual(at("info", /is ready/), [`Model '${FP32}' version 1 is ready`]);
      // The threads alone listen: these lines come from them, through the main isolate.
      assert.deepEqual(
        at("debug", /^HTTP request: POST \S+\/infer$/),
        Array(4).fill(`HTTP request: POST /v2/models/${FP32}/infer`),
      );
      if (engine === "triton") {
        assert.ok(at("debug", /^Triton core \(\w+\.cc:\d+\): /).length > 0, "no core line");
      }
      assert.deepEqual(at("info", /Server stopped/), []);
      assert.deepEqual(at("error", /./), []);
      // Messages alone: the user's logger adds its own time, level and layout.
      assert.deepEqual(lines.filter((line) => /^[IWEV]\d{4} /.test(line.message)), []);
      const stderr = await log;
      assert.doesNotMatch(stderr, /^[IWEV]\d{4} \d\d:\d\d:\d\d\.\d{3} /m, stderr);
    } finally {
      try {
        child.kill("SIGKILL");
      } catch {
        // Exited already.
      }
      await child.status;
    }
  });
}

Deno.test("logging: a logger of the user's own and logFile are refused together", () => {
  assert.throws(
    () => new Triton({ logger: console, config: { logFile: "/tmp/x.log" } }),
    {
      name: "TritonValidationError",
      message:
        "Invalid options: logFile (/tmp/x.log) and logger both say where the log goes; give one",
    },
  );
});
