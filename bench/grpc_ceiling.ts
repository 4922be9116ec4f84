/**
 * What gRPC can carry under Deno (issue 16): identity float32[1,048,576] over gRPC, driven by
 * perf_analyzer, on PyTriton, on DenoTriton's two engines, and on bare servers that only echo each
 * request's raw contents back (the ceilings). An echo has no engine; it gathers each request with
 * one copy and encodes each response with one copy into a reused buffer, as the front end does. So
 * it shows how far a server on that HTTP/2 layer can go on this machine, and how much of that
 * DenoTriton keeps.
 *
 * All servers are up at once and take turns, in a rotating order, at each concurrency of each
 * round, so that a change in the machine's load falls on all of them; each (server, concurrency)
 * keeps the median of its rounds. Besides infer/s it reports each server's CPU per inference: the
 * CPU time of its whole process tree over the turn, divided by the inferences perf_analyzer
 * counted in that turn's windows (approximate, alike for every server).
 *
 * There are two echoes: one on `node:http2` (`echo`, tuned by `node_http2_tuning.ts`), and one on
 * the HTTP/2 session the gRPC front end serves with (`echo-h2`, `src/frontend/grpc/h2/`), which
 * reads into a reused buffer and writes large messages from the caller's memory.
 *
 * Usage: `deno task bench:grpc-ceiling [--rounds 3] [--concurrency 1,8,32]
 * [--servers pytriton,builtin,triton,echo,echo-h2] [--window 1500]
 * [--out bench/results/grpc-ceiling-<date>.md]`
 *
 * `--serve-echo <port> [--transport node|h2]` serves an echo alone (0: any free port, printed on
 * the first line), as the bench does in a subprocess of its own.
 *
 * @module
 */

import http2 from "node:http2";
import { Buffer } from "node:buffer";
import { codecs } from "../src/protocol/grpc_codec.ts";
import { BufferPool } from "../src/frontend/grpc/buffer_pool.ts";
import {
  CONNECTION_WINDOW_BYTES,
  STREAM_WINDOW_BYTES,
} from "../src/frontend/grpc/connection_tuning.ts";
import { tuneHttp2Server } from "./node_http2_tuning.ts";
import { Http2Server } from "../src/frontend/grpc/h2/server.ts";
import {
  AlignedMessageDecoder,
  MESSAGE_PREFIX_BYTES,
  writePrefix,
} from "../src/frontend/grpc/message_framing.ts";
import { median, type PerfResult, runPerf } from "./perf.ts";
import { firstLine, type ServerProcess, startServer, treeCpuSeconds } from "./process.ts";
import { formatWritten } from "./report.ts";
import { flag, option } from "./args.ts";
import { benchTools, commitOfTree, loadAverage, ROOT, serverCommand } from "./servers.ts";

/** The servers compared. */
type Server = "pytriton" | "builtin" | "triton" | "echo" | "echo-h2";

const TITLES: Record<Server, string> = {
  pytriton: "PyTriton",
  builtin: "DenoTriton built-in",
  triton: "DenoTriton Triton core",
  echo: "node:http2 echo (ceiling)",
  "echo-h2": "Deno.listen HTTP/2 echo (ceiling)",
};

/** The echoes, by the HTTP/2 layer under them. */
const ECHOES: Partial<Record<Server, "node" | "h2">> = { echo: "node", "echo-h2": "h2" };

const MODEL = "identity_large";
const ELEMENTS = 1048576;
const SERVICE = "/inference.GRPCInferenceService/";

// gRPC status codes the echo answers with.
const INVALID_ARGUMENT = 3;
const NOT_FOUND = 5;
const UNIMPLEMENTED = 12;

/** A gRPC failure the echo reports to its client. */
class CallError extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

/**
 * The echo's answers, by method: each returns the message after room left for the prefix.
 *
 * @param pool Where the buffers of inference responses come from.
 */
