/**
 * Turns a benchmark run into Markdown tables, an SVG bar chart of the headline ratios and the
 * README summary.
 *
 * @module
 */

import type { PerfResult } from "./perf.ts";
import type { TopFrame } from "./profile.ts";

/** The servers compared. */
export type ServerName = "pytriton" | "builtin" | "triton";

/** Display names. */
export const SERVER_TITLES: Readonly<Record<ServerName, string>> = {
  pytriton: "PyTriton",
  builtin: "DenoTriton built-in",
  triton: "DenoTriton Triton core",
};

/** A scenario: one model under load. */
export interface Scenario {
  /** Model name (the same on every server). */
  readonly model: string;
  /** Heading. */
  readonly title: string;
  /** Payload bytes per inference (in + out), to report GB/s. */
  readonly bytesPerInfer?: number;
  /**
   * The throughput ratio DenoTriton / PyTriton each cell of this scenario aims at: cells below it
   * are listed, and profiled, as lost.
   *
   * @default {1}
   */
  readonly target?: number;
}

/** One measured cell. */
export interface Cell {
  /** The server. */
  readonly server: ServerName;
  /** The model. */
  readonly model: string;
  /** Protocol. */
  readonly protocol: "http" | "grpc";
  /** Concurrency. */
  readonly concurrency: number;
  /** The measurement, unless it failed. */
  readonly result?: PerfResult;
  /** Why it failed. */
  readonly error?: string;
}

/** Per-server facts. */
export interface ServerFacts {
  /** ms to `/v2/health/ready` of each start. */
  readonly healthReadyMs: readonly number[];
  /** ms to every model ready, each start. */
  readonly modelsReadyMs: readonly number[];
  /** Resident memory of the process tree when idle after start, bytes. */
  readonly rssIdleBytes: number;
  /** Peak resident memory of the process tree under load, bytes. */
  readonly rssLoadBytes: number;
  /** Extra notes (e.g. the instance form of the CPU models). */
  readonly note?: string;
}

/** A profile of a cell DenoTriton lost. */
export interface LossProfile {
  /** The server profiled. */
  readonly server: ServerName;
  /** The cell. */
  readonly model: string;
  /** Protocol. */
  readonly protocol: "http" | "grpc";
  /** Concurrency. */
  readonly concurrency: number;
  /** Throughput ratio DenoTriton / PyTriton of that cell. */
  readonly ratio: number;
  /** The top frames by self time. */
  readonly top: readonly TopFrame[];
}

/** A whole run. */
export interface BenchRun {
  /** ISO date and time. */
  readonly date: string;
  /** Machine name. */
  readonly machine: string;
  /** Short run (`--quick`). */
  readonly quick: boolean;
  /** Name → value facts: cores, memory, versions, commit. */
  readonly facts: Readonly<Record<string, string>>;
  /** Scenarios in order. */
  readonly scenarios: readonly Scenario[];
  /** Every cell. */
  readonly cells: readonly Cell[];
  /** Per server. */
  readonly servers: Readonly<Partial<Record<ServerName, ServerFacts>>>;
  /** Window length, ms, and windows per cell. */
  readonly windowMs: number;
  /** Windows per cell. */
  readonly windows: number;
  /** Profiles of lost cells. */
  readonly profiles: readonly LossProfile[];
  /** Free-text notes (noise, forms used). */
  readonly notes: readonly string[];
}

const DENO_SERVERS: readonly ServerName[] = ["builtin", "triton"];

function find(
  run: BenchRun,
  server: ServerName,
  model: string,
  protocol: string,
  c: number,
): Cell | undefined {
  return run.cells.find((cell) =>
    cell.server === server && cell.model === model && cell.protocol === protocol &&
    cell.concurrency === c
  );
}

/**
 * The throughput ratio DenoTriton / PyTriton of a cell.
 *
 * @param run The run.
 * @param server A DenoTriton server.
 * @param cell Model, protocol, concurrency.
 * @returns The ratio, or `undefined` when either side is missing.
 */
