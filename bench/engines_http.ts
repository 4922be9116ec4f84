/**
 * Engine benchmark (issue 3): DenoTriton serving `examples/add_sub` on the built-in engine and on
 * the Triton core, each driven over HTTP by the same closed-loop load generator in one run, with
 * a bare `Deno.serve` JSON echo of the same body as the ceiling (what one Deno thread serves
 * when it only parses and writes the JSON).
 *
 * Each server runs in its own subprocess (`--serve <server>`) so the load generator does not share
 * its event loop. All are up at once and take turns, in a rotating order, at each level of each
 * round (concurrency 1 and 8 by default, a fixed duration after a warm-up), so that a change in a
 * shared machine's load falls on all of them; each keeps its median round. Two clients:
 * `identity` sends `accept-encoding: identity` (as tritonclient and perf_analyzer do), `fetch`
 * sends what a plain `fetch()` sends (`accept-encoding: gzip, deflate, br`, like browsers and
 * Python requests). Prints requests/s and p50/p99 latency, the core/builtin
 * ratio and each engine's share of the ceiling, and writes the tables to
 * `bench/results/engines-<date>.md`.
 *
 * Usage: `deno task bench:engines [--duration 5] [--warmup 1] [--concurrency 1,8]
 * [--client-processes 1] [--servers echo,builtin,triton] [--clients identity,fetch] [--rounds 3]
 * [--http-threads 1] [--elements 8] [--queue-delay-us 100] [--settle 8]
 * [--out bench/results/engines-<date>.md]`
 *
 * `--settle S` drives each server S seconds at the run's highest load before the first round:
 * V8 optimizes a server's code on helper threads while it serves, and with a one-second warm-up
 * its background compiler still ran through the measured windows (about 0.3 s of CPU in 3 s
 * measured on the built-in engine, 0.6 s with two HTTP threads, on the 2-core VM); the report's
 * "V8 helpers" column shows what remains.
 *
 * `--elements N` sends N elements per input tensor (8 by default). `--queue-delay-us N` binds
 * add_sub with that dynamic-batching queue delay instead of its 100 µs: at 0 the engines' own
 * cost per request shows without the wait for more requests (which bounds c=1 by itself).
 * `--http-threads N` serves both engines with `httpThreadCount: N` (their subprocesses then run
 * with `--unstable-net`, which that needs), and the echo on N Workers sharing the port.
 * `--client-processes 1,4,8` spreads the load over that many client processes, each running
 * `--concurrency` closed loops and all starting at the same moment: on a host with many cores one
 * client process saturates before the server does (issue 16 measures "8 clients × 16" that way).
 * `--out` names the results file.
 *
 * @module
 */

import { Triton } from "../mod.ts";
import { bindAddSub } from "../examples/add_sub/model.ts";
import type { EngineKind } from "../src/engine/engine.ts";
import { cpuSeconds, firstLine, threadsCpuSeconds } from "./process.ts";
import { flag, option } from "./args.ts";
import { formatWritten } from "./report.ts";

/** What serves: an engine, or the bare `Deno.serve` echo (the ceiling). */
type Server = EngineKind | "echo";

/** How the client asks: `accept-encoding: identity`, or a plain `fetch()`'s default headers. */
type ClientMode = "identity" | "fetch";

const SERVER_NAMES: Record<Server, string> = {
  echo: "Deno.serve echo (ceiling)",
  builtin: "built-in",
  triton: "Triton core",
};

/** One measured window of a load level. */
interface MeasuredWindow {
  server: Server;
  client: ClientMode;
  /** Client processes sharing the load, each with `concurrency` closed loops. */
  processes: number;
  concurrency: number;
  requests: number;
  errors: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Responses that came back with a `content-encoding`. */
  compressed: number;
  /**
   * The server process's CPU time (every thread, user + system) per request, in µs: less
   * sensitive to other load on a shared machine than req/s. NaN where `/proc` is missing.
   */
  cpuUsPerRequest: number;
  /** The same for the server's main thread alone. */
  mainCpuUsPerRequest: number;
  /**
   * The same for V8's helper threads (background compiler, parallel garbage collection): while
   * it is large, V8 is still optimizing the code, and the window is not the steady state.
   */
  helperCpuUsPerRequest: number;
}

