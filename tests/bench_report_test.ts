import assert from "node:assert/strict";
import {
  type BenchRun,
  type Cell,
  errorLine,
  lostCells,
  markdownReport,
  type ServerFacts,
  type ServerName,
} from "../bench/report.ts";

Deno.test("bench report: a failed cell shows the line that says why", () => {
  assert.equal(
    errorLine(
      "perf_analyzer -m m failed (exit 99):\n  Pass [1] cb::Error: No valid requests recorded within time interval.\n",
    ),
    "Pass [1] cb::Error: No valid requests recorded within time interval.",
  );
  // An unstable measurement names no error: its last words say what happened.
  assert.equal(
    errorLine(
      "perf_analyzer -m m failed (exit 2):\nRequest concurrency: 8\n" +
        "  Pass [3] throughput: 80.2773 infer/sec.\n" +
        "Failed to obtain stable measurement within 3 measurement windows for concurrency 8.\n" +
        "Failed to obtain stable measurement.\n\n",
    ),
    "Failed to obtain stable measurement.",
  );
});

Deno.test("bench report: cells below their scenario's target are listed as lost", () => {
  const cell = (
    server: ServerName,
    model: string,
    protocol: "http" | "grpc",
    throughput: number,
  ): Cell => ({
    server,
    model,
    protocol,
    concurrency: 8,
    result: { throughput, windows: [], spread: 0.25, avgLatencyUs: 0, p50Us: 0, p99Us: 0 },
  });
  const facts: ServerFacts = {
    healthReadyMs: [100],
    modelsReadyMs: [100],
    rssIdleBytes: 1 << 20,
    rssLoadBytes: 1 << 20,
  };
  const run: BenchRun = {
    date: "2026-11-27T08:00:00.000Z",
    machine: "vm",
    quick: false,
    facts: {},
    scenarios: [{ model: "large", title: "Large" }, { model: "small", title: "Small" }],
    cells: [
      cell("pytriton", "large", "http", 100),
      cell("builtin", "large", "http", 160),
      cell("pytriton", "large", "grpc", 100),
      cell("builtin", "large", "grpc", 120),
      cell("pytriton", "small", "http", 100),
      cell("builtin", "small", "http", 98),
      cell("pytriton", "small", "grpc", 100),
      cell("builtin", "small", "grpc", 300),
    ],
    servers: { pytriton: facts, builtin: facts },
    windowMs: 1500,
    windows: 3,
    profiles: [],
    notes: [],
  };
  const lines = (text: string) =>
    text.split("\n").filter((line) => line.startsWith("- DenoTriton"));
  // Without a target, only what is below 1x is lost.
  assert.deepEqual(lostCells(run).map(({ ratio }) => ratio), [0.98]);
  assert.deepEqual(lines(markdownReport(run, "x.svg")), [
    "- DenoTriton built-in, small http c8: 0.98× (spread ±25%)",
  ]);
  // With 1.5x for the large tensors, the gRPC cell that wins by 1.2x is lost too, worst first
  // (measured against its target).
  const aimed = { ...run, scenarios: [{ ...run.scenarios[0]!, target: 1.5 }, run.scenarios[1]!] };
  assert.deepEqual(lostCells(aimed).map(({ ratio, target }) => [ratio, target]), [
    [1.2, 1.5],
    [0.98, 1],
  ]);
  assert.deepEqual(lines(markdownReport(aimed, "x.svg")), [
    "- DenoTriton built-in, large grpc c8: 1.20× (target 1.5×) (spread ±25%)",
    "- DenoTriton built-in, small http c8: 0.98× (spread ±25%)",
  ]);
});
