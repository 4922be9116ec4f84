/**
 * `httpThreadCount` (issue 16): the HTTP front end on Workers sharing the port, the main isolate
 * not listening. Without `--unstable-net` the start fails with one line naming the flag; with it, a
 * server on three threads (run as a subprocess with the flag) answers the same on every thread,
 * for requests each thread decodes itself and for those it forwards to the main isolate, on both
 * engines.
 *
 * @module
 */

import assert from "node:assert/strict";
import { gzip } from "node:zlib";
import { promisify } from "node:util";
import { Triton, TritonPermissionError } from "../mod.ts";
import { ENGINES, spawnServer, watchdog } from "./_helpers.ts";

const SERVER = new URL("./_http_threads_server.ts", import.meta.url).pathname;
const UNSTABLE_NET = typeof (Deno as { listenDatagram?: unknown }).listenDatagram === "function";
const TOKEN = { "triton-access-token": "t0k3n" };
/** The origin `_http_threads_server.ts` allows. */
const APP = "http://app.test:3000";

Deno.test({
  name: "httpThreadCount above 1 without --unstable-net fails with one line naming the flag",
  ignore: UNSTABLE_NET,
  async fn(): Promise<void> {
    const triton = new Triton({
      engine: "builtin",
      config: {
        httpAddress: "127.0.0.1",
        httpPort: 0,
        allowGrpc: false,
        allowMetrics: false,
        httpThreadCount: 2,
      },
    });
    try {
      await assert.rejects(
        triton.run(),
        (error: Error) => {
          assert.ok(error instanceof TritonPermissionError);
          assert.equal(
            error.stack,
            "TritonPermissionError: DenoTriton needs --unstable-net for 2 HTTP threads (httpThreadCount): they share the port through reusePort",
          );
          return true;
        },
      );
    } finally {
      await triton.stop();
    }
  },
});

Deno.test("httpThreadCount 2 on a port in use fails naming the socket, and leaves no thread running", async () => {
  using taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const script = `
    import { Triton } from ${JSON.stringify(new URL("../mod.ts", import.meta.url).href)};
    const triton = new Triton({
      engine: "builtin",
      config: {
        httpAddress: "127.0.0.1",
        httpPort: ${taken.addr.port},
        allowGrpc: false,
        allowMetrics: false,
        httpThreadCount: 2,
      },
    });
    try {
      await triton.run();
    } catch (error) {
      console.log(error.name + ": " + error.message);
    } finally {
      await triton.stop();
    }`;
  const output = await watchdog(
    new Deno.Command(Deno.execPath(), {
      args: ["eval", "--unstable-net", "--ext=ts", script],
      stderr: "piped",
    }).output(),
    "the server's exit",
  );
  const stdout = new TextDecoder().decode(output.stdout);
  // The process ended by itself: a Worker left listening would keep it alive.
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  assert.match(
    stdout,
    new RegExp(
      `^InferenceError: Cannot start the HTTP front end: socket '127\\.0\\.0\\.1:${taken.addr.port}' is unavailable: `,
    ),
  );
});

/** One request on a connection of its own, so that the kernel may hand it to any thread. */
async function send(url: string, init: RequestInit = {}): Promise<Response> {
  const client = Deno.createHttpClient({});
  try {
    const response = await fetch(url, { ...init, client });
    const body = new Uint8Array(await response.arrayBuffer());
    return new Response(body.byteLength === 0 ? null : body, {
      status: response.status,
      headers: response.headers,
    });
  } finally {
    client.close();
  }
}

const ADD_SUB = JSON.stringify({
  inputs: [
    { name: "a", datatype: "FP32", shape: [1, 2], data: [1, 2] },
    { name: "b", datatype: "FP32", shape: [1, 2], data: [3, 4] },
  ],
});
const ADD_SUB_REPLY = {
  model_name: "AddSub",
  model_version: "1",
  outputs: [
    { name: "add", datatype: "FP32", shape: [1, 2], data: [4, 6] },
    { name: "sub", datatype: "FP32", shape: [1, 2], data: [-2, -2] },
  ],
};