export function throughputRatio(
  run: BenchRun,
  server: ServerName,
  cell: Pick<Cell, "model" | "protocol" | "concurrency">,
): number | undefined {
  const mine = find(run, server, cell.model, cell.protocol, cell.concurrency)?.result;
  const theirs = find(run, "pytriton", cell.model, cell.protocol, cell.concurrency)?.result;
  if (mine === undefined || theirs === undefined || theirs.throughput === 0) return undefined;
  return mine.throughput / theirs.throughput;
}

/** A DenoTriton cell below its scenario's target. */
export interface LostCell {
  /** The cell. */
  readonly cell: Cell;
  /** Its throughput ratio DenoTriton / PyTriton. */
  readonly ratio: number;
  /** Its scenario's target ratio. */
  readonly target: number;
}

/**
 * The DenoTriton cells whose throughput ratio to PyTriton is below their scenario's target
 * (1 unless the scenario sets one), worst first.
 *
 * @param run The run.
 * @returns The cells, with their ratios and targets.
 *
 * @example A cell that wins, but by less than its target
 * ```ts
 * import assert from "node:assert/strict";
 * import { type BenchRun, lostCells } from "./report.ts";
 *
 * const cell = (server: "pytriton" | "builtin", throughput: number) => ({
 *   server, model: "m", protocol: "grpc" as const, concurrency: 1,
 *   result: { throughput, windows: [], spread: 0, avgLatencyUs: 0, p50Us: 0, p99Us: 0 },
 * });
 * const run = {
 *   scenarios: [{ model: "m", title: "M", target: 1.5 }],
 *   cells: [cell("pytriton", 100), cell("builtin", 120)],
 * } as unknown as BenchRun;
 * assert.deepEqual(lostCells(run).map(({ ratio, target }) => [ratio, target]), [[1.2, 1.5]]);
 * ```
 */
export function lostCells(run: BenchRun): LostCell[] {
  const targets = new Map(run.scenarios.map((scenario) => [scenario.model, scenario.target ?? 1]));
  return run.cells.filter((cell) => cell.server !== "pytriton").map((cell) => ({
    cell,
    ratio: throughputRatio(run, cell.server, cell),
    target: targets.get(cell.model) ?? 1,
  })).filter((x): x is LostCell => x.ratio !== undefined && x.ratio < x.target)
    .sort((a, b) => a.ratio / a.target - b.ratio / b.target);
}

/**
 * The geometric mean.
 *
 * @param values Positive numbers.
 * @returns Their geometric mean, or `undefined` for none.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { geomean } from "./report.ts";
 *
 * assert.equal(geomean([2, 8]), 4);
 * assert.equal(geomean([]), undefined);
 * ```
 */
export function geomean(values: readonly number[]): number | undefined {
  if (values.length === 0) return undefined;
  return Math.exp(values.reduce((sum, v) => sum + Math.log(v), 0) / values.length);
}

/** Headline ratios: per scenario and server, higher means DenoTriton does better. */
export interface Headline {
  /** Label. */
  readonly label: string;
  /** Server → ratio. */
  readonly ratios: Partial<Record<ServerName, number>>;
}

/**
 * The chart's bars: per scenario the geometric mean of the throughput ratios, then startup
 * and memory as PyTriton / DenoTriton (so higher is better for DenoTriton everywhere).
 *
 * @param run The run.
 * @returns One headline per scenario, startup, idle and loaded memory.
 */
