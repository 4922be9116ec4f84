/**
 * `deno task bench:peers`: DenoTriton (built-in engine, Triton core) beside the servers a team
 * would pick instead — tritonserver 2.51 with the Python backend, FastAPI + uvicorn, LitServe,
 * BentoML and Ray Serve — serving the same models under one load generator, and perf_analyzer
 * where the server speaks KServe v2. Writes `bench/results/peers-<date>-<machine>.md`, `.svg`
 * and `.json`.
 *
 *     deno task bench:peers                         # everything (about 40 minutes on 2 cores)
 *     deno task bench:peers --quick                 # one short cell per server: a harness check
 *     deno task bench:peers --peers builtin,fastapi --models add_sub --out /tmp/x
 *
 * Options: `--peers a,b` (default: all), `--models a,b` (default: all), `--concurrencies 1,8`
 * (default: 1, 8, 32; 1 with `--quick`), `--out <dir>`, `--no-perf` (no perf_analyzer cells),
 * `--no-profile`.
 *
 * Setup it does itself: each Python peer's venv in `bench/peers/.venv/<peer>` with its pinned
 * packages (`bench/peers/peers.ts`), the Triton core (`deno task setup:triton`) and perf_analyzer
 * (as `deno task bench` finds it). A peer whose venv cannot be made fails the run.
 *
 * @module
 */

import { option } from "../args.ts";
import { type PerfResult, runPerf } from "../perf.ts";
import { profileWhile, topFrames } from "../profile.ts";
import { treeRssBytes } from "../process.ts";
import { formatWritten } from "../report.ts";
import { benchTools, commitOfTree, loadAverage } from "../servers.ts";
import type { LoadResult } from "./load.ts";
import { type ModelName, MODELS } from "./models.ts";
import {
  DENO_ENGINES,
  ensurePeerVenv,
  PEER_NAMES,
  type PeerName,
  PEERS,
  type PeerVenv,
  prepareTritonserverBackends,
  ROOT,
  WORK,
} from "./peers.ts";
import {
  goalOf,
  type JsonCell,
  otherPeers,
  type PeerFacts,
  type PeerProfile,
  peersChart,
  peersMarkdown,
  type PeersRun,
  type PerfCell,
  ratioOf,
  type ServerRun,
} from "./report.ts";
import { type PeerServer, processTree, startPeer, treePssBytes } from "./server.ts";

const quick = Deno.args.includes("--quick");
const peerNames = (option("peers")?.split(",") ?? [...PEER_NAMES]) as PeerName[];
for (const name of peerNames) {
  if (!(PEER_NAMES as readonly string[]).includes(name)) throw new Error(`Unknown peer '${name}'`);
}
const models =
  (option("models")?.split(",") ?? (quick ? ["identity_small"] : [...MODELS])) as ModelName[];
for (const model of models) {
  if (!(MODELS as readonly string[]).includes(model)) throw new Error(`Unknown model '${model}'`);
}
const outDir = option("out") ?? `${ROOT}/bench/results`;
const withPerf = !Deno.args.includes("--no-perf");
const withProfiles = !quick && !Deno.args.includes("--no-profile");

const CONCURRENCIES = option("concurrencies")?.split(",").map(Number) ?? (quick ? [1] : [1, 8, 32]);
const WINDOW_MS = quick ? 300 : 1500;
const WINDOWS = 3;
const WARMUP_MS = quick ? 200 : 1000;
const SERVER_WARMUP_MS = quick ? 0 : 2000;
/** The most close cells profiled per engine (each takes a server start and a cell). */
const MAX_PROFILES = 10;
/** A cell DenoTriton wins by less than this is profiled. */
const PROFILE_BELOW = 1.5;

const REQUESTS: Readonly<Record<string, string>> = {
  kserve: "KServe v2 JSON, `POST /v2/models/<model>/infer`",
  fields: 'named fields, `{"x": [...]}` → `{"y": [...]}`',
  bentoml: 'BentoML arrays, `{"x": [[...]]}` → `[[...]]`',
};

