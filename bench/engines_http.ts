/**
 * Engine benchmark (issue 3): DenoTriton serving `examples/add_sub` on the built-in engine and on
 * the Triton core, each driven over HTTP by the same closed-loop load generator in one run.
 *
 * Each server runs in its own subprocess (`--serve <engine>`) so the load generator does not share
 * its event loop; each engine is measured at concurrency 1 and 8 for a fixed duration after a
 * warm-up. Prints requests/s and p50/p99 latency per engine and the core/builtin ratio, and writes
 * the table to `bench/results/engines-<date>.md`.
 *
 * Usage: `deno task bench:engines [--duration 5] [--warmup 1] [--concurrency 1,8] [--engines builtin,triton]
 * [--rounds 2]`
 *
 * @module
 */

import { Triton } from "../mod.ts";
import { bindAddSub } from "../examples/add_sub/model.ts";
import type { EngineKind } from "../src/engine/engine.ts";

/** One measured load level. */
interface Measurement {
  engine: EngineKind;
  concurrency: number;
  requests: number;
  errors: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
}

function flag(name: string, fallback: string): string {
  const at = Deno.args.indexOf(`--${name}`);
  return at >= 0 && Deno.args[at + 1] !== undefined ? Deno.args[at + 1]! : fallback;
}

async function serve(engine: EngineKind): Promise<void> {
  const triton = new Triton({
    engine,
    config: {
      httpAddress: "127.0.0.1",
      httpPort: 0,
      allowGrpc: false,
      allowMetrics: false,
      logFile: "/dev/null",
    },
  });
  await bindAddSub(triton);
  await triton.run();
  console.log(JSON.stringify({ url: triton.urls.http, engine: triton.engineKind }));
  // The parent closes stdin to stop the server.
  for await (const _ of Deno.stdin.readable) { /* wait for EOF */ }
  await triton.stop();
}

const BODY = JSON.stringify({
  inputs: [
    { name: "a", datatype: "FP32", shape: [1, 8], data: [1, 2, 3, 4, 5, 6, 7, 8] },
    { name: "b", datatype: "FP32", shape: [1, 8], data: [8, 7, 6, 5, 4, 3, 2, 1] },
  ],
});

async function inferOnce(url: string): Promise<boolean> {
  const response = await fetch(`${url}/v2/models/AddSub/infer`, {
    method: "POST",
    // Like tritonclient and perf_analyzer: no gzip (fetch() asks for it by default).
    headers: { "content-type": "application/json", "accept-encoding": "identity" },
    body: BODY,
  });
  const text = await response.text();
  return response.status === 200 && text.includes('"add"');
}

/** Closed loop: `concurrency` workers each send the next request when the last one answered. */
async function drive(
  url: string,
  concurrency: number,
  seconds: number,
): Promise<{ latencies: number[]; errors: number; elapsed: number }> {
  const latencies: number[] = [];
  let errors = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < end) {
      const sent = performance.now();
      const ok = await inferOnce(url).catch(() => false);
      if (ok) latencies.push(performance.now() - sent);
      else errors++;
    }
  }));
  return { latencies, errors, elapsed: (performance.now() - start) / 1000 };
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

async function measureEngine(
  engine: EngineKind,
  levels: readonly number[],
  seconds: number,
  warmup: number,
): Promise<Measurement[]> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", import.meta.filename!, "--serve", engine],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  while (!buffered.includes("\n")) {
    const { value, done } = await lines.read();
    if (done) throw new Error(`The ${engine} server exited before it served`);
    buffered += value;
  }
  const { url } = JSON.parse(buffered.slice(0, buffered.indexOf("\n"))) as { url: string };
  const results: Measurement[] = [];
  try {
    for (const concurrency of levels) {
      await drive(url, concurrency, warmup);
      const { latencies, errors, elapsed } = await drive(url, concurrency, seconds);
      latencies.sort((a, b) => a - b);
      const row: Measurement = {
        engine,
        concurrency,
        requests: latencies.length,
        errors,
        seconds: elapsed,
        rps: latencies.length / elapsed,
        p50Ms: percentile(latencies, 0.5),
        p99Ms: percentile(latencies, 0.99),
      };
      console.log(
        `${engine.padEnd(8)} c=${concurrency}: ${row.rps.toFixed(0)} req/s, ` +
          `p50 ${row.p50Ms.toFixed(2)} ms, p99 ${row.p99Ms.toFixed(2)} ms, ${errors} errors`,
      );
      results.push(row);
    }
  } finally {
    await child.stdin.close();
    lines.releaseLock();
    await child.stdout.cancel().catch(() => {});
    await child.status;
  }
  return results;
}