export function headlines(run: BenchRun): Headline[] {
  const rows: Headline[] = run.scenarios.map((scenario) => {
    const ratios: Partial<Record<ServerName, number>> = {};
    for (const server of DENO_SERVERS) {
      const values = run.cells.filter((cell) =>
        cell.server === server && cell.model === scenario.model
      )
        .map((cell) => throughputRatio(run, server, cell))
        .filter((r): r is number => r !== undefined && r > 0);
      const mean = geomean(values);
      if (mean !== undefined) ratios[server] = mean;
    }
    return { label: scenario.model, ratios };
  });
  const py = run.servers.pytriton;
  const inverse = (pick: (facts: ServerFacts) => number, label: string): Headline => {
    const ratios: Partial<Record<ServerName, number>> = {};
    for (const server of DENO_SERVERS) {
      const facts = run.servers[server];
      if (py !== undefined && facts !== undefined && pick(facts) > 0) {
        ratios[server] = pick(py) / pick(facts);
      }
    }
    return { label, ratios };
  };
  const medianOf = (values: readonly number[]): number =>
    [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
  rows.push(inverse((f) => medianOf(f.modelsReadyMs), "startup"));
  rows.push(inverse((f) => f.rssIdleBytes, "RSS idle"));
  rows.push(inverse((f) => f.rssLoadBytes, "RSS load"));
  return rows.filter((row) => Object.keys(row.ratios).length > 0);
}

function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/**
 * A horizontal bar chart of the headline ratios on a log scale, with a line at 1×.
 *
 * @param rows The headlines.
 * @param title Chart title.
 * @param subtitle The line under the title: what is compared, and which way is better.
 * @returns SVG text.
 *
 * @example One row
 * ```ts
 * import assert from "node:assert/strict";
 * import { ratioChart } from "./report.ts";
 *
 * const svg = ratioChart([{ label: "add_sub", ratios: { builtin: 2 } }], "Ratios");
 * assert.match(svg, /^<svg /);
 * assert.match(svg, /2\.00×/);
 * ```
 */
export function ratioChart(
  rows: readonly Headline[],
  title: string,
  subtitle =
    "DenoTriton vs PyTriton, log scale; right of 1× = DenoTriton better (throughput ratio; PyTriton/DenoTriton for startup and RSS)",
): string {
  const colors: Record<string, string> = { builtin: "#3b82f6", triton: "#10b981" };
  const left = 110;
  const width = 520;
  const barH = 14;
  const gap = 8;
  const top = 44;
  const all = rows.flatMap((row) => Object.values(row.ratios));
  const maxLog = Math.max(1, ...all.map((v) => Math.abs(Math.log2(v)))) + 0.5;
  const x = (ratio: number): number => left + width / 2 + (Math.log2(ratio) / maxLog) * (width / 2);
  const rowH = DENO_SERVERS.length * barH + gap * 2;
  const height = top + rows.length * rowH + 20;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${
      left + width + 80
    }" height="${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="8" y="16" font-size="13" font-weight="bold">${escapeXml(title)}</text>`,
    `<text x="8" y="32" fill="#555">${escapeXml(subtitle)}</text>`,
  ];
  DENO_SERVERS.forEach((server, i) => {
    parts.push(
      `<rect x="${left + width - 200 + i * 110}" y="${height - 14}" width="10" height="10" fill="${
        colors[server]
      }"/>`,
      `<text x="${left + width - 186 + i * 110}" y="${height - 5}">${
        escapeXml(SERVER_TITLES[server].replace("DenoTriton ", ""))
      }</text>`,
    );
  });
  rows.forEach((row, r) => {
    const y0 = top + r * rowH + gap;
    parts.push(
      `<text x="${left - 6}" y="${y0 + barH + 4}" text-anchor="end">${escapeXml(row.label)}</text>`,
    );
    DENO_SERVERS.forEach((server, i) => {
      const ratio = row.ratios[server];
      if (ratio === undefined) return;
      const y = y0 + i * barH;
      const a = x(1);
      const b = x(ratio);
      parts.push(
        `<rect x="${Math.min(a, b).toFixed(1)}" y="${y}" width="${
          Math.max(1, Math.abs(b - a)).toFixed(1)
        }" height="${barH - 2}" fill="${colors[server]}"/>`,
        `<text x="${(Math.max(a, b) + 4).toFixed(1)}" y="${y + barH - 3}">${
          ratio.toFixed(2)
        }×</text>`,
      );
    });
  });
  parts.push(
    `<line x1="${x(1)}" y1="${top - 4}" x2="${x(1)}" y2="${
      height - 20
    }" stroke="#333" stroke-dasharray="3,2"/>`,
    `<text x="${x(1)}" y="${top - 6}" text-anchor="middle">1×</text>`,
    "</svg>",
  );
  return parts.join("\n") + "\n";
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
  return `${fmt(bytes / 1048576, 0)} MiB`;
}