/** The same checks, each on several connections of its own. */
/**
 * Three sequences of the Accumulator, interleaved, each request on a connection of its own (so
 * the threads take them in turn; sequence models are served through the main isolate, whose
 * engine keeps their clocks): each gets its own running totals.
 */
async function checkSequences(url: string): Promise<void> {
  const totals: Record<number, number[]> = { 1: [], 2: [], 3: [] };
  for (let step = 0; step < 4; step++) {
    await Promise.all([1, 2, 3].map(async (id) => {
      const response = await send(`${url}/v2/models/Accumulator/infer`, {
        method: "POST",
        headers: TOKEN,
        body: JSON.stringify({
          inputs: [{ name: "x", datatype: "INT32", shape: [1, 1], data: [id * (step + 1)] }],
          parameters: { sequence_id: id, sequence_start: step === 0, sequence_end: step === 3 },
        }),
      });
      const body = await response.json();
      assert.equal(response.status, 200, JSON.stringify(body));
      totals[id]!.push(body.outputs[0].data[0]);
    }));
  }
  assert.deepEqual(totals, { 1: [1, 3, 6, 10], 2: [2, 6, 12, 20], 3: [3, 9, 18, 30] });
}

async function checkServer(url: string): Promise<void> {
  const infer = `${url}/v2/models/AddSub/infer`;
  for (let round = 0; round < 8; round++) {
    // JSON tensors, decoded and encoded by whichever thread took the connection.
    const json = await send(infer, { method: "POST", headers: TOKEN, body: ADD_SUB });
    assert.equal(json.status, 200);
    assert.deepEqual(await json.json(), ADD_SUB_REPLY);

    // Binary tensors in and out.
    const header = new TextEncoder().encode(JSON.stringify({
      inputs: [
        { name: "a", datatype: "FP32", shape: [1, 2], parameters: { binary_data_size: 8 } },
        { name: "b", datatype: "FP32", shape: [1, 2], parameters: { binary_data_size: 8 } },
      ],
      outputs: [{ name: "add", parameters: { binary_data: true } }],
    }));
    const body = new Uint8Array(header.byteLength + 16);
    body.set(header);
    new DataView(body.buffer).setFloat32(header.byteLength, 1.5, true);
    new DataView(body.buffer).setFloat32(header.byteLength + 4, 2, true);
    new DataView(body.buffer).setFloat32(header.byteLength + 8, 3, true);
    new DataView(body.buffer).setFloat32(header.byteLength + 12, 4, true);
    const binary = await send(infer, {
      method: "POST",
      headers: { ...TOKEN, "inference-header-content-length": String(header.byteLength) },
      body,
    });
    assert.equal(binary.status, 200);
    const jsonLength = Number(binary.headers.get("inference-header-content-length"));
    const bytes = new Uint8Array(await binary.arrayBuffer());
    assert.deepEqual(JSON.parse(new TextDecoder().decode(bytes.subarray(0, jsonLength))), {
      model_name: "AddSub",
      model_version: "1",
      outputs: [{
        name: "add",
        datatype: "FP32",
        shape: [1, 2],
        parameters: { binary_data_size: 8 },
      }],
    });
    assert.deepEqual([...new Float32Array(bytes.slice(jsonLength).buffer)], [4.5, 6]);

    // Parameters, and headers forwarded as parameters (httpHeaderForwardPattern).
    const scaled = await send(`${url}/v2/models/ParamsAndHeaders/infer`, {
      method: "POST",
      headers: { ...TOKEN, header_divisor: "2" },
      body: JSON.stringify({
        parameters: { multiplier: 3 },
        inputs: [
          { name: "a", datatype: "FP32", shape: [1, 2], data: [1, 2] },
          { name: "b", datatype: "FP32", shape: [1, 2], data: [3, 4] },
        ],
      }),
    });
    assert.equal(scaled.status, 200);
    assert.deepEqual((await scaled.json()).outputs, [
      { name: "scaled_add", datatype: "FP32", shape: [1, 2], data: [6, 9] },
      { name: "scaled_sub", datatype: "FP32", shape: [1, 2], data: [-3, -3] },
    ]);

    // A gzip-compressed body.
    const zipped = await promisify(gzip)(new TextEncoder().encode(ADD_SUB));
    const compressed = await send(infer, {
      method: "POST",
      headers: { ...TOKEN, "content-encoding": "gzip" },
      body: new Uint8Array(zipped),
    });
    assert.equal(compressed.status, 200);
    assert.deepEqual(await compressed.json(), ADD_SUB_REPLY);

    // BYTES both ways.
    const upper = await send(`${url}/v2/models/Upper/infer`, {
      method: "POST",
      headers: TOKEN,
      body: JSON.stringify({
        inputs: [{ name: "text", datatype: "BYTES", shape: [1, 2], data: ["ab", "cd"] }],
      }),
    });
    assert.equal(upper.status, 200);
    assert.deepEqual((await upper.json()).outputs, [
      { name: "text", datatype: "BYTES", shape: [1, 2], data: ["AB", "CD"] },
    ]);

    // A large binary output: on the core, a result the main isolate lent to the response.
    const big = await send(`${url}/v2/models/Big/infer`, {
      method: "POST",
      headers: TOKEN,
      body: JSON.stringify({
        inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [round + 0.5] }],
        outputs: [{ name: "y", parameters: { binary_data: true } }],
      }),
    });
    assert.equal(big.status, 200);
    const bigLength = Number(big.headers.get("inference-header-content-length"));
    const values = new Float32Array((await big.arrayBuffer()).slice(bigLength));
    assert.equal(values.length, 32768);
    assert.ok(values.every((value) => value === round + 0.5), `round ${round}`);

    // Errors: the main isolate's words, whichever thread answers.
    const unknown = await send(`${url}/v2/models/Nope/infer`, {
      method: "POST",
      headers: TOKEN,
      body: ADD_SUB,
    });
    assert.equal(unknown.status, 404);
    assert.deepEqual(await unknown.json(), {
      error: "Request for unknown model: 'Nope' is not found",
    });
    const malformed = await send(infer, { method: "POST", headers: TOKEN, body: "{bad" });
    assert.equal(malformed.status, 400);
    assert.deepEqual(await malformed.json(), {
      error:
        "Unable to parse the request JSON: Expected property name or '}' in JSON at position 1 (line 1 column 2)",
    });
    const raw = await send(infer, {
      method: "POST",
      headers: { ...TOKEN, "inference-header-content-length": "0" },
      body: new Uint8Array(8),
    });
    assert.equal(raw.status, 400);
    assert.deepEqual(await raw.json(), {
      error:
        "Raw binary request (Inference-Header-Content-Length: 0) needs a model with exactly one input: model 'AddSub' has 2",
    });
    const noToken = await send(infer, { method: "POST", body: ADD_SUB });
    assert.equal(noToken.status, 401);
    await noToken.body?.cancel();

    // Forwarded whole: metadata, the repository index and generate (their bodies streamed to the
    // main isolate), and an unknown path.
    const metadata = await send(`${url}/v2/models/AddSub`);
    assert.equal(metadata.status, 200);
    assert.equal((await metadata.json()).name, "AddSub");
    const index = await send(`${url}/v2/repository/index`, {
      method: "POST",
      headers: TOKEN,
      body: JSON.stringify({ ready: true }),
    });
    assert.equal(index.status, 200);
    assert.deepEqual(await index.json(), [
      { name: "Accumulator", version: "1", state: "READY" },
      { name: "AddSub", version: "1", state: "READY" },
      { name: "Big", version: "1", state: "READY" },
      { name: "ParamsAndHeaders", version: "1", state: "READY" },
      { name: "Slow", version: "1", state: "READY" },
      { name: "Upper", version: "1", state: "READY" },
    ]);
    const generated = await send(`${url}/v2/models/AddSub/generate`, {
      method: "POST",
      headers: TOKEN,
      body: JSON.stringify({ a: [1], b: [2] }),
    });
    assert.equal(generated.status, 200);
    assert.deepEqual(await generated.json(), {
      add: 3,
      model_name: "AddSub",
      model_version: "1",
      sub: -1,
    });
    const missing = await send(`${url}/v3/nothing`);
    assert.equal(missing.status, 404);
    assert.deepEqual(await missing.json(), { error: "Not Found" });

    // CORS (httpCorsOrigins): a preflight for inference, answered by the thread itself, and one
    // for the metadata, which it forwards; answers from either carry the origin.
    for (const path of ["/v2/models/AddSub/infer", "/v2/models/AddSub"]) {
      const preflight = await send(`${url}${path}`, {
        method: "OPTIONS",
        headers: {
          origin: APP,
          "access-control-request-method": path.endsWith("infer") ? "POST" : "GET",
          "access-control-request-headers": "content-type, triton-access-token",
        },
      });
      assert.equal(preflight.status, 204, path);
      assert.equal(preflight.headers.get("access-control-allow-origin"), APP);
      assert.equal(
        preflight.headers.get("access-control-allow-headers"),
        "content-type, triton-access-token",
      );
    }
    const crossOrigin = await send(infer, {
      method: "POST",
      headers: { ...TOKEN, origin: APP },
      body: ADD_SUB,
    });
    assert.deepEqual(await crossOrigin.json(), ADD_SUB_REPLY);
    assert.equal(crossOrigin.headers.get("access-control-allow-origin"), APP);
    assert.equal(crossOrigin.headers.get("vary"), "Origin");
    const forwarded = await send(`${url}/v2/models/AddSub`, { headers: { origin: APP } });
    await forwarded.body?.cancel();
    assert.equal(forwarded.headers.get("access-control-allow-origin"), APP);
    assert.equal(forwarded.headers.get("vary"), "Origin");
  }
}