/** A row of the report: one server's median window at a load level, over the rounds. */
interface Measurement extends MeasuredWindow {
  /** The lowest and highest req/s of the rounds this row was chosen from. */
  rpsRange: [number, number];
}

/** `httpThreadCount` of the DenoTriton servers. */
const HTTP_THREADS = Number(flag("http-threads", "1"));
/** The name (cut to 15 characters by Linux) of V8's helper threads in a Deno process. */
const V8_HELPERS = "V8 DefaultWorke";
/** add_sub's queue delay in µs (`--queue-delay-us`). */
const QUEUE_DELAY_US = Number(flag("queue-delay-us", "100"));

async function serve(server: Server): Promise<void> {
  if (server === "echo" && HTTP_THREADS > 1) {
    // The same echo on as many Workers as DenoTriton's HTTP threads, sharing the port.
    let port = 0;
    const workers: Worker[] = [];
    for (let index = 1; index <= HTTP_THREADS; index++) {
      const worker = new Worker(new URL("./echo_thread.ts", import.meta.url), {
        type: "module",
        name: `http${index}`,
      });
      workers.push(worker);
      const listening = new Promise<number>((resolve) => {
        worker.onmessage = (event: MessageEvent<number>) => resolve(event.data);
      });
      worker.postMessage({ port });
      port = await listening;
    }
    console.log(JSON.stringify({ url: `http://127.0.0.1:${port}`, engine: "echo" }));
    for await (const _ of Deno.stdin.readable) { /* wait for EOF */ }
    for (const worker of workers) worker.terminate();
    return;
  }
  if (server === "echo") {
    // The ceiling: read the same body, parse it and answer it as JSON, nothing else.
    const echo = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      async (request) =>
        new Response(JSON.stringify(await request.json()), {
          headers: { "content-type": "application/json" },
        }),
    );
    console.log(JSON.stringify({ url: `http://127.0.0.1:${echo.addr.port}`, engine: "echo" }));
    for await (const _ of Deno.stdin.readable) { /* wait for EOF */ }
    await echo.shutdown();
    return;
  }
  const triton = new Triton({
    engine: server,
    config: {
      httpAddress: "127.0.0.1",
      httpPort: 0,
      allowGrpc: false,
      allowMetrics: false,
      logFile: "/dev/null",
      httpThreadCount: HTTP_THREADS,
    },
  });
  await bindAddSub(triton, { maxQueueDelayMicroseconds: QUEUE_DELAY_US });
  await triton.run();
  console.log(JSON.stringify({ url: triton.urls.http, engine: triton.engineKind }));
  // The parent closes stdin to stop the server.
  for await (const _ of Deno.stdin.readable) { /* wait for EOF */ }
  await triton.stop();
}

/** Elements per input tensor (`--elements`): 8 by default, a small request. */
const ELEMENTS = Number(flag("elements", "8"));

const BODY = JSON.stringify({
  inputs: [
    {
      name: "a",
      datatype: "FP32",
      shape: [1, ELEMENTS],
      data: Array.from({ length: ELEMENTS }, (_, i) => i + 1),
    },
    {
      name: "b",
      datatype: "FP32",
      shape: [1, ELEMENTS],
      data: Array.from({ length: ELEMENTS }, (_, i) => ELEMENTS - i),
    },
  ],
});

interface Reply {
  ok: boolean;
  compressed: boolean;
}

async function inferOnce(url: string, server: Server, client: ClientMode): Promise<Reply> {
  const response = await fetch(`${url}/v2/models/AddSub/infer`, {
    method: "POST",
    // identity: like tritonclient and perf_analyzer. fetch: fetch()'s own default headers, which
    // ask for gzip, deflate and br (it decompresses what comes back).
    headers: client === "identity"
      ? { "content-type": "application/json", "accept-encoding": "identity" }
      : { "content-type": "application/json" },
    body: BODY,
  });
  const text = await response.text();
  return {
    ok: response.status === 200 && (server === "echo" || text.includes('"add"')),
    compressed: response.headers.has("content-encoding"),
  };
}

