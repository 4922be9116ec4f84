import assert from "node:assert/strict";
import { type BenchRun, errorLine, lostCells, markdownReport } from "../bench/report.ts";

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

Deno.test("bench report: cells below their scenario's target are listed as lost", async () => {
  // The full run of 2026-11-27 (no cell below 1×), read with identity_large's 1.5× target.
  const run = JSON.parse(
    await Deno.readTextFile(new URL("../bench/results/2026-11-27-vm.json", import.meta.url)),
  ) as BenchRun;
  const scenarios = run.scenarios.map((scenario) =>
    scenario.model === "identity_large" ? { ...scenario, target: 1.5 } : scenario
  );
  const lost = lostCells({ ...run, scenarios });
  assert.deepEqual(
    lost.map(({ cell, ratio }) =>
      `${cell.server} ${cell.protocol} c${cell.concurrency} ${ratio.toFixed(2)}`
    ),
    [
      "builtin grpc c32 1.14",
      "builtin grpc c1 1.16",
      "triton grpc c32 1.18",
      "triton grpc c8 1.23",
      "builtin grpc c8 1.27",
      "triton grpc c1 1.28",
      "builtin http c32 1.43",
      "triton http c32 1.43",
    ],
  );
  const text = markdownReport({ ...run, scenarios }, "x.svg");
  assert.match(
    text,
    /- DenoTriton built-in, identity_large grpc c32: 1\.14× \(target 1\.5×\) \(spread ±13%\)\n/,
  );
  // Without the target, nothing is lost.
  assert.deepEqual(lostCells(run), []);
  assert.doesNotMatch(markdownReport(run, "x.svg"), /## Cells DenoTriton loses/);
});