function report(
  rows: readonly Measurement[],
  seconds: number,
  warmup: number,
  rounds: number,
): string {
  const date = new Date().toISOString();
  const out = [
    `# DenoTriton engines over HTTP: built-in vs Triton core`,
    "",
    `Run ${date} with \`deno task bench:engines\` (Deno ${Deno.version.deno}, ${Deno.build.os}/${Deno.build.arch}, ` +
    `${navigator.hardwareConcurrency} CPUs). Model: \`examples/add_sub\` (FP32 [1, 8] a and b, ` +
    "dynamic batching up to 128, 100 µs queue delay). Each engine serves in its own subprocess; " +
    `one closed-loop HTTP/JSON load generator, ${warmup} s warm-up then ${seconds} s measured per ` +
    `concurrency level; best of ${rounds} alternating rounds. Latency is client-side, per request.`,
    "",
    "| engine | concurrency | requests | errors | req/s | p50 ms | p99 ms |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...rows.map((r) =>
      `| ${r.engine} | ${r.concurrency} | ${r.requests} | ${r.errors} | ${r.rps.toFixed(0)} | ` +
      `${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} |`
    ),
    "",
    "| concurrency | req/s core/builtin | p50 core/builtin | p99 core/builtin |",
    "| ---: | ---: | ---: | ---: |",
  ];
  for (const concurrency of new Set(rows.map((r) => r.concurrency))) {
    const builtin = rows.find((r) => r.engine === "builtin" && r.concurrency === concurrency);
    const core = rows.find((r) => r.engine === "triton" && r.concurrency === concurrency);
    if (!builtin || !core) continue;
    out.push(
      `| ${concurrency} | ${(core.rps / builtin.rps).toFixed(2)} | ` +
        `${(core.p50Ms / builtin.p50Ms).toFixed(2)} | ${(core.p99Ms / builtin.p99Ms).toFixed(2)} |`,
    );
  }
  return out.join("\n") + "\n";
}

if (import.meta.main) {
  const served = flag("serve", "");
  if (served !== "") {
    await serve(served as EngineKind);
  } else {
    const seconds = Number(flag("duration", "5"));
    const warmup = Number(flag("warmup", "1"));
    const levels = flag("concurrency", "1,8").split(",").map(Number);
    const rows: Measurement[] = [];
    const rounds = Number(flag("rounds", "2"));
    const engines = flag("engines", "builtin,triton").split(",") as EngineKind[];
    // The machine is shared and noisy: engines alternate over rounds and each (engine,
    // concurrency) keeps its best round.
    for (let round = 0; round < rounds; round++) {
      for (const engine of engines) {
        for (const row of await measureEngine(engine, levels, seconds, warmup)) {
          const at = rows.findIndex((r) =>
            r.engine === row.engine && r.concurrency === row.concurrency
          );
          if (at < 0) rows.push(row);
          else if (row.rps > rows[at]!.rps) rows[at] = row;
        }
      }
    }
    rows.sort((a, b) =>
      engines.indexOf(a.engine) - engines.indexOf(b.engine) || a.concurrency - b.concurrency
    );
    const text = report(rows, seconds, warmup, rounds);
    console.log(`\n${text}`);
    const path = new URL(
      `./results/engines-${new Date().toISOString().slice(0, 10)}.md`,
      import.meta.url,
    );
    await Deno.writeTextFile(path, text);
    console.log(`Written to ${path.pathname}`);
  }
}