/** Runs the load generator (its own process) against one server for one cell. */
async function load(
  peer: PeerName,
  server: PeerServer,
  model: ModelName,
  concurrency: number,
  windowMs = WINDOW_MS,
  warmupMs = WARMUP_MS,
): Promise<LoadResult> {
  const spec = PEERS[peer];
  const result = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      `${ROOT}/bench/peers/load.ts`,
      "--port",
      String(server.ports.http),
      "--shape",
      spec.shape,
      "--path",
      spec.path(model),
      "--model",
      model,
      "--concurrency",
      String(concurrency),
      "--warmup-ms",
      String(warmupMs),
      "--window-ms",
      String(windowMs),
      "--windows",
      String(WINDOWS),
      "--pid",
      String(server.pid),
    ],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(1_200_000),
  }).output();
  const decoder = new TextDecoder();
  const stdout = decoder.decode(result.stdout).trim();
  if (!result.success) {
    throw new Error(`load generator failed: ${decoder.decode(result.stderr)}${stdout}`);
  }
  return JSON.parse(stdout.split("\n").at(-1)!) as LoadResult;
}

/** Samples a server's memory every 500 ms, keeping the peaks. */
function sampleMemory(pid: number): { stop(): { rss: number; pss: number } } {
  let rss = treeRssBytes(pid);
  let pss = treePssBytes(pid);
  const timer = setInterval(() => {
    rss = Math.max(rss, treeRssBytes(pid));
    pss = Math.max(pss, treePssBytes(pid));
  }, 500);
  return {
    stop(): { rss: number; pss: number } {
      clearInterval(timer);
      return { rss: Math.max(rss, treeRssBytes(pid)), pss: Math.max(pss, treePssBytes(pid)) };
    },
  };
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function logLine(line: string): void {
  console.log(`bench:peers: ${line}`);
}

function formatLoad(r: LoadResult): string {
  return `${r.throughput.toFixed(1)} req/s ±${(r.spread * 100).toFixed(0)}%, p50 ${r.p50Us} us, ` +
    `p99 ${r.p99Us} us, server ${(r.serverCpuUsPerRequest ?? NaN).toFixed(0)} us/req, ` +
    `${r.failed} failed`;
}

async function machineFacts(perfVersion: string): Promise<Record<string, string>> {
  const cpuinfo = await Deno.readTextFile("/proc/cpuinfo").catch(() => "");
  const meminfo = await Deno.readTextFile("/proc/meminfo").catch(() => "");
  return {
    cores: String(navigator.hardwareConcurrency),
    cpu: cpuinfo.match(/model name\s*:\s*(.*)/)?.[1] ?? "unknown",
    memory: `${Math.round(Number(meminfo.match(/MemTotal:\s*(\d+)/)?.[1] ?? 0) / 1048576)} GiB`,
    os: `${Deno.build.os} ${Deno.osRelease()}`,
    "load average at start": await loadAverage(),
    deno: Deno.version.deno,
    "DenoTriton commit": await commitOfTree(),
    "Triton core (DenoTriton engine)": "2.51.0 (from the nvidia-pytriton 0.7.0 wheel)",
    perf_analyzer: perfVersion,
    "heavy-job lock": Deno.env.get("DENOTRITON_BENCH_LOCKED") === "1"
      ? "held (`flock /work/.heavy.lock`): no other heavy job ran; light jobs may have"
      : "not held",
  };
}

async function main(): Promise<number> {
  await Deno.mkdir(outDir, { recursive: true });
  const began = performance.now();
  // Tools first: a missing one fails the run before anything is measured.
  const venvs = new Map<PeerName, PeerVenv>();
  for (const name of peerNames) {
    if (PEERS[name].packages === undefined) continue;
    const venv = await ensurePeerVenv(PEERS[name]);
    if ("missing" in venv) {
      console.error(`bench:peers: cannot run ${name}: ${venv.missing}`);
      return 1;
    }
    venvs.set(name, venv);
  }
  if (venvs.has("tritonserver")) await prepareTritonserverBackends(venvs.get("tritonserver")!);
  const tools = await benchTools(peerNames.includes("triton") ? ["triton"] : []);
  if ("missing" in tools) {
    console.error(`bench:peers: ${tools.missing}`);
    return 1;
  }
  const pa = tools.perfAnalyzer;
  const facts = await machineFacts(pa.version.split("\n")[0] ?? "");

  const cells: JsonCell[] = [];
  const perfCells: PerfCell[] = [];
  const servers: ServerRun[] = [];
  for (const name of peerNames) {
    const spec = PEERS[name];
    const venv = venvs.get(name);
    for (const model of models) {
      const settings = spec.settings(model);
      let server: PeerServer;
      try {
        server = await startPeer(
          spec,
          model,
          (ports) => spec.command(model, ports, venv === undefined ? {} : { venv }),
          { logFile: `${WORK}/${name}-${model}.log` },
        );
      } catch (error) {
        console.error(`bench:peers: ${name} ${model}: ${describe(error)}`);
        servers.push({
          peer: name,
          model,
          startupMs: NaN,
          rssIdleBytes: NaN,
          rssLoadBytes: NaN,
          pssIdleBytes: NaN,
          pssLoadBytes: NaN,
          processes: 0,
          settings,
          error: describe(error),
        });
        for (const concurrency of CONCURRENCIES) {
          cells.push({ peer: name, model, concurrency, error: describe(error) });
        }
        continue;
      }
      await using running = server;
      logLine(`${name} ${model}: answered after ${running.startupMs.toFixed(0)} ms`);
      const processes = processTree(running.pid).size;
      const rssIdle = treeRssBytes(running.pid);
      const pssIdle = treePssBytes(running.pid);
      const memory = sampleMemory(running.pid);
      if (SERVER_WARMUP_MS > 0) {
        await load(name, running, model, 8, SERVER_WARMUP_MS, 0).catch((error) =>
          console.error(`bench:peers: ${name} ${model} warm-up: ${describe(error)}`)
        );
      }
      for (const concurrency of CONCURRENCIES) {
        try {
          const result = await load(name, running, model, concurrency);
          cells.push({ peer: name, model, concurrency, result });
          logLine(`${name} ${model} c${concurrency}: ${formatLoad(result)}`);
        } catch (error) {
          cells.push({ peer: name, model, concurrency, error: describe(error) });
          console.error(`bench:peers: ${name} ${model} c${concurrency} failed: ${describe(error)}`);
        }
      }
      if (withPerf && spec.kserve) {
        for (const protocol of quick ? (["http"] as const) : (["http", "grpc"] as const)) {
          for (const concurrency of CONCURRENCIES) {
            try {
              const result: PerfResult = await runPerf({
                path: pa.path,
                env: pa.env,
                model,
                url: `127.0.0.1:${protocol === "http" ? running.ports.http : running.ports.grpc}`,
                protocol,
                concurrency,
                windowMs: WINDOW_MS,
                windows: WINDOWS,
                timeoutMs: 120_000,
              });
              perfCells.push({ peer: name, model, protocol, concurrency, result });
              logLine(
                `${name} ${model} perf_analyzer ${protocol} c${concurrency}: ` +
                  `${result.throughput.toFixed(1)} infer/s, p50 ${result.p50Us} us`,
              );
            } catch (error) {
              perfCells.push({ peer: name, model, protocol, concurrency, error: describe(error) });
              console.error(
                `bench:peers: ${name} ${model} perf_analyzer ${protocol} c${concurrency} ` +
                  `failed: ${describe(error).slice(0, 1000)}`,
              );
            }
          }
        }
      }
      const peak = memory.stop();
      servers.push({
        peer: name,
        model,
        startupMs: running.startupMs,
        rssIdleBytes: rssIdle,
        rssLoadBytes: peak.rss,
        pssIdleBytes: pssIdle,
        pssLoadBytes: peak.pss,
        processes,
        settings,
      });
    }
  }

  const peerFacts: PeerFacts[] = peerNames.map((name) => ({
    name,
    title: PEERS[name].title,
    versions: venvs.get(name)?.versions ??
      { deno: Deno.version.deno, ...(name === "triton" ? { "Triton core": "2.51.0" } : {}) },
    request: REQUESTS[PEERS[name].shape]!,
  }));
  const partial: PeersRun = {
    date: new Date().toISOString(),
    machine: Deno.hostname().replace(/[^a-zA-Z0-9._-]/g, "_"),
    quick,
    facts,
    peers: peerFacts,
    models,
    concurrencies: CONCURRENCIES,
    cells,
    perfCells,
    servers,
    windowMs: WINDOW_MS,
    windows: WINDOWS,
    profiles: [],
    notes: [
      "The load generator runs on the same two cores as the server and competes with it for " +
      "them, as perf_analyzer does in `deno task bench`; its own CPU per request is in the JSON.",
      "One model per server process, so each peer runs each model with the settings its " +
      "documentation recommends for it (the 5 ms model stands for one device: one instance " +
      "everywhere; the CPU model gets one instance per core everywhere).",
      "The CPU model calibrates its work at load to about 2 ms per sample in each server's own " +
      "language (numpy for the Python peers, a JavaScript loop for DenoTriton), so it compares " +
      "serving and instance scaling, not numpy against V8.",
      "Per-request access logs are off where a peer writes them by default (uvicorn, LitServe's " +
      "uvicorn, BentoML, Ray Serve): DenoTriton and tritonserver write none.",
    ],
  };

  // Profiles: every DenoTriton cell whose ratio to some peer is below 1.5, worst first.
  const profiles: PeerProfile[] = [];
  if (withProfiles) {
    const close: {
      engine: PeerName;
      model: ModelName;
      concurrency: number;
      peer: PeerName;
      ratio: number;
    }[] = [];
    for (const engine of DENO_ENGINES.filter((e) => peerNames.includes(e))) {
      for (const model of models) {
        for (const concurrency of CONCURRENCIES) {
          let worst: { peer: PeerName; ratio: number } | undefined;
          for (const peer of otherPeers(partial)) {
            const ratio = ratioOf(partial, engine, peer, model, concurrency);
            if (ratio !== undefined && (worst === undefined || ratio < worst.ratio)) {
              worst = { peer, ratio };
            }
          }
          if (worst !== undefined && worst.ratio < PROFILE_BELOW) {
            close.push({ engine, model, concurrency, ...worst });
          }
        }
      }
    }
    close.sort((a, b) => a.ratio / goalOf(a.model) - b.ratio / goalOf(b.model));
    const done = new Map<PeerName, number>();
    for (const cell of close) {
      const count = done.get(cell.engine) ?? 0;
      if (count === MAX_PROFILES) {
        logLine(
          `not profiling ${cell.engine} ${cell.model} c${cell.concurrency}: ` +
            `${MAX_PROFILES} of its cells were profiled already`,
        );
        continue;
      }
      done.set(cell.engine, count + 1);
      const inspect = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const port = (inspect.addr as Deno.NetAddr).port;
      inspect.close();
      try {
        const spec = PEERS[cell.engine];
        await using server = await startPeer(
          spec,
          cell.model,
          (ports) => spec.command(cell.model, ports, { inspect: port }),
          { logFile: `${WORK}/${cell.engine}-${cell.model}-profile.log` },
        );
        await load(cell.engine, server, cell.model, cell.concurrency, SERVER_WARMUP_MS, 0);
        let result: LoadResult | undefined;
        const profile = await profileWhile(`127.0.0.1:${port}`, async () => {
          result = await load(cell.engine, server, cell.model, cell.concurrency);
        });
        const frames = topFrames(profile, 1000);
        const idleShare = frames.find((f) => f.frame === "(idle)")?.selfShare ?? 0;
        const busy = 1 - idleShare;
        profiles.push({
          ...cell,
          ...(result === undefined ? {} : { result }),
          idleShare,
          top: frames.filter((f) => f.frame !== "(idle)").slice(0, 12)
            .map((f) => ({ frame: f.frame, selfShare: busy === 0 ? 0 : f.selfShare / busy })),
        });
        logLine(`profiled ${cell.engine} ${cell.model} c${cell.concurrency}`);
      } catch (error) {
        console.error(
          `bench:peers: cannot profile ${cell.engine} ${cell.model}: ${describe(error)}`,
        );
      }
    }
  }

  const run: PeersRun = {
    ...partial,
    facts: {
      ...facts,
      "load average at end": await loadAverage(),
      "bench wall time": `${((performance.now() - began) / 60000).toFixed(1)} min`,
    },
    profiles,
  };
  const base = `peers-${run.date.slice(0, 10)}-${run.machine}${quick ? "-quick" : ""}`;
  await Deno.writeTextFile(`${outDir}/${base}.json`, JSON.stringify(run, null, 2) + "\n");
  await Deno.writeTextFile(`${outDir}/${base}.svg`, peersChart(run));
  await Deno.writeTextFile(`${outDir}/${base}.md`, peersMarkdown(run, `${base}.svg`));
  await formatWritten([`${outDir}/${base}.md`, `${outDir}/${base}.svg`]);
  logLine(`wrote ${outDir}/${base}.md`);
  const failedCells = cells.filter((c) => c.error !== undefined).length +
    perfCells.filter((c) => c.error !== undefined).length;
  const failedRequests = cells.reduce((sum, c) => sum + (c.result?.failed ?? 0), 0);
  logLine(
    `${cells.length + perfCells.length - failedCells} cells measured, ${failedCells} failed; ` +
      `${failedRequests} failed requests`,
  );
  return failedCells === 0 && failedRequests === 0 ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main());
