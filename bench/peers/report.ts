/**
 * The peers benchmark's report: per model and concurrency every server's req/s, latency and CPU
 * per request under the one load generator; DenoTriton (each engine) ÷ each peer; the KServe v2
 * cells perf_analyzer measured; startup and memory; the cells short of the goal, with what bounds
 * them; and profiles of DenoTriton where it wins by less than 1.5×. The SVG chart is the PyTriton
 * report's renderer (`bench/report.ts`).
 *
 * @module
 */

import type { PerfResult } from "../perf.ts";
import type { TopFrame } from "../profile.ts";
import { geomean, type Headline, ratioChart } from "../report.ts";
import type { LoadResult } from "./load.ts";
import { MODEL_SPECS, type ModelName } from "./models.ts";
import { DENO_ENGINES, type PeerName } from "./peers.ts";

/** A cell of the one load generator (HTTP JSON). */
export interface JsonCell {
  /** The server. */
  readonly peer: PeerName;
  /** The model. */
  readonly model: ModelName;
  /** Concurrent clients. */
  readonly concurrency: number;
  /** The measurement, unless it failed. */
  readonly result?: LoadResult;
  /** Why it failed. */
  readonly error?: string;
}

/** A perf_analyzer cell (KServe v2, binary tensors). */
export interface PerfCell {
  /** The server. */
  readonly peer: PeerName;
  /** The model. */
  readonly model: ModelName;
  /** Protocol. */
  readonly protocol: "http" | "grpc";
  /** Concurrent requests. */
  readonly concurrency: number;
  /** The measurement, unless it failed. */
  readonly result?: PerfResult;
  /** Why it failed. */
  readonly error?: string;
}

/** One server process (one peer, one model). */
export interface ServerRun {
  /** The server. */
  readonly peer: PeerName;
  /** The model it served. */
  readonly model: ModelName;
  /** ms from spawn to its first right answer. */
  readonly startupMs: number;
  /** Resident memory of its process tree when idle after start, bytes. */
  readonly rssIdleBytes: number;
  /** Peak resident memory over its cells, bytes. */
  readonly rssLoadBytes: number;
  /** Proportional set size when idle, bytes. */
  readonly pssIdleBytes: number;
  /** Peak proportional set size over its cells, bytes. */
  readonly pssLoadBytes: number;
  /** Its processes when idle. */
  readonly processes: number;
  /** The settings it served the model with. */
  readonly settings: string;
  /** Why it could not be started, when it could not. */
  readonly error?: string;
}

/** A profile of a DenoTriton cell that wins by less than 1.5× (or loses). */
export interface PeerProfile {
  /** The engine. */
  readonly engine: PeerName;
  /** The cell. */
  readonly model: ModelName;
  /** Concurrency. */
  readonly concurrency: number;
  /** The peer it does least well against. */
  readonly peer: PeerName;
  /** Its throughput ratio to that peer. */
  readonly ratio: number;
  /** The cell measured again under the profiler. */
  readonly result?: LoadResult;
  /** Share of the profile's samples the main thread spent idle (waiting). */
  readonly idleShare: number;
  /** The top frames by self time, idle left out. */
  readonly top: readonly TopFrame[];
}

/** A peer's name, title and installed versions. */
export interface PeerFacts {
  /** The server. */
  readonly name: PeerName;
  /** Display name. */
  readonly title: string;
  /** Distribution → version. */
  readonly versions: Readonly<Record<string, string>>;
  /** Its request shape, in words. */
  readonly request: string;
}

/** A whole run. */
export interface PeersRun {
  /** ISO date and time. */
  readonly date: string;
  /** Machine name. */
  readonly machine: string;
  /** A short harness check (`--quick`). */
  readonly quick: boolean;
  /** Name → value: cores, memory, versions, commit, load. */
  readonly facts: Readonly<Record<string, string>>;
  /** The servers compared, in order. */
  readonly peers: readonly PeerFacts[];
  /** The models measured, in order. */
  readonly models: readonly ModelName[];
  /** Concurrencies. */
  readonly concurrencies: readonly number[];
  /** The load generator's cells. */
  readonly cells: readonly JsonCell[];
  /** perf_analyzer's cells. */
  readonly perfCells: readonly PerfCell[];
  /** The server processes. */
  readonly servers: readonly ServerRun[];
  /** Window length, ms. */
  readonly windowMs: number;
  /** Windows per cell. */
  readonly windows: number;
  /** Profiles of DenoTriton's close cells. */
  readonly profiles: readonly PeerProfile[];
  /** Free-text notes. */
  readonly notes: readonly string[];
  /** Markdown written after the run (what the figures mean), shown before the tables. */
  readonly findings?: string;
}