function servers(run: BenchRun): ServerName[] {
  return (["pytriton", "builtin", "triton"] as const).filter((server) =>
    run.cells.some((cell) => cell.server === server) || run.servers[server] !== undefined
  );
}

/**
 * The line of a failed cell's output that says why: the first naming an error, else the last
 * (perf_analyzer's "Failed to obtain stable measurement." names none), at most 200 characters.
 *
 * @param output The failure's message (perf_analyzer's output).
 * @returns The line.
 */
export function errorLine(output: string): string {
  const lines = output.split("\n").map((line) => line.trim()).filter((line) => line !== "");
  return (lines.find((line) => /error/i.test(line)) ?? lines.at(-1) ?? "").slice(0, 200);
}

/**
 * The Markdown report of a run.
 *
 * @param run The run.
 * @param chartFile The SVG's file name, relative to the report.
 * @returns Markdown text.
 */
export function markdownReport(run: BenchRun, chartFile: string): string {
  const present = servers(run);
  const lines: string[] = [
    `# DenoTriton vs PyTriton — ${run.date.slice(0, 10)} on ${run.machine}`,
    "",
    `${run.quick ? "**Quick run** (harness check only, not a measurement). " : ""}` +
    `Load tool: \`perf_analyzer\` only. Each cell is the median of ${run.windows} windows of ` +
    `${run.windowMs} ms (perf_analyzer \`--measurement-interval ${run.windowMs} -s 1000 --max-trials ${run.windows}\`, ` +
    "so every cell runs the same number of windows); ± is the spread of those windows' throughputs, " +
    "(max − min) / median. p50/p99 are perf_analyzer's client latencies over the same windows. " +
    "× is the throughput ratio DenoTriton / PyTriton (above 1 = DenoTriton serves more).",
    "",
    `![Headline ratios](${chartFile})`,
    "",
    "## Machine",
    "",
    "| | |",
    "| --- | --- |",
    ...Object.entries(run.facts).map(([key, value]) => `| ${key} | ${value} |`),
    "",
  ];
  if (run.notes.length > 0) {
    lines.push("## Notes", "", ...run.notes.map((note) => `- ${note}`), "");
  }
  lines.push(
    "## Headline ratios",
    "",
    "| | " + present.filter((s) => s !== "pytriton")
      .map((s) => SERVER_TITLES[s]).join(" | ") +
      " |",
  );
  lines.push(
    "| --- | " + present.filter((s) => s !== "pytriton").map(() => "---:").join(" | ") + " |",
  );
  for (const row of headlines(run)) {
    lines.push(
      `| ${row.label} | ` +
        present.filter((s) => s !== "pytriton").map((s) =>
          row.ratios[s] === undefined ? "—" : `${row.ratios[s]!.toFixed(2)}×`
        ).join(" | ") + " |",
    );
  }
  lines.push(
    "",
    "Per scenario: geometric mean of the cells' throughput ratios. startup / RSS: PyTriton's value " +
      "divided by DenoTriton's (above 1 = DenoTriton starts faster / uses less memory).",
    "",
  );
  for (const scenario of run.scenarios) {
    const cells = run.cells.filter((cell) => cell.model === scenario.model);
    if (cells.length === 0) continue;
    lines.push(`## ${scenario.title}`, "");
    const header = ["proto", "conc"];
    for (const server of present) {
      header.push(`${SERVER_TITLES[server]} infer/s`, "p50 / p99 ms");
      if (scenario.bytesPerInfer !== undefined) header.push("GB/s");
      if (server !== "pytriton") header.push("×");
    }
    lines.push(`| ${header.join(" | ")} |`, `| ${header.map(() => "---").join(" | ")} |`);
    const keys = [...new Set(cells.map((cell) => `${cell.protocol}:${cell.concurrency}`))];
    for (const key of keys) {
      const [protocol, c] = key.split(":") as ["http" | "grpc", string];
      const row = [protocol, c];
      for (const server of present) {
        const cell = find(run, server, scenario.model, protocol, Number(c));
        const result = cell?.result;
        if (result === undefined) {
          row.push(cell?.error !== undefined ? "error" : "—", "—");
          if (scenario.bytesPerInfer !== undefined) row.push("—");
        } else {
          row.push(
            `${fmt(result.throughput, result.throughput < 100 ? 1 : 0)} ±${
              fmt(result.spread * 100, 0)
            }%`,
            `${ms(result.p50Us)} / ${ms(result.p99Us)}`,
          );
          if (scenario.bytesPerInfer !== undefined) {
            row.push(fmt(result.throughput * scenario.bytesPerInfer / 1e9, 2));
          }
        }
        if (server !== "pytriton") {
          const ratio = throughputRatio(run, server, {
            model: scenario.model,
            protocol,
            concurrency: Number(c),
          });
          row.push(ratio === undefined ? "—" : `${ratio.toFixed(2)}×`);
        }
      }
      lines.push(`| ${row.join(" | ")} |`);
    }
    lines.push("");
    const errors = cells.filter((cell) => cell.error !== undefined);
    for (const cell of errors) {
      lines.push(
        `- error: ${SERVER_TITLES[cell.server]} ${cell.protocol} c${cell.concurrency}: ` +
          "`" + errorLine(cell.error!) + "`",
      );
    }
    if (errors.length > 0) lines.push("");
  }
  lines.push("## 6. Startup and memory", "");
  lines.push(
    "| server | to /v2/health/ready ms | to all models ready ms | RSS idle | RSS peak under load | note |",
    "| --- | ---: | ---: | ---: | ---: | --- |",
  );
  for (const server of present) {
    const facts = run.servers[server];
    if (facts === undefined) continue;
    lines.push(
      `| ${SERVER_TITLES[server]} | ${facts.healthReadyMs.map((v) => fmt(v)).join(", ")} | ${
        facts.modelsReadyMs.map((v) => fmt(v)).join(", ")
      } | ${mib(facts.rssIdleBytes)} | ${mib(facts.rssLoadBytes)} | ${facts.note ?? ""} |`,
    );
  }
  lines.push(
    "",
    "Times are from spawning the process, one per start. RSS is the sum over the process tree " +
      "(PyTriton: the Python process, tritonserver, one Python-backend stub per model instance " +
      "and the tensor stores); the peak is sampled every 250 ms over all load cells.",
    "",
  );
  const losses = lostCells(run);
  if (losses.length > 0) {
    lines.push(
      "## Cells DenoTriton loses",
      "",
      "Below 1×, or below the scenario's target where it has one (1.5× for identity " +
        "float32[1,048,576]):",
      "",
      ...losses.map(({ cell, ratio, target }) =>
        `- ${SERVER_TITLES[cell.server]}, ${cell.model} ${cell.protocol} c${cell.concurrency}: ` +
        `${ratio.toFixed(2)}×${target === 1 ? "" : ` (target ${target}×)`} (spread ` +
        `±${fmt((cell.result?.spread ?? 0) * 100)}%)`
      ),
      "",
    );
  }
  if (run.profiles.length > 0) {
    lines.push(
      "## Where DenoTriton loses: profiles",
      "",
      "CPU profile of the DenoTriton server over each lost cell, measured again for the " +
        "profile (V8 sampling profiler through `deno run --inspect`; the main thread only), top " +
        "frames by self time:",
      "",
    );
    for (const profile of run.profiles) {
      lines.push(
        `### ${
          SERVER_TITLES[profile.server]
        }: ${profile.model} ${profile.protocol} c${profile.concurrency} (${
          profile.ratio.toFixed(2)
        }×)`,
        "",
        "| self | frame |",
        "| ---: | --- |",
        ...profile.top.map((frame) =>
          `| ${fmt(frame.selfShare * 100, 1)}% | \`${frame.frame.replace(/\|/g, "\\|")}\` |`
        ),
        "",
      );
    }
  }
  return lines.join("\n");
}

