/**
 * `deno task bench --quick` still works: one short perf_analyzer cell per DenoTriton server
 * (built-in engine, and the Triton core when installed), a report, a chart and the raw JSON.
 * PyTriton joins only with `DENOTRITON_BENCH_PYTRITON=1` (it installs a venv and takes a while).
 * Nothing here depends on speed: a cell only has to be measured.
 */

import assert from "node:assert/strict";
import { ENGINES, PEERS_REQUIRED } from "./_helpers.ts";
import { findPerfAnalyzer, PYTHON } from "./_peers.ts";

const venvPython = new URL("../bench/.venv/bin/python", import.meta.url).pathname;
const venvPerf = await (async () => {
  try {
    await Deno.stat(venvPython);
    return await findPerfAnalyzer({
      python: venvPython,
      tritonclientVersion: "2.51.0",
      scriptDirs: [new URL("../bench/.venv/bin", import.meta.url).pathname],
    });
  } catch {
    return { missing: "no bench venv" };
  }
})();
const perf = "missing" in venvPerf ? await findPerfAnalyzer(PYTHON) : venvPerf;
const missing = "missing" in perf ? perf.missing : undefined;
const withPyTriton = Deno.env.get("DENOTRITON_BENCH_PYTRITON") === "1";
const servers = [...(withPyTriton ? ["pytriton"] : []), ...ENGINES];

Deno.test({
  name: `bench --quick on ${servers.join(", ")}` +
    (missing === undefined ? "" : ` (skipped: ${missing})`),
  ignore: missing !== undefined && !PEERS_REQUIRED,
  async fn(): Promise<void> {
    assert.equal(missing, undefined, `perf_analyzer is required: ${missing}`);
    const out = await Deno.makeTempDir({ prefix: "denotriton_bench_" });
    try {
      const result = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          new URL("../bench/run.ts", import.meta.url).pathname,
          "--quick",
          "--servers",
          servers.join(","),
          "--out",
          out,
          "--no-readme",
        ],
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(600_000),
      }).output();
      const decoder = new TextDecoder();
      const output = decoder.decode(result.stdout) + decoder.decode(result.stderr);
      assert.equal(result.code, 0, `bench --quick failed:\n${output}`);
      const files = (await Array.fromAsync(Deno.readDir(out))).map((entry) => entry.name).sort();
      assert.equal(files.length, 3, `Expected .json, .md and .svg, got ${files}`);
      const base = files[0]!.replace(/\.json$/, "");
      assert.match(base, /^\d{4}-\d{2}-\d{2}-.+-quick$/);
      assert.deepEqual(files, [`${base}.json`, `${base}.md`, `${base}.svg`]);

      const run = JSON.parse(await Deno.readTextFile(`${out}/${base}.json`));
      assert.equal(run.quick, true);
      assert.deepEqual(
        run.cells.map((cell: { server: string }) => cell.server),
        servers,
      );
      for (const cell of run.cells) {
        assert.equal(cell.error, undefined, `Cell failed: ${cell.error}`);
        assert.equal(cell.model, "identity_small");
        assert.equal(cell.result.windows.length, 3);
        assert.ok(cell.result.throughput > 0, `No throughput in ${JSON.stringify(cell)}`);
        assert.ok(cell.result.p99Us >= cell.result.p50Us);
      }
      for (const server of servers) {
        const facts = run.servers[server];
        assert.ok(facts.modelsReadyMs[0] >= facts.healthReadyMs[0]);
        assert.ok(facts.rssIdleBytes > 0 && facts.rssLoadBytes > 0);
      }

      const markdown = await Deno.readTextFile(`${out}/${base}.md`);
      assert.match(markdown, /^# DenoTriton vs PyTriton — /);
      assert.match(markdown, /\*\*Quick run\*\*/);
      assert.match(markdown, /## 1\. identity float32\[16\]/);
      assert.match(markdown, /\| http +\| 1 +\|/); // deno fmt pads the columns
      assert.match(markdown, /## 6\. Startup and memory/);
      assert.match(await Deno.readTextFile(`${out}/${base}.svg`), /^<svg\s+xmlns=/);
    } finally {
      await Deno.remove(out, { recursive: true });
    }
  },
});