/** What one load window gave. */
interface Load {
  /** Latency of each answered request, in ms. */
  latencies: number[];
  errors: number;
  compressed: number;
  /** Seconds the window lasted. */
  elapsed: number;
  /** Answered requests per client process, where there were several. */
  perProcess?: number[];
}

/** Where the load goes: a server's URL, and which server it is. */
interface Target {
  url: string;
  server: Server;
}

/**
 * Closed loop: `level.concurrency` workers each send the next request when the last one answered
 * (in this process, whatever `level.processes` says).
 */
async function drive(
  { url, server }: Target,
  { client, concurrency }: Level,
  seconds: number,
): Promise<Load> {
  const latencies: number[] = [];
  let errors = 0;
  let compressed = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < end) {
      const sent = performance.now();
      const reply = await inferOnce(url, server, client).catch(() => undefined);
      if (reply?.ok) latencies.push(performance.now() - sent);
      else errors++;
      if (reply?.compressed) compressed++;
    }
  }));
  return { latencies, errors, compressed, elapsed: (performance.now() - start) / 1000 };
}

/** How long the client processes get to start before their common start time, in ms. */
const CLIENT_START_MS = 1000;

/**
 * The same closed loop in `processes` client processes (this script with `--drive`), all starting
 * at one moment; their results merged. One process is this one.
 */
async function driveFrom(target: Target, level: Level, seconds: number): Promise<Load> {
  const { url, server } = target;
  const { client, processes, concurrency } = level;
  if (processes === 1) return await drive(target, level, seconds);
  const startAt = Date.now() + CLIENT_START_MS;
  const outputs = await Promise.all(
    Array.from({ length: processes }, () =>
      new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          import.meta.filename!,
          "--drive",
          url,
          "--servers",
          server,
          "--clients",
          client,
          "--concurrency",
          String(concurrency),
          "--duration",
          String(seconds),
          "--start-at",
          String(startAt),
        ],
        stdout: "piped",
        stderr: "inherit",
      }).output()),
  );
  const loads = outputs.map((output, i) => {
    if (!output.success) throw new Error(`Client process ${i + 1} of ${processes} failed`);
    return JSON.parse(new TextDecoder().decode(output.stdout)) as Load;
  });
  return {
    latencies: loads.flatMap((load) => load.latencies),
    errors: loads.reduce((sum, load) => sum + load.errors, 0),
    compressed: loads.reduce((sum, load) => sum + load.compressed, 0),
    // They ran side by side: the window is the longest of theirs.
    elapsed: Math.max(...loads.map((load) => load.elapsed)),
    perProcess: loads.map((load) => load.latencies.length),
  };
}

/** A client process (`--drive <url>`): wait for the common start, drive, print the load as JSON. */
async function driveChild(url: string): Promise<void> {
  const wait = Number(flag("start-at", "0")) - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  const load = await drive(
    { url, server: flag("servers", "builtin") as Server },
    {
      client: flag("clients", "identity") as ClientMode,
      processes: 1,
      concurrency: Number(flag("concurrency", "1")),
    },
    Number(flag("duration", "5")),
  );
  console.log(JSON.stringify(load));
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

/** A server subprocess, up and serving. */
interface RunningServer extends Target, AsyncDisposable {
  readonly pid: number;
}

/** Starts `server` in its own subprocess (`--serve`) and waits until it serves. */
async function startServer(server: Server): Promise<RunningServer> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      ...(HTTP_THREADS > 1 ? ["--unstable-net"] : []),
      import.meta.filename!,
      "--serve",
      server,
      "--http-threads",
      String(HTTP_THREADS),
      "--queue-delay-us",
      String(QUEUE_DELAY_US),
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const stop = async (): Promise<void> => {
    // The server stops when its stdin closes.
    await child.stdin.close().catch(() => {});
    lines.releaseLock();
    await child.stdout.cancel().catch(() => {});
    await child.status;
  };
  const line = await firstLine(lines);
  if (line === undefined) {
    await stop();
    throw new Error(`The ${server} server exited before it served`);
  }
  const { url } = JSON.parse(line) as { url: string };
  if (server !== "echo") {
    try {
      await checkQueueDelay(server, url);
    } catch (error) {
      await stop();
      throw error;
    }
  }
  return { server, url, pid: child.pid, [Symbol.asyncDispose]: stop };
}