function echoMethods(pool: BufferPool): Record<string, (body: Uint8Array) => Uint8Array> {
  const headroom = { headroom: MESSAGE_PREFIX_BYTES };
  const tensor = (name: string) => ({ name, datatype: "FP32", shape: [ELEMENTS] });
  const configTensor = (name: string) => ({ name, data_type: "TYPE_FP32", dims: [ELEMENTS] });
  const model = (body: Uint8Array): void => {
    const name = codecs.ModelRef.decode(body).name;
    if (name !== MODEL) {
      throw new CallError(NOT_FOUND, `Unknown model '${name}': the echo serves ${MODEL}`);
    }
  };
  return {
    ServerLive: () => codecs.ServerLiveResponse.encode({ live: true }, headroom),
    ServerReady: () => codecs.ReadyResponse.encode({ ready: true }, headroom),
    ServerMetadata: () =>
      codecs.ServerMetadataResponse.encode(
        { name: "echo", version: "0", extensions: [] },
        headroom,
      ),
    ModelReady: (body) => {
      model(body);
      return codecs.ReadyResponse.encode({ ready: true }, headroom);
    },
    ModelMetadata: (body) => {
      model(body);
      return codecs.ModelMetadataResponse.encode({
        name: MODEL,
        versions: ["1"],
        platform: "echo",
        inputs: [tensor("x")],
        outputs: [tensor("y")],
      }, headroom);
    },
    ModelConfig: (body) => {
      model(body);
      return codecs.ModelConfigResponse.encode({
        config: {
          name: MODEL,
          max_batch_size: 0,
          input: [configTensor("x")],
          output: [configTensor("y")],
        },
      }, headroom);
    },
    ModelStatistics: () => codecs.ModelStatisticsResponse.encode({ model_stats: [] }, headroom),
    ModelInfer: (body) => {
      const request = codecs.ModelInferRequest.decode(body);
      if (request.model_name !== MODEL) {
        throw new CallError(
          NOT_FOUND,
          `Unknown model '${request.model_name}': the echo serves ${MODEL}`,
        );
      }
      const raw = request.raw_input_contents ?? [];
      if (raw.length !== 1 || raw[0]!.byteLength !== ELEMENTS * 4) {
        throw new CallError(
          INVALID_ARGUMENT,
          `The echo takes one raw input of ${ELEMENTS * 4} bytes, not ${raw.length} inputs`,
        );
      }
      return codecs.ModelInferResponse.encode({
        model_name: MODEL,
        model_version: "1",
        id: request.id ?? "",
        outputs: [tensor("y")],
        raw_output_contents: raw,
      }, { headroom: MESSAGE_PREFIX_BYTES, allocate: (bytes) => pool.take(bytes) });
    },
  };
}

/** The echo's answer to one call: a framed message, or a gRPC status. */
type EchoAnswer = { bytes: Uint8Array } | { code: number; message: string };

/** Answers one call of the echo: `message` is the request with its gRPC prefix. */
function answerEcho(
  methods: Record<string, (body: Uint8Array) => Uint8Array>,
  path: string,
  message: Uint8Array,
): EchoAnswer {
  const method = path.startsWith(SERVICE) ? methods[path.slice(SERVICE.length)] : undefined;
  if (method === undefined) {
    return { code: UNIMPLEMENTED, message: `The echo does not serve ${path}` };
  }
  if (message.byteLength < MESSAGE_PREFIX_BYTES || message[0] !== 0) {
    return { code: INVALID_ARGUMENT, message: "The echo takes one uncompressed message per call" };
  }
  try {
    return { bytes: writePrefix(method(message.subarray(MESSAGE_PREFIX_BYTES))) };
  } catch (error) {
    return {
      code: error instanceof CallError ? error.code : INVALID_ARGUMENT,
      message: error instanceof Error ? error.message : String(error),
    };
  }
}

/** Failure headers of a trailers-only answer. */
function failure(answer: { code: number; message: string }): [string, string][] {
  return [
    [":status", "200"],
    ["content-type", "application/grpc"],
    ["grpc-status", String(answer.code)],
    ["grpc-message", encodeURI(answer.message)],
  ];
}

/**
 * Serves the echo on `node:http2` until the process ends.
 *
 * @param port The port (0: any free one).
 * @returns The port it listens on.
 */
