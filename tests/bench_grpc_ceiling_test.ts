/**
 * `deno task bench:grpc-ceiling`: its `node:http2` echo answers a gRPC client as a server of
 * identity_large would (the bench's ceiling must do the work it stands for), refuses what it does
 * not serve with the right gRPC code, and a short run against the echo and each engine installed
 * is measured and written where `--out` says. Nothing here depends on speed.
 */

import assert from "node:assert/strict";
import { ClientInferenceServerError, ModelClient, ndarray } from "../src/client/mod.ts";
import * as grpc from "@grpc/grpc-js";
import { codecs } from "../src/protocol/grpc_codec.ts";
import { serveEcho, serveEchoH2 } from "../bench/grpc_ceiling.ts";
import { rejectsWith, TestGrpcClient } from "./grpc_test_client.ts";
import { ENGINES, PEERS_REQUIRED } from "./_helpers.ts";
import { findPerfAnalyzer, PYTHON } from "./_peers.ts";

const PERF_ANALYZER = await findPerfAnalyzer(PYTHON);
const missing = "missing" in PERF_ANALYZER ? PERF_ANALYZER.missing : undefined;

for (const [transport, serve] of [["node:http2", serveEcho], ["h2", serveEchoH2]] as const) {
  Deno.test(`bench:grpc-ceiling's ${transport} echo returns each 4 MiB input as its output`, async () => {
    const echo = await serve(0);
    try {
      const url = `grpc://127.0.0.1:${echo.port}`;
      {
        await using client = new ModelClient(url, "identity_large");
        const x = new Float32Array(1048576);
        for (let i = 0; i < x.length; i++) x[i] = (i % 1000) - 0.5;
        for (let call = 0; call < 3; call++) {
          x[0] = call;
          const { y } = await client.inferSample({ x: ndarray(x) });
          assert.deepEqual(y?.shape, [1048576]);
          assert.deepEqual(y?.data, x);
        }
      }
      {
        await using client = new ModelClient(url, "identity_large");
        await assert.rejects(
          () => client.inferSample({ x: ndarray(new Float32Array(4)) }),
          (error: unknown) =>
            error instanceof ClientInferenceServerError &&
            /one raw input of 4194304 bytes/.test(error.message),
        );
      }
      // What it does not serve is refused with the code a Triton server gives.
      using raw = new TestGrpcClient(echo.port, { deadlineMs: 10_000 });
      await rejectsWith(
        raw.call("ModelReady", codecs.ModelRef, codecs.ReadyResponse, { name: "other" }),
        grpc.status.NOT_FOUND,
        "Unknown model 'other': the echo serves identity_large",
      );
      await rejectsWith(
        raw.raw("RepositoryIndex", new Uint8Array()),
        grpc.status.UNIMPLEMENTED,
        "The echo does not serve /inference.GRPCInferenceService/RepositoryIndex",
      );
      // And it still serves.
      assert.deepEqual(
        await raw.call("ServerLive", codecs.Empty, codecs.ServerLiveResponse, {}),
        { live: true },
      );
    } finally {
      await echo.close();
    }
  });
}

const servers = ["echo", "echo-h2", ...ENGINES];
const name = `bench:grpc-ceiling, one short round on ${servers.join(", ")}`;
Deno.test({
  name: missing === undefined ? name : `${name} (skipped: ${missing})`,
  ignore: missing !== undefined && !PEERS_REQUIRED,
  async fn(): Promise<void> {
    const dir = await Deno.makeTempDir({ prefix: "denotriton_bench_grpc_ceiling_" });
    const out = `${dir}/grpc-ceiling.md`;
    try {
      const result = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          new URL("../bench/grpc_ceiling.ts", import.meta.url).pathname,
          "--servers",
          servers.join(","),
          "--rounds",
          "1",
          "--concurrency",
          "1,2",
          "--window",
          "300",
          "--out",
          out,
        ],
        stdout: "piped",
        stderr: "piped",
        // A watchdog: a perf_analyzer run that never ends fails the test instead of hanging CI.
        signal: AbortSignal.timeout(180_000),
      }).output();
      const decoder = new TextDecoder();
      const output = decoder.decode(result.stdout) + decoder.decode(result.stderr);
      assert.equal(result.code, 0, `bench:grpc-ceiling failed:\n${output}`);
      const rows = (await Deno.readTextFile(out)).split("\n")
        .filter((line) => /^\| +[12] \|/.test(line))
        .map((line) => line.split("|").slice(1, -1).map((cell) => cell.trim()));
      // Three tables (infer/s and ratios; p50 and CPU; each round), a row per concurrency each.
      assert.deepEqual(rows.map((cells) => cells[0]), ["1", "2", "1", "2", "1", "2"]);
      for (const cells of rows.slice(0, 2)) {
        const rates = cells.slice(1, 1 + servers.length).map(Number);
        assert.ok(rates.every((rate) => rate > 0), cells.join(" | "));
        // Each engine's ratio to each echo is its rate over the echo's, to the node:http2 echo
        // first. The table shows rates to one decimal and ratios to two, so the ratio shown lies
        // between the quotients of the rates' rounding bounds, give or take the ratio's own
        // rounding: a slow run's small rates widen that interval (19.3 infer/s: about ±0.01).
        const bounds = [0, 1].flatMap((echo) =>
          ENGINES.map((_, i) => {
            const [engine, base] = [rates[2 + i]!, rates[echo]!];
            return [(engine - 0.05) / (base + 0.05), (engine + 0.05) / (base - 0.05)] as const;
          })
        );
        const ratios = cells.slice(1 + servers.length).map(Number);
        assert.equal(ratios.length, bounds.length, cells.join(" | "));
        for (const [i, ratio] of ratios.entries()) {
          const [low, high] = bounds[i]!;
          assert.ok(ratio >= low - 0.005 && ratio <= high + 0.005, cells.join(" | "));
        }
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