/** The goal a model's cells are held to: DenoTriton ÷ peer on at least one engine. */
export function goalOf(model: ModelName): number {
  return MODEL_SPECS[model].kind === "small" ? 2 : 1.2;
}

function cellOf(
  run: PeersRun,
  peer: PeerName,
  model: ModelName,
  concurrency: number,
): JsonCell | undefined {
  return run.cells.find((c) =>
    c.peer === peer && c.model === model && c.concurrency === concurrency
  );
}

/**
 * DenoTriton's throughput ÷ a peer's in one cell of the load generator.
 *
 * @param run The run.
 * @param engine A DenoTriton engine.
 * @param peer The peer.
 * @param model The model.
 * @param concurrency The concurrency.
 * @returns The ratio, or `undefined` when either side is missing.
 */
export function ratioOf(
  run: PeersRun,
  engine: PeerName,
  peer: PeerName,
  model: ModelName,
  concurrency: number,
): number | undefined {
  const mine = cellOf(run, engine, model, concurrency)?.result;
  const theirs = cellOf(run, peer, model, concurrency)?.result;
  if (mine === undefined || theirs === undefined || theirs.throughput === 0) return undefined;
  return mine.throughput / theirs.throughput;
}

/** The servers of the run that are not DenoTriton. */
export function otherPeers(run: PeersRun): PeerName[] {
  return run.peers.map((p) => p.name).filter((name) =>
    !(DENO_ENGINES as readonly string[]).includes(name)
  );
}

function engines(run: PeersRun): PeerName[] {
  return run.peers.map((p) => p.name).filter((name) =>
    (DENO_ENGINES as readonly string[]).includes(name)
  );
}

/** A peer's cell that DenoTriton does not beat by the goal on either engine. */
export interface ShortCell {
  /** The peer. */
  readonly peer: PeerName;
  /** The model. */
  readonly model: ModelName;
  /** Concurrency. */
  readonly concurrency: number;
  /** The better engine's ratio. */
  readonly best: number;
  /** The engine that got it. */
  readonly engine: PeerName;
  /** The goal. */
  readonly goal: number;
  /** What bounds the cell, when the model does. */
  readonly bound?: string;
}

/**
 * The most any server can serve of a model-bound cell, requests per second: the 5 ms model
 * answers at most 32 requests (its largest batch) per 5 ms, and never more than its concurrency;
 * the CPU model costs 2 ms of one core per request, and with one client only one core works.
 *
 * @param model The model.
 * @param concurrency The concurrency.
 * @returns The ceiling, or `undefined` where the model does not bound the cell.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { modelCeiling } from "./report.ts";
 *
 * assert.equal(modelCeiling("fixed_5ms", 1), 200);
 * assert.equal(modelCeiling("cpu_2", 8), 1000);
 * assert.equal(modelCeiling("add_sub", 8), undefined);
 * ```
 */
export function modelCeiling(model: ModelName, concurrency: number): number | undefined {
  if (model === "fixed_5ms") return Math.min(concurrency, 32) / 0.005;
  if (model === "cpu_2") return Math.min(concurrency, 2) / 0.002;
  return undefined;
}

/**
 * The peers' cells DenoTriton does not beat by its goal on either engine, worst first.
 *
 * @param run The run.
 * @returns The cells.
 */