export async function serveEcho(port: number): Promise<{ port: number; close(): Promise<void> }> {
  const pool = new BufferPool();
  const methods = echoMethods(pool);
  const server = http2.createServer();
  tuneHttp2Server(server, false);
  server.on("stream", (stream: http2.ServerHttp2Stream, headers) => {
    const path = String(headers[":path"]);
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("error", () => {});
    stream.on("end", () => {
      // One copy gathers the message, as the front end's decoder does.
      const answer = answerEcho(methods, path, Buffer.concat(chunks));
      if (!("bytes" in answer)) {
        stream.respond(Object.fromEntries(failure(answer)), { endStream: true });
        return;
      }
      const { bytes } = answer;
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, {
        waitForTrailers: true,
      });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      // The pooled buffer is free once the stream has taken its bytes.
      stream.end(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), () => {
        pool.give(bytes);
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * Serves the echo on the gRPC front end's own HTTP/2 session (`Deno.listen`) until the process
 * ends.
 *
 * @param port The port (0: any free one).
 * @returns The port it listens on.
 */
export function serveEchoH2(port: number): { port: number; close(): Promise<void> } {
  const pool = new BufferPool();
  const methods = echoMethods(pool);
  const server = new Http2Server(Deno.listen({ hostname: "127.0.0.1", port }), (stream) => {
    const path = stream.headers.find(([name]) => name === ":path")?.[1] ?? "";
    // One copy gathers the message, with the front end's decoder (the session lends each piece).
    const decoder = new AlignedMessageDecoder(-1, undefined, true);
    const messages: Uint8Array[] = [];
    stream.ondata = (chunk) => messages.push(...decoder.write(chunk));
    stream.onend = () => {
      const answer = answerEcho(
        methods,
        path,
        messages.length === 1 ? messages[0]! : new Uint8Array(0),
      );
      if (!("bytes" in answer)) return stream.respond(failure(answer), true);
      stream.respond([[":status", "200"], ["content-type", "application/grpc"]]);
      stream.write(answer.bytes).then(() => pool.give(answer.bytes));
      stream.end([["grpc-status", "0"]]);
    };
  }, { streamWindow: STREAM_WINDOW_BYTES, connectionWindow: CONNECTION_WINDOW_BYTES });
  return {
    port: server.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(resolve);
        server.forceShutdown();
      }),
  };
}

/** A server taking turns. */
interface Running extends AsyncDisposable {
  readonly server: Server;
  /** perf_analyzer's `-u` for gRPC. */
  readonly url: string;
  /** The root of its process tree. */
  readonly pid: number;
}

/** One turn of one server at one concurrency. */
interface Turn {
  readonly result: PerfResult;
  /** Its process tree's CPU per inference, ms. */
  readonly cpuMs: number;
}

/** Starts an echo in a subprocess of its own (this file with `--serve-echo 0`). */
async function startEcho(server: Server, transport: "node" | "h2"): Promise<Running> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--config",
      `${ROOT}/deno.json`,
      new URL(import.meta.url).pathname,
      "--serve-echo",
      "0",
      "--transport",
      transport,
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const line = await firstLine(lines);
  if (line === undefined) throw new Error("The echo server ended before it listened");
  const port = Number(line.match(/listening on (\d+)/)?.[1]);
  if (!Number.isInteger(port)) throw new Error(`The echo server said '${line}'`);
  // Whatever else it prints is drained, so it never blocks on a full pipe.
  const drained = (async () => {
    while (!(await lines.read()).done) { /* drain */ }
  })();
  return {
    server,
    url: `127.0.0.1:${port}`,
    pid: child.pid,
    async [Symbol.asyncDispose](): Promise<void> {
      try {
        child.kill("SIGTERM");
      } catch {
        // Already gone.
      }
      await child.status;
      await drained;
    },
  };
}

/** Starts one server of the comparison. */
async function start(
  server: Server,
  python: string | undefined,
  libDir: string | undefined,
): Promise<Running> {
  if (server === "echo" || server === "echo-h2") return await startEcho(server, ECHOES[server]!);
  const process: ServerProcess = await startServer(
    serverCommand(server, { models: [MODEL], python, libDir }),
  );
  return {
    server,
    url: `127.0.0.1:${process.ports.grpc}`,
    pid: process.pid,
    [Symbol.asyncDispose]: () => process.stop(),
  };
}

/** The measured table, as Markdown. */
function report(
  servers: readonly Server[],
  levels: readonly number[],
  turns: ReadonlyMap<string, Turn[]>,
  facts: Readonly<Record<string, string>>,
  windowMs: number,
  rounds: number,
): string {
  const of = (server: Server, c: number) => turns.get(`${server} ${c}`) ?? [];
  const rate = (server: Server, c: number) =>
    median(of(server, c).map((turn) => turn.result.throughput));
  const cpu = (server: Server, c: number) => median(of(server, c).map((turn) => turn.cpuMs));
  const p50 = (server: Server, c: number) =>
    median(of(server, c).map((turn) => turn.result.p50Us / 1000));
  const fixed = (value: number, digits: number) =>
    Number.isFinite(value) ? value.toFixed(digits) : "—";
  const ratios: [Server, Server][] = [];
  for (const base of ["pytriton", "echo", "echo-h2"] as const) {
    if (!servers.includes(base)) continue;
    // Each other server against the base (PyTriton against the echo is the echo's row read
    // the other way).
    for (const server of servers) {
      if (server !== base && server !== "pytriton" && !(base !== "pytriton" && server in ECHOES)) {
        ratios.push([server, base]);
      }
    }
  }
  const short: Record<Server, string> = {
    pytriton: "PyTriton",
    builtin: "built-in",
    triton: "core",
    echo: "node:http2 echo",
    "echo-h2": "h2 echo",
  };
  const lines = [
    `# gRPC under Deno: identity float32[1,048,576] — ${facts.date}`,
    "",
    "Written by `deno task bench:grpc-ceiling` (`bench/grpc_ceiling.ts`). perf_analyzer sends each " +
    "4 MiB tensor as raw contents and reads it back; each cell is the median of " +
    `${rounds} round${
      rounds === 1 ? "" : "s"
    }, each round 3 windows of ${windowMs} ms (\`--measurement-interval ` +
    `${windowMs} -s 1000 --max-trials 3\`). All servers were up at once and took turns in a ` +
    "rotating order. Each echo (ceiling) gathers each request (one copy) and encodes its raw " +
    "contents back (one copy into a reused buffer), with no engine: the `node:http2` echo with " +
    "the front end's windows, the largest frame size and per-tick write coalescing " +
    "(`bench/node_http2_tuning.ts`), the h2 echo on the HTTP/2 session the front end serves gRPC " +
    "with (`src/frontend/grpc/h2/`). CPU ms per inference is each " +
    "server's process tree's CPU time over its turn divided by the inferences of that turn " +
    "(approximate, alike for all). perf_analyzer shares the machine's cores.",
    "",
    "|  |  |",
    "| --- | --- |",
    ...Object.entries(facts).map(([name, value]) => `| ${name} | ${value} |`),
    "",
    `| c | ${servers.map((s) => `${TITLES[s]} infer/s`).join(" | ")} | ${
      ratios.map(([a, b]) => `${short[a]} / ${short[b]}`).join(" | ")
    } |`,
    `| --: | ${servers.map(() => "--:").join(" | ")} | ${ratios.map(() => "--:").join(" | ")} |`,
    ...levels.map((c) =>
      `| ${c} | ${servers.map((s) => fixed(rate(s, c), 1)).join(" | ")} | ${
        ratios.map(([a, b]) => fixed(rate(a, c) / rate(b, c), 2)).join(" | ")
      } |`
    ),
    "",
    `| c | ${servers.map((s) => `${short[s]}: p50 ms, CPU ms/inference`).join(" | ")} |`,
    `| --: | ${servers.map(() => "--:").join(" | ")} |`,
    ...levels.map((c) =>
      `| ${c} | ${
        servers.map((s) => `${fixed(p50(s, c), 2)}, ${fixed(cpu(s, c), 2)}`).join(" | ")
      } |`
    ),
    "",
    "Each round's infer/s:",
    "",
    `| c | ${servers.map((s) => short[s]).join(" | ")} |`,
    `| --: | ${servers.map(() => "--:").join(" | ")} |`,
    ...levels.map((c) =>
      `| ${c} | ${
        servers.map((s) => of(s, c).map((turn) => turn.result.throughput.toFixed(1)).join(" / "))
          .join(" | ")
      } |`
    ),
    "",
  ];
  return lines.join("\n");
}

async function main(): Promise<number> {
  const rounds = Number(flag("rounds", "3"));
  const levels = flag("concurrency", "1,8,32").split(",").map(Number);
  const windowMs = Number(flag("window", "1500"));
  const servers = flag("servers", "pytriton,builtin,triton,echo,echo-h2").split(",") as Server[];
  for (const server of servers) {
    if (!(server in TITLES)) {
      console.error(
        `bench:grpc-ceiling: unknown server '${server}' (${Object.keys(TITLES).join(", ")})`,
      );
      return 1;
    }
  }
  if (
    !Number.isInteger(rounds) || rounds < 1 || levels.some((c) => !Number.isInteger(c) || c < 1)
  ) {
    console.error("bench:grpc-ceiling: --rounds and --concurrency take whole numbers from 1");
    return 1;
  }
  const tools = await benchTools(servers);
  if ("missing" in tools) {
    console.error(`bench:grpc-ceiling: cannot run PyTriton: ${tools.missing}`);
    return 1;
  }
  const { python, libDir, perfAnalyzer: pa } = tools;
  const facts: Record<string, string> = {
    date: new Date().toISOString().slice(0, 16).replace("T", " ") + " UTC",
    cores: String(navigator.hardwareConcurrency),
    deno: Deno.version.deno,
    "DenoTriton commit": await commitOfTree(),
    perf_analyzer: pa.version.split("\n")[0] ?? "",
    "load average at start": await loadAverage(),
  };
  const turns = new Map<string, Turn[]>();
  const measure = async (running: Running, concurrency: number, windows: number, ms: number) => {
    const cpuBefore = treeCpuSeconds(running.pid);
    const began = performance.now();
    const result = await runPerf({
      path: pa.path,
      env: pa.env,
      model: MODEL,
      url: running.url,
      protocol: "grpc",
      concurrency,
      windowMs: ms,
      windows,
      timeoutMs: 120_000,
    });
    const seconds = (performance.now() - began) / 1000;
    const cpuMs = (treeCpuSeconds(running.pid) - cpuBefore) * 1000 / (result.throughput * seconds);
    return { result, cpuMs };
  };
  {
    await using stack = new AsyncDisposableStack();
    const running: Running[] = [];
    for (const server of servers) {
      running.push(stack.use(await start(server, python, libDir)));
      console.log(`bench:grpc-ceiling: ${TITLES[server]} is up`);
    }
    // A warm-up at c=8 for each (not recorded; it may fail to settle, which does not matter).
    for (const server of running) await measure(server, 8, 3, 500).catch(() => undefined);
    for (let round = 0; round < rounds; round++) {
      for (const concurrency of levels) {
        for (let turn = 0; turn < running.length; turn++) {
          const server = running[(turn + round) % running.length]!;
          const measured = await measure(server, concurrency, 3, windowMs);
          const key = `${server.server} ${concurrency}`;
          turns.set(key, [...(turns.get(key) ?? []), measured]);
          console.log(
            `round ${round + 1}, c=${concurrency}, ${TITLES[server.server]}: ` +
              `${measured.result.throughput.toFixed(1)} infer/s, ` +
              `${measured.cpuMs.toFixed(2)} CPU ms/inference`,
          );
        }
      }
    }
  }
  facts["load average at end"] = await loadAverage();
  const text = report(servers, levels, turns, facts, windowMs, rounds);
  console.log(`\n${text}`);
  const path = option("out") ??
    `${ROOT}/bench/results/grpc-ceiling-${new Date().toISOString().slice(0, 10)}.md`;
  await Deno.writeTextFile(path, text);
  await formatWritten([path]);
  console.log(`Written to ${path}`);
  return 0;
}

if (import.meta.main) {
  const echoPort = option("serve-echo");
  if (echoPort !== undefined) {
    const { port } = option("transport") === "h2"
      ? serveEchoH2(Number(echoPort))
      : await serveEcho(Number(echoPort));
    console.log(`listening on ${port}`);
  } else {
    Deno.exit(await main());
  }
}