/** Fails unless the server batches add_sub with the queue delay this run reports. */
async function checkQueueDelay(server: Server, url: string): Promise<void> {
  const response = await fetch(`${url}/v2/models/AddSub/config`);
  const config = await response.json() as {
    dynamic_batching?: { max_queue_delay_microseconds?: number | string };
  };
  // Triton's JSON writes 64-bit integers as strings, and leaves out a field that is 0.
  const used = Number(config.dynamic_batching?.max_queue_delay_microseconds ?? 0);
  if (used !== QUEUE_DELAY_US) {
    throw new Error(
      `The ${server} server batches add_sub with a ${used} µs queue delay, not ${QUEUE_DELAY_US}`,
    );
  }
}

/** One load level: the client, how many client processes, the closed loops in each. */
interface Level {
  client: ClientMode;
  processes: number;
  concurrency: number;
}

/** Warms `running` up at `level`, then measures one window of it. */
async function measureLevel(
  running: RunningServer,
  level: Level,
  seconds: number,
  warmup: number,
): Promise<MeasuredWindow> {
  const { server, pid } = running;
  const { client, processes, concurrency } = level;
  await driveFrom(running, level, warmup);
  const cpuBefore = cpuSeconds(`/proc/${pid}/stat`);
  // The main thread's own share (its task id is the process id): the engine's thread, and with
  // httpThreadCount 1 the HTTP front end's too.
  const mainBefore = cpuSeconds(`/proc/${pid}/task/${pid}/stat`);
  const helpersBefore = threadsCpuSeconds(pid, V8_HELPERS);
  const { latencies, errors, compressed, elapsed, perProcess } = await driveFrom(
    running,
    level,
    seconds,
  );
  const cpu = cpuSeconds(`/proc/${pid}/stat`) - cpuBefore;
  const mainCpu = cpuSeconds(`/proc/${pid}/task/${pid}/stat`) - mainBefore;
  const helperCpu = threadsCpuSeconds(pid, V8_HELPERS) - helpersBefore;
  latencies.sort((a, b) => a - b);
  const row: MeasuredWindow = {
    server,
    client,
    processes,
    concurrency,
    requests: latencies.length,
    errors,
    seconds: elapsed,
    rps: latencies.length / elapsed,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    compressed,
    cpuUsPerRequest: cpu * 1e6 / Math.max(1, latencies.length + errors),
    mainCpuUsPerRequest: mainCpu * 1e6 / Math.max(1, latencies.length + errors),
    helperCpuUsPerRequest: helperCpu * 1e6 / Math.max(1, latencies.length + errors),
  };
  console.log(
    `${server.padEnd(8)} ${client.padEnd(8)} ${processes}×c=${concurrency}: ${
      row.rps.toFixed(0)
    } req/s, ` +
      `p50 ${row.p50Ms.toFixed(2)} ms, p99 ${row.p99Ms.toFixed(2)} ms, ${errors} errors, ` +
      `${compressed} compressed, server CPU ${row.cpuUsPerRequest.toFixed(0)} µs/req ` +
      `(main thread ${row.mainCpuUsPerRequest.toFixed(0)}, V8 helpers ${
        row.helperCpuUsPerRequest.toFixed(0)
      })` +
      (perProcess === undefined ? "" : `; by client process ${perProcess.join(" + ")}`),
  );
  return row;
}

/**
 * The window of median req/s among one server's rounds at one level (of an even count, the
 * higher of the middle two), with the range of all of them.
 */
function medianWindow(windows: readonly MeasuredWindow[]): Measurement {
  const sorted = [...windows].sort((a, b) => a.rps - b.rps);
  return {
    ...sorted[Math.floor(sorted.length / 2)]!,
    rpsRange: [sorted[0]!.rps, sorted.at(-1)!.rps],
  };
}

/** The load level a row was measured at: client, client processes, concurrency. */
function levelOf(row: MeasuredWindow): string {
  return `${row.client} ${row.processes} ${row.concurrency}`;
}

function ratio(a: number | undefined, b: number | undefined): string {
  return a === undefined || b === undefined ? "—" : (a / b).toFixed(2);
}