/**
 * A client that leaves mid-request: the model, in the main isolate, sees its request's signal
 * abort, whether the thread handed the request over (the built-in engine) or submitted it to the
 * core itself. Reads the server's stdout until the model's lines come.
 */
async function checkDisconnect(
  url: string,
  lines: ReadableStreamDefaultReader<string>,
): Promise<void> {
  let out = "";
  const until = async (text: string): Promise<void> => {
    while (!out.includes(text)) {
      const { value, done } = await watchdog(lines.read(), `the server's line ${text}`);
      if (done) throw new Error(`The server's stdout ended without ${text}: ${out}`);
      out += value;
    }
  };
  for (let i = 0; i < 3; i++) {
    // A raw socket closed mid-request is a deterministic disconnect.
    const connection = await Deno.connect({
      hostname: "127.0.0.1",
      port: Number(new URL(url).port),
    });
    const body = JSON.stringify({
      inputs: [{ name: "x", datatype: "FP32", shape: [1], data: [1] }],
    });
    await connection.write(new TextEncoder().encode(
      `POST /v2/models/Slow/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nTriton-Access-Token: t0k3n\r\n` +
        `Content-Length: ${body.length}\r\n\r\n${body}`,
    ));
    await until('{"running":true}');
    connection.close();
    await until('{"aborted":true}');
    out = "";
  }
}