/**
 * The README's "Benchmarks" section for a run.
 *
 * @param run The run.
 * @param reportPath The report's path from the repository root.
 * @param chartPath The chart's path from the repository root.
 * @returns Markdown, starting with the `## Benchmarks` heading.
 */
export function readmeSection(run: BenchRun, reportPath: string, chartPath: string): string {
  const rows = headlines(run);
  const present = servers(run).filter((s) => s !== "pytriton");
  return [
    "## Benchmarks",
    "",
    "`deno task bench` runs PyTriton 0.7.0 and DenoTriton (built-in engine, Triton core) with the " +
    "same models under `perf_analyzer` and writes `bench/results/<date>-<machine>.md` " +
    "(`deno task bench --quick` only checks the harness). Newest run: " +
    `[${reportPath.split("/").at(-1)}](${reportPath}) (${run.facts["cores"] ?? "?"} cores; ` +
    "other work shared the machine, so read the ratios, not the absolute numbers).",
    "",
    `![DenoTriton / PyTriton](${chartPath})`,
    "",
    `| DenoTriton / PyTriton | ${present.map((s) => SERVER_TITLES[s]).join(" | ")} |`,
    `| --- | ${present.map(() => "---:").join(" | ")} |`,
    ...rows.map((row) =>
      `| ${row.label} | ${
        present.map((s) => row.ratios[s] === undefined ? "—" : `${row.ratios[s]!.toFixed(2)}×`)
          .join(" | ")
      } |`
    ),
    "",
    "Above 1× DenoTriton does better: throughput ratio per scenario (geometric mean over HTTP/gRPC " +
    "and concurrency 1, 8, 32), PyTriton ÷ DenoTriton for startup time and resident memory. " +
    "The report lists every cell DenoTriton loses (or wins by less than its scenario's target), " +
    "with a CPU profile of each (of the 12 worst per server when there are more).",
    "",
  ].join("\n");
}

