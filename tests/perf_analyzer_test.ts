/**
 * Interop with `perf_analyzer` (the one `tritonclient==2.51.0` ships): it reads AddSub's metadata
 * and config, then loads it at concurrency 1 to 4 over HTTP and over gRPC. The run must end with
 * exit 0, a throughput line per concurrency, and server statistics with successes and no
 * failures.
 */

import assert from "node:assert/strict";
import { bindAddSub } from "../examples/add_sub/model.ts";
import { ENGINES, PEERS_REQUIRED, startServer } from "./_helpers.ts";
import { findPerfAnalyzer, PYTHON, runPerfAnalyzer } from "./_peers.ts";
import { countModel } from "./_streaming_models.ts";

const PERF_ANALYZER = await findPerfAnalyzer(PYTHON);
const missing = "missing" in PERF_ANALYZER ? PERF_ANALYZER.missing : undefined;

async function addSubStats(httpUrl: string): Promise<{ success: number; fail: number }> {
  const response = await fetch(`${httpUrl}/v2/models/AddSub/stats`);
  assert.equal(response.status, 200);
  const body = await response.json();
  const inference = body.model_stats[0].inference_stats;
  return { success: Number(inference.success.count), fail: Number(inference.fail.count) };
}

/**
 * Runs perf_analyzer (see `runPerfAnalyzer`) from concurrency 1 to `maxConcurrency`.
 *
 * @param args The model, URL, protocol and data arguments.
 * @param maxConcurrency The highest concurrency level (from 1).
 * @returns perf_analyzer's stdout and stderr.
 */
function runLevels(args: string[], maxConcurrency: number): Promise<string> {
  if ("missing" in PERF_ANALYZER) assert.fail(`perf_analyzer is required: ${missing}`);
  // This checks that perf_analyzer runs without errors, not how steady we are: a loaded host
  // (seen with other jobs on 2 cores) needed more than 5 windows to agree within 100%.
  return runPerfAnalyzer(PERF_ANALYZER, args, {
    maxConcurrency,
    maxTrials: 20,
    stabilityPercentage: 100,
  });
}

for (const engine of ENGINES) {
  for (const protocol of ["http", "grpc"] as const) {
    const name = `perf_analyzer -i ${protocol} on the ${engine} engine`;
    Deno.test({
      name: missing === undefined ? name : `${name} (skipped: ${missing})`,
      ignore: missing !== undefined && !PEERS_REQUIRED,
      async fn(): Promise<void> {
        await using triton = await startServer({ engine });
        await bindAddSub(triton);
        const url = protocol === "http" ? triton.urls.http : triton.urls.grpc;
        if (url === undefined) {
          // The gRPC front end may be switched off; then only CI insists.
          assert.ok(!PEERS_REQUIRED, `The server has no ${protocol} URL`);
          console.warn(`Skipping perf_analyzer -i ${protocol}: the server has no ${protocol} URL`);
          return;
        }
        const before = await addSubStats(triton.urls.http!);
        const output = await runLevels([
          "-m",
          "AddSub",
          "-u",
          url.replace(/^\w+:\/\//, ""),
          "-i",
          protocol,
          "--shape",
          "a:16",
          "--shape",
          "b:16",
        ], 4);
        const after = await addSubStats(triton.urls.http!);
        assert.ok(after.success - before.success >= 4 * 50, `Too few successes: ${after.success}`);
        assert.equal(after.fail, before.fail, `Failed inferences:\n${output}`);
      },
    });
  }
}

for (const engine of ENGINES) {
  const name = `perf_analyzer -i grpc --streaming on a decoupled model on the ${engine} engine`;
  Deno.test({
    name: missing === undefined ? name : `${name} (skipped: ${missing})`,
    ignore: missing !== undefined && !PEERS_REQUIRED,
    async fn(): Promise<void> {
      if ("missing" in PERF_ANALYZER) assert.fail(`perf_analyzer is required: ${missing}`);
      await using triton = await startServer({ engine, models: [countModel()] });
      const url = triton.urls.grpc;
      if (url === undefined) {
        assert.ok(!PEERS_REQUIRED, "The server has no gRPC URL");
        console.warn("Skipping perf_analyzer --streaming: the server has no gRPC URL");
        return;
      }
      // Each request asks Count for 3 responses.
      const data = await Deno.makeTempFile({ suffix: ".json" });
      try {
        await Deno.writeTextFile(data, JSON.stringify({ data: [{ n: [3] }] }));
        const output = await runLevels([
          "-m",
          "Count",
          "-u",
          url.replace(/^\w+:\/\//, ""),
          "-i",
          "grpc",
          "--streaming",
          "--input-data",
          data,
        ], 2);
        const stats = await (await fetch(`${triton.urls.http}/v2/models/Count/stats`)).json();
        const inference = stats.model_stats[0].inference_stats;
        assert.ok(Number(inference.success.count) >= 2 * 50, JSON.stringify(inference));
        assert.equal(Number(inference.fail.count), 0, `Failed inferences:\n${output}`);
      } finally {
        await Deno.remove(data);
      }
    },
  });
}