/**
 * After an unload (forwarded to the main isolate), every thread answers an inference request
 * for the model as the main isolate does, though a thread submitting to the core had checked it.
 */
async function checkUnloaded(url: string): Promise<void> {
  const unload = await send(`${url}/v2/repository/models/AddSub/unload`, { method: "POST" });
  assert.equal(unload.status, 200);
  for (let i = 0; i < 8; i++) {
    const response = await send(`${url}/v2/models/AddSub/infer`, {
      method: "POST",
      headers: TOKEN,
      body: ADD_SUB,
    });
    assert.deepEqual([response.status, await response.json()], [503, {
      error: "Request for unknown model: 'AddSub' has no available versions",
    }]);
  }
}

for (const engine of ENGINES) {
  Deno.test(`${engine} engine: three HTTP threads answer as one (httpThreadCount 3)`, async () => {
    const { child, firstLine, lines, log } = await spawnServer([
      "run",
      "-A",
      "--unstable-net",
      SERVER,
      engine,
    ]);
    try {
      const { url } = JSON.parse(firstLine) as { url: string };
      await watchdog(checkServer(url), "the requests");
      await watchdog(checkSequences(url), "the sequences");
      await checkDisconnect(url, lines);
      await watchdog(checkUnloaded(url), "the requests after an unload");
    } finally {
      await child.stdin.close();
    }
    let rest = "";
    for (;;) {
      const { value, done } = await watchdog(lines.read(), "the server's last line");
      if (done) break;
      rest += value;
    }
    const status = await watchdog(child.status, "the server's exit");
    const text = await log;
    assert.equal(status.code, 0, text);
    assert.deepEqual(JSON.parse(rest.trim().split("\n").at(-1)!), { lent: 0 });
    // On the core, each thread submits inference requests to it itself.
    assert.equal(
      text.split("\n").filter((line) =>
        line.endsWith("] Inference requests go straight to the Triton core")
      ).length,
      engine === "triton" ? 3 : 0,
      text,
    );
    // Each thread took some of the 121 connections (the kernel spreads them by address and port);
    // the main isolate does not listen, and logs only the requests the threads forward.
    for (const source of ["triton/http1]", "triton/http2]", "triton/http3]"]) {
      assert.ok(
        text.includes(`${source} HTTP request: POST /v2/models/AddSub/infer`),
        `no inference request logged by ${source}:\n${text}`,
      );
    }
  });
}

