/**
 * The engines' own round trip, without HTTP (issue 16): `engine.infer()` on `examples/add_sub`
 * in a closed loop, on the built-in engine and on the Triton core, each in its own subprocess,
 * with the model's queue delay at 100 µs (as `examples/add_sub` binds it) and at 0 (the round
 * trip alone). What the front end costs is the same for both engines, so this shows what the
 * engines add, with less noise than `bench:engines` on a shared machine: the engines alternate
 * over short rounds and each cell keeps its median round.
 *
 * `--traces` adds what tracing costs (issue 36): `none` (the engine without a tracer, as before
 * tracing existed), then the server's tracer as `traceConfig` makes it: `off` (no
 * `traceConfig`: level OFF, what every server runs with),
 * `triton` (every request traced at level TIMESTAMPS into a trace file, a new file every 100
 * traces) and `opentelemetry` (every request's three spans exported over OTLP/HTTP to a sink
 * that this driver serves, so the sink's own CPU is not the engine process's).
 *
 * Usage: `deno task bench:roundtrip [--rounds 5] [--duration 1] [--concurrency 1,8]
 * [--delays 100,0] [--engines builtin,triton] [--traces none]`
 *
 * @module
 */

import type { Engine, EngineKind, InferenceRequest } from "../src/engine/engine.ts";
import { addSubDefinition } from "./add_sub_definition.ts";
import { ndarray } from "../src/tensor/ndarray.ts";
import { median } from "./perf.ts";
import { cpuSeconds } from "./process.ts";
import { flag } from "./args.ts";
import { parseTraceConfig } from "../src/config/trace_config.ts";
import { Tracer } from "../src/telemetry/tracer.ts";

/** How a cell traces: see the module's documentation. */
type TraceCell = "none" | "off" | "triton" | "opentelemetry";

/** The server's tracer for a cell, as `traceConfig` would make it. */
function tracerOf(cell: TraceCell, dir: string, otlp: string): Tracer | undefined {
  if (cell === "none") return undefined;
  const entries = cell === "off"
    ? []
    : cell === "triton"
    ? ["level=TIMESTAMPS", "rate=1", `triton,file=${dir}/trace.json`, "triton,log-frequency=100"]
    : ["mode=opentelemetry", "level=TIMESTAMPS", "rate=1", `opentelemetry,url=${otlp}`];
  const tracer = new Tracer(parseTraceConfig(entries));
  tracer.open();
  return tracer;
}

// This process (all threads) and its main thread.
const PROCESS_STAT = "/proc/self/stat";
const MAIN_THREAD_STAT = `/proc/self/task/${Deno.pid}/stat`;

function request(): InferenceRequest {
  return {
    modelName: "AddSub",
    parameters: {},
    inputs: new Map([
      ["a", ndarray(new Float32Array([1, 2, 3, 4, 5, 6, 7, 8]), [1, 8])],
      ["b", ndarray(new Float32Array([8, 7, 6, 5, 4, 3, 2, 1]), [1, 8])],
    ]),
  };
}

/** One measured round of one cell, as the subprocess reports it. */
interface Round {
  rps: number;
  p50Us: number;
  cpuUs: number;
  mainCpuUs: number;
}

/** Serves `rounds` rounds per (delay, concurrency) cell in this process; one JSON line each. */
async function measure(
  kind: EngineKind,
  traces: readonly TraceCell[],
  delays: readonly number[],
  levels: readonly number[],
  seconds: number,
  otlp: string,
): Promise<void> {
  for (const traceCell of traces) {
    for (const delay of delays) {
      const dir = await Deno.makeTempDir({ prefix: "denotriton-bench-trace-" });
      const tracer = tracerOf(traceCell, dir, otlp);
      const engine: Engine = kind === "triton"
        ? new (await import("../src/engine/native/engine.ts")).NativeEngine({
          exitTimeoutSecs: 5,
          ...(tracer === undefined ? {} : { tracer }),
        })
        : new (await import("../src/engine/builtin/engine.ts")).BuiltinEngine(
          tracer === undefined ? {} : { tracer },
        );
      await engine.start();
      await engine.loadModel(addSubDefinition(delay));
      try {
        for (const concurrency of levels) {
          const drive = async (s: number): Promise<number[]> => {
            const latencies: number[] = [];
            const end = performance.now() + s * 1000;
            await Promise.all(Array.from({ length: concurrency }, async () => {
              while (performance.now() < end) {
                const sent = performance.now();
                await engine.infer(request());
                latencies.push(performance.now() - sent);
              }
            }));
            return latencies.sort((a, b) => a - b);
          };
          await drive(0.3);
          const cpu = cpuSeconds(PROCESS_STAT);
          const mainCpu = cpuSeconds(MAIN_THREAD_STAT);
          const latencies = await drive(seconds);
          const n = latencies.length;
          const round: Round = {
            rps: n / seconds,
            p50Us: latencies[Math.floor(n / 2)]! * 1000,
            cpuUs: (cpuSeconds(PROCESS_STAT) - cpu) * 1e6 / n,
            mainCpuUs: (cpuSeconds(MAIN_THREAD_STAT) - mainCpu) * 1e6 / n,
          };
          console.log(JSON.stringify({ trace: traceCell, delay, concurrency, ...round }));
        }
      } finally {
        await engine.stop();
        await tracer?.close();
        await Deno.remove(dir, { recursive: true });
      }
    }
  }
}