function report(
  rows: readonly Measurement[],
  seconds: number,
  warmup: number,
  settle: number,
  rounds: number,
): string {
  const date = new Date().toISOString();
  const out = [
    `# DenoTriton engines over HTTP: built-in vs Triton core vs a bare Deno.serve`,
    "",
    `Run ${date} with \`deno task bench:engines\` (Deno ${Deno.version.deno}, ${Deno.build.os}/${Deno.build.arch}, ` +
    `${navigator.hardwareConcurrency} CPUs, httpThreadCount ${HTTP_THREADS}). Model: \`examples/add_sub\` (FP32 [1, ${ELEMENTS}] a and b, ` +
    `dynamic batching up to 128, ${QUEUE_DELAY_US} µs queue delay). ` +
    "The ceiling is a bare `Deno.serve` that " +
    "parses the same request JSON and answers it as JSON. Each server runs in its own " +
    "subprocess, all of them up at once; a closed-loop HTTP/JSON load generator (in as many " +
    "client processes as the table says, each with that concurrency, started together). " +
    `${rounds} rounds; in each, the servers take turns at each level in a rotating order, ` +
    `${warmup} s warm-up then ${seconds} s measured, and each row is the server's round of ` +
    "median req/s at that level (of an even count, the higher of the middle two), with the range " +
    "of its rounds. Clients: " +
    "`identity` sends `accept-encoding: identity` (as tritonclient and perf_analyzer do); `fetch` " +
    "sends a plain `fetch()`'s default headers (`accept-encoding: gzip, deflate, br`). Latency is " +
    "client-side, per request; `compressed` counts responses that came back compressed. Server " +
    "CPU is the server process's user + system time (all threads) per request during the " +
    "measured window (Linux `/proc`, 10 ms ticks): less sensitive to other load on a shared " +
    "machine than req/s; main thread CPU is the share of the server's main thread alone: the " +
    "engine's thread, and with `httpThreadCount` 1 the HTTP front end's too (above 1 the front " +
    "end runs on that many Workers); V8 helpers CPU is that of V8's helper threads (its " +
    "background compiler and parallel garbage collection). " +
    `Before the first round each server was driven ${settle} s at the highest concurrency, so that ` +
    "V8 has optimized its code before anything is measured (with one second, its background " +
    "compiler still ran during the measured windows, counted in the server's CPU). " +
    (HTTP_THREADS > 1
      ? `The echo runs on ${HTTP_THREADS} Workers sharing the port, as the HTTP threads do.`
      : ""),
    "",
    "| server | client | client processes | concurrency (each) | requests | errors | compressed | req/s | req/s of the rounds | p50 ms | p99 ms | server CPU µs/req | main thread CPU µs/req | V8 helpers CPU µs/req |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...rows.map((r) =>
      `| ${
        SERVER_NAMES[r.server]
      } | ${r.client} | ${r.processes} | ${r.concurrency} | ${r.requests} | ${r.errors} | ` +
      `${r.compressed} | ${r.rps.toFixed(0)} | ` +
      `${r.rpsRange[0].toFixed(0)}–${r.rpsRange[1].toFixed(0)} | ` +
      `${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} | ` +
      `${Number.isNaN(r.cpuUsPerRequest) ? "—" : r.cpuUsPerRequest.toFixed(0)} | ` +
      `${Number.isNaN(r.mainCpuUsPerRequest) ? "—" : r.mainCpuUsPerRequest.toFixed(0)} | ` +
      `${Number.isNaN(r.helperCpuUsPerRequest) ? "—" : r.helperCpuUsPerRequest.toFixed(0)} |`
    ),
    "",
    "| client | client processes | concurrency (each) | req/s core/builtin | p50 core/builtin | " +
    "p99 core/builtin | builtin/ceiling | core/ceiling | CPU/req core/builtin | " +
    "CPU/req builtin/ceiling |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  const levels = [...new Set(rows.map((r) => levelOf(r)))];
  for (const level of levels) {
    const find = (server: Server): Measurement | undefined =>
      rows.find((r) => r.server === server && levelOf(r) === level);
    const builtin = find("builtin");
    const core = find("triton");
    const echo = find("echo");
    const { client, processes, concurrency } = (builtin ?? core ?? echo)!;
    out.push(
      `| ${client} | ${processes} | ${concurrency} | ${ratio(core?.rps, builtin?.rps)} | ` +
        `${ratio(core?.p50Ms, builtin?.p50Ms)} | ${ratio(core?.p99Ms, builtin?.p99Ms)} | ` +
        `${ratio(builtin?.rps, echo?.rps)} | ${ratio(core?.rps, echo?.rps)} | ` +
        `${ratio(core?.cpuUsPerRequest, builtin?.cpuUsPerRequest)} | ` +
        `${ratio(builtin?.cpuUsPerRequest, echo?.cpuUsPerRequest)} |`,
    );
  }
  return out.join("\n") + "\n";
}

