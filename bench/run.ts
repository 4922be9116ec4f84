/**
 * `deno task bench`: PyTriton and DenoTriton (built-in engine, Triton core) with the same models,
 * driven by perf_analyzer only; writes `bench/results/<date>-<machine>.md` and `.svg`/`.json`,
 * and the README's "Benchmarks" section.
 *
 *     deno task bench                      # everything (about 15 minutes on 2 cores)
 *     deno task bench --quick              # one short cell per server: a harness check
 *     deno task bench --quick --servers builtin,triton --out /tmp/x --no-readme
 *
 * Setup it does itself: a venv in `bench/.venv` with `nvidia-pytriton==0.7.0` and
 * `tritonclient[http,grpc]==2.51.0` (perf_analyzer), unless `DENOTRITON_PYTRITON_PYTHON` names
 * a Python that has them; `deno task setup:triton` when the Triton core is missing. When the
 * venv cannot be made, PyTriton is skipped with one line (a failure if `--servers` names it).
 *
 * @module
 */

import type { PerfAnalyzerPeer } from "../tests/_peers.ts";
import { runCommand as run } from "./venv.ts";
import { median, type PerfResult, runPerf } from "./perf.ts";
import { profileWhile, topFrames } from "./profile.ts";
import { sampleRss, type ServerProcess, startServer, treeRssBytes } from "./process.ts";
import {
  type BenchRun,
  type Cell,
  formatWritten,
  type LossProfile,
  lostCells,
  markdownReport,
  ratioChart,
  readmeSection,
  replaceReadmeSection,
  type Scenario,
  SERVER_TITLES,
  type ServerFacts,
  type ServerName,
} from "./report.ts";
import { option } from "./args.ts";
import { benchTools, commitOfTree, loadAverage, ROOT, serverCommand } from "./servers.ts";

const quick = Deno.args.includes("--quick");
const servers = (option("servers") ?? "pytriton,builtin,triton").split(",") as ServerName[];
for (const server of servers) {
  if (!(server in SERVER_TITLES)) throw new Error(`Unknown server '${server}'`);
}
const outDir = option("out") ?? `${ROOT}/bench/results`;
const writeReadme = !quick && !Deno.args.includes("--no-readme");
const profileLosses = !quick && !Deno.args.includes("--no-profile");

const SCENARIOS: readonly Scenario[] = [
  { model: "identity_small", title: "1. identity float32[16] — serving overhead" },
  {
    model: "identity_large",
    title:
      "2. identity float32[1,048,576], binary tensors — data path (GB/s = 8 MiB in + out per inference)",
    bytesPerInfer: 2 * 4 * 1048576,
    // Issue 16 asks for 1.5× PyTriton here, over HTTP and gRPC, on both engines.
    target: 1.5,
  },
  { model: "add_sub", title: "3. add_sub, dynamic batching (max batch 32, queue delay 1 ms)" },
  {
    model: "fixed_5ms",
    title: "4. fixed 5 ms per call whatever the batch size — batching efficiency",
  },
  { model: "cpu_1", title: "5a. CPU-bound (~2 ms of arithmetic per sample), 1 instance" },
  { model: "cpu_2", title: "5b. CPU-bound (~2 ms of arithmetic per sample), 2 instances" },
  {
    model: "identity_large_shm",
    title:
      "6a. identity float32[1,048,576] through system shared memory (perf_analyzer --shared-memory system; compare with 2.)",
    bytesPerInfer: 2 * 4 * 1048576,
  },
  {
    model: "identity_huge_shm",
    title: "6b. identity float32[16,777,216] through system shared memory",
    bytesPerInfer: 2 * 4 * 16777216,
  },
];

/**
 * Scenarios whose tensors travel through system shared memory: the model they load, the output
 * region perf_analyzer gives each request, and their concurrencies (inputs and outputs are
 * regions of 4 or 64 MiB per concurrent request, so 32 would only measure memory).
 */
const SHARED_MEMORY: Readonly<Record<string, { model: string; outputBytes: number }>> = {
  identity_large_shm: { model: "identity_large", outputBytes: 4 * 1048576 },
  identity_huge_shm: { model: "identity_huge", outputBytes: 4 * 16777216 },
};
const SHARED_MEMORY_CONCURRENCIES = [1, 8];