export function shortCells(run: PeersRun): ShortCell[] {
  const out: ShortCell[] = [];
  for (const peer of otherPeers(run)) {
    for (const model of run.models) {
      for (const concurrency of run.concurrencies) {
        let best = 0;
        let engine: PeerName = "builtin";
        for (const e of engines(run)) {
          const r = ratioOf(run, e, peer, model, concurrency);
          if (r !== undefined && r > best) [best, engine] = [r, e];
        }
        const goal = goalOf(model);
        if (best === 0 || best >= goal) continue;
        const ceiling = modelCeiling(model, concurrency);
        const theirs = cellOf(run, peer, model, concurrency)?.result?.throughput ?? 0;
        const bound = ceiling === undefined || theirs === 0 ? undefined : (
          `the model allows at most ${fmt(ceiling)} req/s here; ${peer} serves ` +
          `${fmt(100 * theirs / ceiling)}% of that, so no server can pass ${
            (ceiling / theirs).toFixed(2)
          }× it`
        );
        out.push({
          peer,
          model,
          concurrency,
          best,
          engine,
          goal,
          ...(bound === undefined ? {} : { bound }),
        });
      }
    }
  }
  return out.sort((a, b) => a.best / a.goal - b.best / b.goal);
}

/**
 * The chart's bars: per peer and model, the geometric mean over concurrencies of each engine's
 * throughput ratio; then each peer's startup (median over its servers) as peer ÷ DenoTriton.
 *
 * @param run The run.
 * @returns The rows.
 */
export function peerHeadlines(run: PeersRun): Headline[] {
  const rows: Headline[] = [];
  for (const peer of otherPeers(run)) {
    for (const model of run.models) {
      const ratios: Headline["ratios"] = {};
      for (const engine of engines(run)) {
        const values = run.concurrencies.map((c) => ratioOf(run, engine, peer, model, c))
          .filter((r): r is number => r !== undefined && r > 0);
        const mean = geomean(values);
        if (mean !== undefined) ratios[engine as "builtin" | "triton"] = mean;
      }
      if (Object.keys(ratios).length > 0) rows.push({ label: `${peer} ${model}`, ratios });
    }
    const ratios: Headline["ratios"] = {};
    for (const engine of engines(run)) {
      const r = medianOf(run, peer, "startupMs") / medianOf(run, engine, "startupMs");
      if (Number.isFinite(r) && r > 0) ratios[engine as "builtin" | "triton"] = r;
    }
    if (Object.keys(ratios).length > 0) rows.push({ label: `${peer} startup`, ratios });
  }
  return rows;
}

function medianOf(
  run: PeersRun,
  peer: PeerName,
  field: "startupMs" | "rssIdleBytes" | "rssLoadBytes" | "pssIdleBytes" | "pssLoadBytes",
): number {
  const values = run.servers.filter((s) => s.peer === peer && s.error === undefined)
    .map((s) => s[field]).sort((a, b) => a - b);
  if (values.length === 0) return NaN;
  const middle = Math.floor(values.length / 2);
  return values.length % 2 === 1 ? values[middle]! : (values[middle - 1]! + values[middle]!) / 2;
}

/**
 * The SVG chart of a run.
 *
 * @param run The run.
 * @returns SVG text.
 */
export function peersChart(run: PeersRun): string {
  return ratioChart(
    peerHeadlines(run),
    `DenoTriton ÷ its peers, HTTP JSON, ${run.date.slice(0, 10)}, ${run.facts["cores"]} cores`,
    "log scale; right of 1× = DenoTriton better (req/s, geomean over c=1/8/32; startup: peer ÷ DenoTriton)",
  );
}

