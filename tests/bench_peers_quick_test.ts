/**
 * `deno task bench:peers --quick` still works: one short cell of the load generator per server
 * (identity float32[16], c=1, every answer checked), one perf_analyzer cell per KServe v2
 * server, and a report, a chart and the raw JSON.
 *
 * The servers: DenoTriton on each engine it has here, tritonserver (its venv is the
 * nvidia-pytriton wheel alone, which `deno task setup:triton` has downloaded already), FastAPI and
 * LitServe (venvs of about 140 MB each, made on the first run). Ray Serve and BentoML join with
 * `DENOTRITON_BENCH_PEERS=all`: their venvs cost minutes to install (Ray's is about 500 MB) and a
 * Ray cluster half a minute to start, for glue that the full run checks cell by cell. Nothing here
 * depends on speed: a cell only has to be measured, with no failed request.
 */

import assert from "node:assert/strict";
import { ENGINES, PEERS_REQUIRED } from "./_helpers.ts";
import { findPerfAnalyzer, PYTHON } from "./_peers.ts";

const python3 = await new Deno.Command("python3", { args: ["-c", "import venv"] }).output()
  .then((result) => result.success, () => false);
const perf = await findPerfAnalyzer(PYTHON);
const missing = !python3 ? "no python3 with venv" : "missing" in perf ? perf.missing : undefined;
const all = Deno.env.get("DENOTRITON_BENCH_PEERS") === "all";
const servers = [
  ...ENGINES,
  "tritonserver",
  "fastapi",
  "litserve",
  ...(all ? ["bentoml", "ray"] : []),
];
const KSERVE = new Set(["builtin", "triton", "tritonserver"]);

Deno.test({
  name: `bench:peers --quick on ${servers.join(", ")}` +
    (missing === undefined ? "" : ` (skipped: ${missing})`),
  ignore: missing !== undefined && !PEERS_REQUIRED,
  async fn(): Promise<void> {
    assert.equal(missing, undefined, `The peers benchmark needs ${missing}`);
    const out = await Deno.makeTempDir({ prefix: "denotriton_bench_peers_" });
    try {
      const result = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          new URL("../bench/peers/run.ts", import.meta.url).pathname,
          "--quick",
          "--peers",
          servers.join(","),
          "--out",
          out,
        ],
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(1_200_000),
      }).output();
      const decoder = new TextDecoder();
      const output = decoder.decode(result.stdout) + decoder.decode(result.stderr);
      assert.equal(result.code, 0, `bench:peers --quick failed:\n${output}`);
      const files = (await Array.fromAsync(Deno.readDir(out))).map((entry) => entry.name).sort();
      assert.equal(files.length, 3, `Expected .json, .md and .svg, got ${files}`);
      const base = files[0]!.replace(/\.json$/, "");
      assert.match(base, /^peers-\d{4}-\d{2}-\d{2}-.+-quick$/);
      assert.deepEqual(files, [`${base}.json`, `${base}.md`, `${base}.svg`]);

      const run = JSON.parse(await Deno.readTextFile(`${out}/${base}.json`));
      assert.equal(run.quick, true);
      assert.deepEqual(run.cells.map((cell: { peer: string }) => cell.peer), servers);
      for (const cell of run.cells) {
        assert.equal(cell.error, undefined, `${cell.peer} failed: ${cell.error}`);
        assert.equal(cell.model, "identity_small");
        assert.equal(cell.concurrency, 1);
        assert.equal(cell.result.failed, 0, `${cell.peer}: ${cell.result.errors}`);
        assert.equal(cell.result.windows.length, 3);
        assert.ok(cell.result.requests >= 60, `${cell.peer}: ${cell.result.requests} requests`);
        assert.ok(cell.result.checked >= cell.result.requests);
        assert.ok(cell.result.p99Us >= cell.result.p50Us);
        assert.ok(cell.result.serverCpuUsPerRequest > 0, `${cell.peer}: no server CPU`);
      }
      assert.deepEqual(
        run.perfCells.map((cell: { peer: string }) => cell.peer),
        servers.filter((server) => KSERVE.has(server)),
      );
      for (const cell of run.perfCells) {
        assert.equal(cell.error, undefined, `${cell.peer} perf_analyzer: ${cell.error}`);
        assert.ok(cell.result.throughput > 0);
      }
      for (const server of run.servers) {
        assert.equal(server.error, undefined);
        assert.ok(server.startupMs > 0 && server.rssIdleBytes > 0 && server.pssIdleBytes > 0);
        assert.ok(server.rssLoadBytes >= server.rssIdleBytes);
      }

      const markdown = await Deno.readTextFile(`${out}/${base}.md`);
      assert.match(markdown, /^# DenoTriton and its peers — /);
      assert.match(markdown, /\*\*Quick run\*\*/);
      assert.match(markdown, /## identity_small: identity float32\[16\]/);
      assert.match(markdown, /\| FastAPI \+ uvicorn +\| 1 +\|/); // deno fmt pads the columns
      assert.match(markdown, /## KServe v2 with binary tensors \(perf_analyzer\)/);
      assert.match(markdown, /## Startup and memory/);
      assert.match(await Deno.readTextFile(`${out}/${base}.svg`), /^<svg\s+xmlns=/);
    } finally {
      await Deno.remove(out, { recursive: true });
    }
  },
});