/** The model a scenario loads. */
function modelOf(scenario: string): string {
  return SHARED_MEMORY[scenario]?.model ?? scenario;
}

/** perf_analyzer's extra arguments for a scenario. */
function perfArgsOf(scenario: string): string[] {
  const shm = SHARED_MEMORY[scenario];
  if (shm === undefined) return [];
  return ["--shared-memory", "system", "--output-shared-memory-size", String(shm.outputBytes)];
}

const MODELS = [...new Set(SCENARIOS.map((scenario) => modelOf(scenario.model)))];
// `--scenarios cpu_1,cpu_2` measures only those (e.g. to redo them; see render.ts --replace).
const only = option("scenarios")?.split(",");
for (const model of only ?? []) {
  if (!SCENARIOS.some((scenario) => scenario.model === model)) {
    throw new Error(`Unknown scenario '${model}'`);
  }
}
const PROTOCOLS = ["http", "grpc"] as const;
const CONCURRENCIES = quick ? [1] : [1, 8, 32];
const WINDOW_MS = quick ? 300 : 1500;
const WINDOWS = 3;
const STARTS = quick ? 1 : 3;
/** The most lost cells profiled per DenoTriton server (each takes a server start and a cell). */
const MAX_PROFILES = 12;

async function measure(
  pa: PerfAnalyzerPeer,
  server: ServerProcess,
  model: string,
  protocol: "http" | "grpc",
  concurrency: number,
  windowMs = WINDOW_MS,
): Promise<PerfResult> {
  return await runPerf({
    path: pa.path,
    env: pa.env,
    model: modelOf(model),
    extraArgs: perfArgsOf(model),
    url: `127.0.0.1:${protocol === "http" ? server.ports.http : server.ports.grpc}`,
    protocol,
    concurrency,
    windowMs,
    windows: WINDOWS,
    timeoutMs: 120_000,
  });
}

async function machineFacts(
  pa: PerfAnalyzerPeer,
  python: string | undefined,
): Promise<Record<string, string>> {
  const cpuinfo = await Deno.readTextFile("/proc/cpuinfo").catch(() => "");
  const meminfo = await Deno.readTextFile("/proc/meminfo").catch(() => "");
  const facts: Record<string, string> = {
    cores: String(navigator.hardwareConcurrency),
    cpu: cpuinfo.match(/model name\s*:\s*(.*)/)?.[1] ?? "unknown",
    memory: `${Math.round(Number(meminfo.match(/MemTotal:\s*(\d+)/)?.[1] ?? 0) / 1048576)} GiB`,
    os: `${Deno.build.os} ${Deno.osRelease()}`,
    "load average at start": await loadAverage(),
    deno: Deno.version.deno,
    "DenoTriton commit": await commitOfTree(),
    "Triton core (DenoTriton engine)": "2.51.0 (from the nvidia-pytriton 0.7.0 wheel)",
    perf_analyzer: pa.version.split("\n")[0] ?? "",
  };
  if (python !== undefined) {
    const versions = await run(python, [
      "-c",
      "import sys, numpy; from importlib.metadata import version as v; " +
      "print(sys.version.split()[0], v('nvidia-pytriton'), v('tritonclient'), numpy.__version__)",
    ]);
    const [py, pytriton, tritonclient, numpy] = versions.text.split("\n").at(-1)!.split(" ");
    Object.assign(facts, {
      python: py ?? "",
      "nvidia-pytriton": pytriton ?? "",
      tritonclient: tritonclient ?? "",
      numpy: numpy ?? "",
    });
  }
  return facts;
}