if (import.meta.main) {
  const served = flag("serve", "");
  const driven = option("drive");
  if (served !== "") {
    await serve(served as Server);
  } else if (driven !== undefined) {
    await driveChild(driven);
  } else {
    const seconds = Number(flag("duration", "5"));
    const warmup = Number(flag("warmup", "1"));
    const settle = Number(flag("settle", "8"));
    const levels = flag("concurrency", "1,8").split(",").map(Number);
    const processLevels = flag("client-processes", "1").split(",").map(Number);
    for (const processes of processLevels) {
      if (!Number.isInteger(processes) || processes < 1) {
        throw new Error(`Bad --client-processes '${processes}': expected whole numbers from 1`);
      }
    }
    const rounds = Number(flag("rounds", "3"));
    // `--engines` is the older name of `--servers`.
    const servers = flag("servers", flag("engines", "echo,builtin,triton")).split(",") as Server[];
    const clients = flag("clients", "identity,fetch").split(",") as ClientMode[];
    for (const server of servers) {
      if (!(server in SERVER_NAMES)) throw new Error(`Unknown server '${server}'`);
    }
    for (const client of clients) {
      if (client !== "identity" && client !== "fetch") {
        throw new Error(`Unknown client '${client}': expected identity or fetch`);
      }
    }
    // The machine is shared and noisy. All servers are up at once and take turns at each level,
    // in a rotating order, so that a change in the machine's load falls on all of them; each
    // (server, level) then keeps its median round.
    const levelList: Level[] = clients.flatMap((client) =>
      processLevels.flatMap((processes) =>
        levels.map((concurrency) => ({ client, processes, concurrency }))
      )
    );
    const windows = new Map<string, MeasuredWindow[]>();
    {
      await using stack = new AsyncDisposableStack();
      const running: RunningServer[] = [];
      for (const server of servers) running.push(stack.use(await startServer(server)));
      // V8 optimizes a server's code while it serves, on helper threads whose CPU counts in the
      // server's: each is driven until that has settled (see the report's text).
      const hardest = levelList.reduce((a, b) =>
        b.processes * b.concurrency > a.processes * a.concurrency ? b : a
      );
      for (const server of running) await driveFrom(server, hardest, settle);
      for (let round = 0; round < rounds; round++) {
        for (const level of levelList) {
          for (let turn = 0; turn < running.length; turn++) {
            const row = await measureLevel(
              running[(turn + round) % running.length]!,
              level,
              seconds,
              warmup,
            );
            const key = `${row.server} ${levelOf(row)}`;
            const seen = windows.get(key);
            if (seen === undefined) windows.set(key, [row]);
            else seen.push(row);
          }
        }
      }
    }
    const rows = [...windows.values()].map(medianWindow);
    rows.sort((a, b) =>
      clients.indexOf(a.client) - clients.indexOf(b.client) ||
      servers.indexOf(a.server) - servers.indexOf(b.server) || a.processes - b.processes ||
      a.concurrency - b.concurrency
    );
    const text = report(rows, seconds, warmup, settle, rounds);
    console.log(`\n${text}`);
    const path = option("out") ??
      new URL(`./results/engines-${new Date().toISOString().slice(0, 10)}.md`, import.meta.url)
        .pathname;
    await Deno.writeTextFile(path, text);
    await formatWritten([path]);
    console.log(`Written to ${path}`);
  }
}