/**
 * Replaces (or appends) the generated part of a README's `## Benchmarks` section: from its heading
 * to the next heading, so `###` subsections written by hand under it stay, as does the rest.
 *
 * @param readme The README text.
 * @param section The new section, starting with `## Benchmarks`.
 * @returns The new README text.
 *
 * @example Replace, keeping a subsection and the next section
 * ```ts
 * import assert from "node:assert/strict";
 * import { replaceReadmeSection } from "./report.ts";
 *
 * const old = "# X\n\n## Benchmarks\n\nold\n\n### More\n\nmine\n\n## Next\n\nkeep\n";
 * assert.equal(
 *   replaceReadmeSection(old, "## Benchmarks\n\nnew\n"),
 *   "# X\n\n## Benchmarks\n\nnew\n\n### More\n\nmine\n\n## Next\n\nkeep\n",
 * );
 * ```
 *
 * @example Append where there is none
 * ```ts
 * import assert from "node:assert/strict";
 * import { replaceReadmeSection } from "./report.ts";
 *
 * assert.equal(replaceReadmeSection("# X\n", "## Benchmarks\n\nnew\n"), "# X\n\n## Benchmarks\n\nnew\n");
 * ```
 */
export function replaceReadmeSection(readme: string, section: string): string {
  const start = readme.search(/^## Benchmarks\s*$/m);
  if (start < 0) return readme.trimEnd() + "\n\n" + section.trimEnd() + "\n";
  const rest = readme.slice(start + "## Benchmarks".length);
  const next = rest.search(/^#{2,3} /m);
  const tail = next < 0 ? "" : "\n" + rest.slice(next);
  return readme.slice(0, start) + section.trimEnd() + "\n" + tail;
}

/**
 * Formats written report files (Markdown, SVG, the README) with `deno fmt`, so a run's files are
 * committed as the repository's formatter leaves them and `deno task static` stays clean.
 *
 * @param paths The files.
 * @throws {Error} When `deno fmt` fails.
 */
export async function formatWritten(paths: readonly string[]): Promise<void> {
  const { success, stderr } = await new Deno.Command(Deno.execPath(), {
    // The repository's settings (line width) wherever the files are.
    args: [
      "fmt",
      "--quiet",
      "--config",
      new URL("../deno.json", import.meta.url).pathname,
      ...paths,
    ],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!success) {
    throw new Error(`deno fmt failed on ${paths.join(", ")}: ${new TextDecoder().decode(stderr)}`);
  }
}