const SHUTDOWN_SERVER = new URL("./_shutdown_server.ts", import.meta.url).pathname;

for (const engine of ENGINES) {
  Deno.test(`${engine} engine: SIGTERM with requests in flight on every HTTP thread ends the server`, async () => {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--unstable-net", SHUTDOWN_SERVER, engine, "main", "2"],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const stdout = new Response(child.stdout).text();
    const stderr = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
    let log = "";
    try {
      while (!/listening at (http:\/\/\S+)/.test(log)) {
        const { value, done } = await watchdog(stderr.read(), "the server to listen");
        if (done) throw new Error(`The server exited before it served: ${log}`);
        log += value;
      }
      const url = log.match(/listening at (http:\/\/\S+)/)![1]!;
      // Sixteen connections: the first request hangs the one instance, the others queue, and
      // both threads hold some (all on one thread: one chance in 2^15).
      const replies = Array.from({ length: 16 }, () =>
        send(`${url}/v2/models/Hang/infer`, {
          method: "POST",
          body: JSON.stringify({
            inputs: [{ name: "x", datatype: "FP32", shape: [1], data: [1] }],
          }),
        }).then(async (response) => [response.status, await response.json()]));
      while ((log.match(/HTTP request: POST \/v2\/models\/Hang\/infer/g) ?? []).length < 16) {
        const { value, done } = await watchdog(stderr.read(), "the requests to arrive");
        if (done) break;
        log += value;
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
      child.kill("SIGTERM");
      for (const reply of await watchdog(Promise.all(replies), "the replies")) {
        assert.deepEqual(reply, [503, { error: "Server stopped before the request completed" }]);
      }
      const status = await watchdog(child.status, "the process to exit");
      for (;;) {
        const { value, done } = await watchdog(stderr.read(), "the server's log");
        if (done) break;
        log += value;
      }
      assert.equal(status.code, 0, log);
      assert.match(await stdout, /served/);
      assert.match(log, /triton\/http2\] HTTP request: POST \/v2\/models\/Hang\/infer/);
    } finally {
      try {
        child.kill("SIGKILL");
      } catch {
        // Already exited.
      }
    }
  });
}