function fmt(value: number, digits = 0): string {
  return value.toLocaleString("en-US", {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

function ms(us: number): string {
  return us >= 10_000 ? fmt(us / 1000, 1) : fmt(us / 1000, 2);
}

function mib(bytes: number): string {
  return Number.isFinite(bytes) ? fmt(bytes / 1048576, 0) : "—";
}

function ratioText(r: number | undefined): string {
  return r === undefined ? "—" : `${r.toFixed(2)}×`;
}

function titleOf(run: PeersRun, peer: PeerName): string {
  return run.peers.find((p) => p.name === peer)?.title ?? peer;
}

/**
 * The line of a failure that says why, at most 200 characters.
 *
 * @param message The failure.
 * @returns The line.
 */
function errorLine(message: string): string {
  const lines = message.split("\n").map((line) => line.trim()).filter((line) => line !== "");
  return (lines.find((line) => /error/i.test(line)) ?? lines[0] ?? "").slice(0, 200);
}

/**
 * The Markdown report of a run.
 *
 * @param run The run.
 * @param chartFile The SVG's file name, relative to the report.
 * @returns Markdown text.
 */
export function peersMarkdown(run: PeersRun, chartFile: string): string {
  const peers = otherPeers(run);
  const mine = engines(run);
  const lines: string[] = [
    `# DenoTriton and its peers — ${run.date.slice(0, 10)} on ${run.machine}`,
    "",
    `${run.quick ? "**Quick run** (harness check only, not a measurement). " : ""}` +
    "Every server serves the same five models, one model per server process, and one load " +
    "generator (`bench/peers/load.ts`, one process on the same machine) drives each with its " +
    "natural HTTP JSON request in a closed loop of 1, 8 and 32 clients, one keep-alive connection " +
    "each, checking every answer value by value. Each cell: a 1 s warm-up at its concurrency " +
    `(after a 2 s warm-up at 8 per server), then ${run.windows} windows of ${run.windowMs} ms ` +
    "(a window runs on until it has 20 answers, 3 for the 1M tensor); req/s is the median window, ± the windows' " +
    "spread ((max − min) / median), p50/p99 over all the windows' requests, server CPU the " +
    "server's whole process tree (`/proc`) over the windows divided by the requests answered in " +
    "them. × is DenoTriton's req/s ÷ the peer's in the same cell.",
    "",
    `![DenoTriton ÷ peers](${chartFile})`,
    "",
    "## Machine",
    "",
    "| | |",
    "| --- | --- |",
    ...Object.entries(run.facts).map(([key, value]) => `| ${key} | ${value} |`),
    "",
  ];
  if (run.notes.length > 0) lines.push("## Notes", "", ...run.notes.map((n) => `- ${n}`), "");
  lines.push(
    "## The servers",
    "",
    "| server | versions | request | settings per model |",
    "| --- | --- | --- | --- |",
  );
  for (const p of run.peers) {
    const settings = run.models.map((model) => {
      const server = run.servers.find((s) => s.peer === p.name && s.model === model);
      return server === undefined ? "" : `${model}: ${server.settings}`;
    }).filter((s) => s !== "").join("<br>");
    const versions = Object.entries(p.versions).map(([k, v]) => `${k} ${v}`).join(", ");
    lines.push(`| ${p.title} | ${versions} | ${p.request} | ${settings} |`);
  }
  lines.push("");
  if (run.findings !== undefined && run.findings.trim() !== "") {
    lines.push(run.findings.trim(), "");
  }
  for (const engine of mine) {
    lines.push(
      `## ${titleOf(run, engine)} ÷ each peer`,
      "",
      `| peer | ${run.models.map((m) => `${m} c=${run.concurrencies.join("/")}`).join(" | ")} |`,
      `| --- | ${run.models.map(() => "---:").join(" | ")} |`,
    );
    for (const peer of peers) {
      lines.push(
        `| ${titleOf(run, peer)} | ${
          run.models.map((model) =>
            run.concurrencies.map((c) => {
              const r = ratioOf(run, engine, peer, model, c);
              return r === undefined ? "—" : r.toFixed(2);
            }).join(" / ")
          ).join(" | ")
        } |`,
      );
    }
    lines.push("");
  }
  lines.push(
    "Goal (issue 57): at least 2× every peer on identity_small and add_sub, at least 1.2× on the " +
      "model-bound cells (fixed_5ms, cpu_2) and, here, on identity_large, on at least one engine.",
    "",
  );

  for (const model of run.models) {
    const spec = MODEL_SPECS[model];
    lines.push(`## ${model}: ${spec.title}`, "");
    const header = ["server", "c", "req/s", "p50 / p99 ms", "server CPU µs/req"];
    for (const engine of mine) header.push(`${titleOf(run, engine).replace("DenoTriton ", "")} ×`);
    lines.push(`| ${header.join(" | ")} |`, `| ${header.map(() => "---").join(" | ")} |`);
    for (const p of run.peers) {
      for (const c of run.concurrencies) {
        const cell = cellOf(run, p.name, model, c);
        if (cell === undefined) continue;
        const r = cell.result;
        const row = [p.title, String(c)];
        if (r === undefined) row.push("error", "—", "—");
        else {
          row.push(
            `${fmt(r.throughput, r.throughput < 100 ? 1 : 0)} ±${fmt(r.spread * 100)}%`,
            `${ms(r.p50Us)} / ${ms(r.p99Us)}`,
            r.serverCpuUsPerRequest === undefined ? "—" : fmt(r.serverCpuUsPerRequest),
          );
        }
        for (const engine of mine) {
          row.push(p.name === engine ? "" : ratioText(ratioOf(run, engine, p.name, model, c)));
        }
        lines.push(`| ${row.join(" | ")} |`);
      }
    }
    lines.push("");
    for (const cell of run.cells.filter((c) => c.model === model && c.error !== undefined)) {
      lines.push(
        `- error: ${titleOf(run, cell.peer)} c${cell.concurrency}: \`${errorLine(cell.error!)}\``,
      );
    }
    const failedAnswers = run.cells.filter((c) => c.model === model && (c.result?.failed ?? 0) > 0);
    for (const cell of failedAnswers) {
      lines.push(
        `- ${titleOf(run, cell.peer)} c${cell.concurrency}: ${cell.result!.failed} failed ` +
          `requests (${cell.result!.errors[0] ?? ""})`,
      );
    }
    lines.push("");
  }

  if (run.perfCells.length > 0) {
    lines.push(
      "## KServe v2 with binary tensors (perf_analyzer)",
      "",
      "The servers that speak KServe v2, driven by `perf_analyzer` (tritonclient 2.51.0) as " +
        "`deno task bench` drives them: binary tensors over HTTP and gRPC, its random inputs, " +
        `${run.windows} windows of ${run.windowMs} ms. × is DenoTriton ÷ tritonserver.`,
      "",
    );
    const kservePeers = run.peers.filter((p) => run.perfCells.some((c) => c.peer === p.name));
    const header = ["model", "proto", "c"];
    for (const p of kservePeers) header.push(`${p.title} infer/s`, "p50 / p99 ms");
    for (const engine of mine) header.push(`${titleOf(run, engine).replace("DenoTriton ", "")} ×`);
    lines.push(`| ${header.join(" | ")} |`, `| ${header.map(() => "---").join(" | ")} |`);
    const keys = [
      ...new Set(run.perfCells.map((c) => `${c.model}|${c.protocol}|${c.concurrency}`)),
    ];
    for (const key of keys) {
      const [model, protocol, c] = key.split("|") as [ModelName, "http" | "grpc", string];
      const find = (peer: PeerName): PerfCell | undefined =>
        run.perfCells.find((x) =>
          x.peer === peer && x.model === model && x.protocol === protocol &&
          x.concurrency === Number(c)
        );
      const row: string[] = [model, protocol, c];
      for (const p of kservePeers) {
        const r = find(p.name)?.result;
        row.push(
          r === undefined
            ? (find(p.name)?.error === undefined ? "—" : "error")
            : `${fmt(r.throughput, r.throughput < 100 ? 1 : 0)} ±${fmt(r.spread * 100)}%`,
          r === undefined ? "—" : `${ms(r.p50Us)} / ${ms(r.p99Us)}`,
        );
      }
      const theirs = find("tritonserver")?.result?.throughput;
      for (const engine of mine) {
        const ours = find(engine)?.result?.throughput;
        row.push(
          ours === undefined || theirs === undefined || theirs === 0
            ? "—"
            : `${(ours / theirs).toFixed(2)}×`,
        );
      }
      lines.push(`| ${row.join(" | ")} |`);
    }
    lines.push("");
    for (const cell of run.perfCells.filter((c) => c.error !== undefined)) {
      lines.push(
        `- error: ${titleOf(run, cell.peer)} ${cell.model} ${cell.protocol} ` +
          `c${cell.concurrency}: \`${errorLine(cell.error!)}\``,
      );
    }
    lines.push("");
  }

  lines.push(
    "## Startup and memory",
    "",
    "Startup: from spawning the server to its first right answer to the model's request. RSS: " +
      "resident memory summed over the server's process tree; PSS: the same with each shared page " +
      "divided among the processes that share it (Python servers fork or spawn several). Idle: " +
      "right after the first answer; peak: sampled every 500 ms over the server's cells. MiB.",
    "",
    "| server | model | startup ms | processes | RSS idle | RSS peak | PSS idle | PSS peak |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
  );
  for (const s of run.servers) {
    lines.push(
      s.error === undefined
        ? `| ${titleOf(run, s.peer)} | ${s.model} | ${fmt(s.startupMs)} | ${s.processes} | ${
          mib(s.rssIdleBytes)
        } | ${mib(s.rssLoadBytes)} | ${mib(s.pssIdleBytes)} | ${mib(s.pssLoadBytes)} |`
        : `| ${titleOf(run, s.peer)} | ${s.model} | error: ${errorLine(s.error)} | | | | | |`,
    );
  }
  lines.push("", "Medians over each server's models:", "");
  lines.push(
    "| server | startup ms | RSS idle | RSS peak | PSS idle | PSS peak | startup, peer ÷ " +
      mine.map((e) => titleOf(run, e).replace("DenoTriton ", "")).join(" / ") + " |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
  );
  for (const p of run.peers) {
    const startup = medianOf(run, p.name, "startupMs");
    lines.push(
      `| ${p.title} | ${fmt(startup)} | ${mib(medianOf(run, p.name, "rssIdleBytes"))} | ${
        mib(medianOf(run, p.name, "rssLoadBytes"))
      } | ${mib(medianOf(run, p.name, "pssIdleBytes"))} | ${
        mib(medianOf(run, p.name, "pssLoadBytes"))
      } | ${
        peers.includes(p.name)
          ? mine.map((e) => (startup / medianOf(run, e, "startupMs")).toFixed(1) + "×").join(" / ")
          : ""
      } |`,
    );
  }
  lines.push("");

  const short = shortCells(run);
  lines.push("## Cells short of the goal", "");
  if (short.length === 0) {
    lines.push("None: DenoTriton reaches the goal against every peer in every cell.", "");
  } else {
    lines.push(
      "Each peer's cell where neither engine reaches its goal (2× on identity_small and add_sub, " +
        "1.2× elsewhere), worst first, with the better engine's ratio. Where the model bounds the " +
        "cell the line says so; the others' causes are under Findings and the profiles below.",
      "",
      ...short.map((s) =>
        `- ${titleOf(run, s.peer)}, ${s.model} c=${s.concurrency}: ${s.best.toFixed(2)}× ` +
        `(${titleOf(run, s.engine).replace("DenoTriton ", "")}; goal ${s.goal}×)` +
        (s.bound === undefined ? "" : `: ${s.bound}`)
      ),
      "",
    );
  }

  if (run.profiles.length > 0) {
    lines.push(
      "## Where DenoTriton's time goes in its close cells",
      "",
      "Every DenoTriton cell that wins by less than 1.5× against some peer (or loses), measured " +
        "again in a server of its own under the V8 sampling profiler (`deno run --inspect`; the " +
        "main thread only, so a Worker's model time shows as idle there), with the top frames by " +
        "self time after idle is taken out.",
      "",
    );
    for (const p of run.profiles) {
      lines.push(
        `### ${titleOf(run, p.engine)}: ${p.model} c=${p.concurrency} (${p.ratio.toFixed(2)}× ${
          titleOf(run, p.peer)
        })`,
        "",
        `${
          p.result === undefined ? "" : `Under the profiler: ${fmt(p.result.throughput)} req/s, ` +
            `server CPU ${fmt(p.result.serverCpuUsPerRequest ?? NaN)} µs per request. `
        }Main thread idle: ${fmt(p.idleShare * 100, 1)}% of the samples.`,
        "",
        "| self (of busy) | frame |",
        "| ---: | --- |",
        ...p.top.map((f) =>
          `| ${fmt(f.selfShare * 100, 1)}% | \`${f.frame.replace(/\|/g, "\\|")}\` |`
        ),
        "",
      );
    }
  }
  return lines.join("\n");
}