async function main(): Promise<number> {
  await Deno.mkdir(outDir, { recursive: true });
  let tools: Awaited<ReturnType<typeof benchTools>>;
  try {
    tools = await benchTools(servers);
    if ("missing" in tools) {
      // Named on the command line: a hard failure; by default: DenoTriton alone.
      if (option("servers") !== undefined) {
        console.error(`bench: cannot run PyTriton: ${tools.missing}`);
        return 1;
      }
      console.log(`bench: skipping PyTriton (DenoTriton only): ${tools.missing}`);
      servers.splice(servers.indexOf("pytriton"), 1);
      tools = await benchTools(servers);
    }
  } catch (error) {
    console.error(`bench: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
  // Without PyTriton nothing can be missing.
  if ("missing" in tools) return 1;
  const { python, libDir, perfAnalyzer: pa } = tools;
  const wantPy = servers.includes("pytriton");
  const facts = await machineFacts(pa, wantPy ? python : undefined);
  const began = performance.now();
  const cells: Cell[] = [];
  const serverFacts: Partial<Record<ServerName, ServerFacts>> = {};
  const notes: string[] = [
    "perf_analyzer runs on the same machine as the server and competes with it for the cores; " +
    "other work may share the machine too (see the load averages), so compare ratios, not " +
    "absolute numbers, and read the spread.",
    "Each server binds all six models at once; every cell runs after a 3-window warm-up at " +
    "concurrency 8 (not recorded) per model and protocol.",
    "The CPU models calibrate their work at load to about 2 ms per sample in their own language " +
    "(numpy for PyTriton, a JavaScript loop for DenoTriton), so they compare serving and instance " +
    "scaling, not numpy against V8.",
  ];

  for (const name of servers) {
    const spec = serverCommand(name, { models: MODELS, python, libDir });
    const health: number[] = [];
    const models: number[] = [];
    let server: ServerProcess | undefined;
    for (let start = 0; start < STARTS; start++) {
      server = await startServer(spec);
      health.push(server.healthReadyMs);
      models.push(server.modelsReadyMs);
      if (start < STARTS - 1) await server.stop();
    }
    await using running = server!;
    console.log(`bench: ${SERVER_TITLES[name]} ready in ${median(models).toFixed(0)} ms`);
    const rssIdle = treeRssBytes(running.pid);
    const sampler = sampleRss(running.pid);
    const scenarios = quick
      ? SCENARIOS.slice(0, 1)
      : SCENARIOS.filter((scenario) => only === undefined || only.includes(scenario.model));
    for (const scenario of scenarios) {
      for (const protocol of quick ? (["http"] as const) : PROTOCOLS) {
        if (!quick) {
          // Warm-up, not recorded: JIT, connection pools, first allocations.
          await measure(pa, running, scenario.model, protocol, 8, 400).catch(() => undefined);
        }
        const concurrencies = SHARED_MEMORY[scenario.model] === undefined || quick
          ? CONCURRENCIES
          : SHARED_MEMORY_CONCURRENCIES;
        for (const concurrency of concurrencies) {
          try {
            const result = await measure(pa, running, scenario.model, protocol, concurrency);
            cells.push({ server: name, model: scenario.model, protocol, concurrency, result });
            console.log(
              `bench: ${name} ${scenario.model} ${protocol} c${concurrency}: ` +
                `${result.throughput.toFixed(1)} infer/s ±${(result.spread * 100).toFixed(0)}%, ` +
                `p50 ${result.p50Us} us, p99 ${result.p99Us} us`,
            );
          } catch (error) {
            const message = error instanceof Error ? error.message : String(error);
            cells.push({
              server: name,
              model: scenario.model,
              protocol,
              concurrency,
              error: message,
            });
            console.error(
              `bench: ${name} ${scenario.model} ${protocol} c${concurrency} failed: ${
                message.slice(0, 2000)
              }`,
            );
          }
        }
      }
    }
    const rssLoad = sampler.stop();
    // Read after stopping: a piped stdout may only be flushed at exit.
    await running.stop();
    const log = await Deno.readTextFile(spec.logFile);
    const formLine = log.match(/denotriton ready: (.*)/)?.[1] ??
      log.match(/pytriton ready: (.*)/)?.[1];
    if (formLine !== undefined) console.log(`bench: ${SERVER_TITLES[name]}: ${formLine}`);
    const note = formLine?.includes("cpu callables")
      ? "cpu_2: list of 2 callables on the main thread (no workers() in mod.ts yet)"
      : formLine?.includes("cpu workers")
      ? "cpu_1 / cpu_2: workers() with 1 / 2 Deno Workers"
      : name === "pytriton"
      ? "cpu_2: list of 2 callables (threads; numpy releases the GIL)"
      : undefined;
    serverFacts[name] = {
      healthReadyMs: health,
      modelsReadyMs: models,
      rssIdleBytes: rssIdle,
      rssLoadBytes: rssLoad,
      ...(note === undefined ? {} : { note }),
    };
  }

  const partial: BenchRun = {
    date: new Date().toISOString(),
    machine: Deno.hostname().replace(/[^a-zA-Z0-9._-]/g, "_"),
    quick,
    facts: {
      ...facts,
      "bench wall time": `${((performance.now() - began) / 60000).toFixed(1)} min`,
    },
    scenarios: SCENARIOS,
    cells,
    servers: serverFacts,
    windowMs: WINDOW_MS,
    windows: WINDOWS,
    profiles: [],
    notes,
  };

  // Profile every DenoTriton cell below its scenario's target (the report lists them), worst
  // first, each measured again under the profiler in a server of its own.
  const profiles: LossProfile[] = [];
  if (profileLosses && servers.includes("pytriton")) {
    const profiled = new Map<ServerName, number>();
    for (const { cell, ratio } of lostCells(partial)) {
      const done = profiled.get(cell.server) ?? 0;
      if (done === MAX_PROFILES) {
        console.log(
          `bench: not profiling ${cell.server} ${cell.model} ${cell.protocol} ` +
            `c${cell.concurrency}: ${MAX_PROFILES} of its cells were profiled already`,
        );
        continue;
      }
      profiled.set(cell.server, done + 1);
      const inspectPort = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const port = (inspectPort.addr as Deno.NetAddr).port;
      inspectPort.close();
      try {
        await using server = await startServer(
          serverCommand(cell.server, { models: MODELS, python, libDir, inspect: port }),
        );
        await measure(pa, server, cell.model, cell.protocol, cell.concurrency, 400)
          .catch(() => undefined);
        const profile = await profileWhile(
          `127.0.0.1:${port}`,
          () => measure(pa, server, cell.model, cell.protocol, cell.concurrency),
        );
        profiles.push({
          server: cell.server,
          model: cell.model,
          protocol: cell.protocol,
          concurrency: cell.concurrency,
          ratio,
          top: topFrames(profile),
        });
        console.log(
          `bench: profiled ${cell.server} ${cell.model} ${cell.protocol} c${cell.concurrency}`,
        );
      } catch (error) {
        console.error(`bench: cannot profile ${cell.server} ${cell.model}: ${error}`);
      }
    }
  }

  const result: BenchRun = {
    ...partial,
    facts: {
      ...partial.facts,
      "load average at end": await loadAverage(),
      "bench wall time": `${((performance.now() - began) / 60000).toFixed(1)} min`,
    },
    profiles,
  };
  const base = `${result.date.slice(0, 10)}-${result.machine}${quick ? "-quick" : ""}${
    only === undefined ? "" : `-${only.join("-")}`
  }`;
  const chart = `${base}.svg`;
  await Deno.writeTextFile(`${outDir}/${base}.json`, JSON.stringify(result, null, 2) + "\n");
  await Deno.writeTextFile(
    `${outDir}/${chart}`,
    ratioChart(
      (await import("./report.ts")).headlines(result),
      `DenoTriton / PyTriton, ${result.date.slice(0, 10)}, ${result.facts["cores"]} cores`,
    ),
  );
  await Deno.writeTextFile(`${outDir}/${base}.md`, markdownReport(result, chart));
  await formatWritten([`${outDir}/${base}.md`, `${outDir}/${chart}`]);
  console.log(`bench: wrote ${outDir}/${base}.md`);
  if (writeReadme && only === undefined && servers.includes("pytriton")) {
    const readme = await Deno.readTextFile(`${ROOT}/README.md`);
    const rel = outDir.startsWith(ROOT) ? outDir.slice(ROOT.length + 1) : outDir;
    await Deno.writeTextFile(
      `${ROOT}/README.md`,
      replaceReadmeSection(readme, readmeSection(result, `${rel}/${base}.md`, `${rel}/${chart}`)),
    );
    await formatWritten([`${ROOT}/README.md`]);
    console.log("bench: updated the Benchmarks section of README.md");
  }
  const failed = cells.filter((cell) => cell.error !== undefined).length;
  console.log(`bench: ${cells.length - failed} cells measured, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main());