if (import.meta.main) {
  const served = flag("serve", "");
  const delays = flag("delays", "100,0").split(",").map(Number);
  const levels = flag("concurrency", "1,8").split(",").map(Number);
  const seconds = Number(flag("duration", "1"));
  const traces = flag("traces", "none").split(",") as TraceCell[];
  for (const cell of traces) {
    if (!["none", "off", "triton", "opentelemetry"].includes(cell)) {
      throw new Error(`--traces: unknown '${cell}' (none, off, triton, opentelemetry)`);
    }
  }
  if (served !== "") {
    await measure(served as EngineKind, traces, delays, levels, seconds, flag("otlp", ""));
  } else {
    // The OTLP sink of the opentelemetry cells: takes every export, counts them.
    const exported = { requests: 0, bytes: 0 };
    const sink = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
      exported.requests++;
      exported.bytes += (await req.arrayBuffer()).byteLength;
      return new Response(new Uint8Array(0), {
        headers: { "content-type": "application/x-protobuf" },
      });
    });
    const otlp = `http://127.0.0.1:${sink.addr.port}/v1/traces`;
    const engines = flag("engines", "builtin,triton").split(",") as EngineKind[];
    const rounds = Number(flag("rounds", "5"));
    const cells = new Map<string, Round[]>();
    for (let round = 0; round < rounds; round++) {
      for (const kind of round % 2 === 0 ? engines : [...engines].reverse()) {
        const output = await new Deno.Command(Deno.execPath(), {
          args: [
            "run",
            "-A",
            import.meta.filename!,
            "--serve",
            kind,
            "--traces",
            traces.join(","),
            "--otlp",
            otlp,
            "--delays",
            delays.join(","),
            "--concurrency",
            levels.join(","),
            "--duration",
            String(seconds),
          ],
          stderr: "inherit",
        }).output();
        if (!output.success) throw new Error(`The ${kind} round failed`);
        for (const line of new TextDecoder().decode(output.stdout).trim().split("\n")) {
          const { trace, delay, concurrency, ...round } = JSON.parse(line) as Round & {
            trace: TraceCell;
            delay: number;
            concurrency: number;
          };
          const key = `${kind} ${trace} ${delay} ${concurrency}`;
          cells.set(key, [...cells.get(key) ?? [], round]);
        }
      }
    }
    console.log(
      `Engine round trip, add_sub in process (Deno ${Deno.version.deno}, ` +
        `${navigator.hardwareConcurrency} CPUs, load ${
          Deno.loadavg().map((v) => v.toFixed(1)).join(" ")
        }), median of ${rounds} rounds of ${seconds} s:\n`,
    );
    await sink.shutdown();
    console.log(
      "| engine | tracing | queue delay µs | concurrency | infer/s | p50 µs | CPU µs/req | main thread CPU µs/req |",
    );
    console.log("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const [key, list] of cells) {
      const [kind, trace, delay, concurrency] = key.split(" ");
      console.log(
        `| ${kind} | ${trace} | ${delay} | ${concurrency} | ` +
          `${median(list.map((r) => r.rps)).toFixed(0)} | ` +
          `${median(list.map((r) => r.p50Us)).toFixed(0)} | ` +
          `${median(list.map((r) => r.cpuUs)).toFixed(1)} | ` +
          `${median(list.map((r) => r.mainCpuUs)).toFixed(1)} |`,
      );
    }
    if (traces.includes("opentelemetry")) {
      console.log(
        `\nThe OTLP sink took ${exported.requests} exports, ${exported.bytes} bytes in all.`,
      );
    }
  }
}
