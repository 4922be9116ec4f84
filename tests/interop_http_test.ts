/**
 * Interop with the official Python client: `tests/interop/http_client.py` drives a server with
 * `tritonclient.http` (health, metadata, config, repository index, add_sub and identity over every
 * dtype in JSON and binary mode, parameters and forwarded headers, statistics, errors, logging,
 * async_infer). One step per scenario of the script.
 */

import assert from "node:assert/strict";
import { bindAddSub } from "../examples/add_sub/model.ts";
import { ENGINES, PEERS_REQUIRED, startServer } from "./_helpers.ts";
import { allTestModels, HEADER_FORWARD_PATTERN } from "./_models.ts";
import { PYTHON } from "./_peers.ts";

const SCRIPT = new URL("./interop/http_client.py", import.meta.url).pathname;

/** One scenario's outcome as the script printed it. */
interface ScenarioResult {
  name: string;
  passed: boolean;
  detail: string;
}

/** Parses `PASS name` / `FAIL name: reason` lines (indented lines continue a failure). */
function parseResults(text: string): ScenarioResult[] {
  const results: ScenarioResult[] = [];
  for (const line of text.split("\n")) {
    const match = line.match(/^(PASS|FAIL) (\w+)(?:: (.*))?$/);
    if (match) {
      results.push({ name: match[2]!, passed: match[1] === "PASS", detail: match[3] ?? "" });
    } else if (line.startsWith("    ") && results.at(-1)?.passed === false) {
      results.at(-1)!.detail += `\n${line}`;
    }
  }
  return results;
}

for (const engine of ENGINES) {
  const name = `tritonclient.http (${
    PYTHON?.tritonclientVersion ?? "missing"
  }) on the ${engine} engine`;
  Deno.test({
    name: PYTHON ? name : `${name} (skipped: no python3 with tritonclient[http])`,
    ignore: PYTHON === undefined && !PEERS_REQUIRED,
    async fn(t): Promise<void> {
      assert.ok(
        PYTHON,
        "python3 with tritonclient[http] is required (CI=true or DENOTRITON_REQUIRE_PEERS=1) but was not found",
      );
      await using triton = await startServer({
        engine,
        models: allTestModels(),
        config: { httpHeaderForwardPattern: HEADER_FORWARD_PATTERN },
      });
      await bindAddSub(triton);
      const url = triton.urls.http!.replace(/^http:\/\//, "");
      const result = await new Deno.Command(PYTHON.python, {
        args: [SCRIPT, "--url", url],
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(180_000),
      }).output();
      const decoder = new TextDecoder();
      const stdout = decoder.decode(result.stdout);
      const stderr = decoder.decode(result.stderr);
      const results = parseResults(stdout);
      for (const scenario of results) {
        await t.step(scenario.name, () => {
          assert.ok(scenario.passed, scenario.detail);
        });
      }
      const summary = stdout.match(/^interop http: (\d+) passed, (\d+) failed$/m);
      assert.ok(summary, `The script printed no summary:\n${stdout}\n${stderr}`);
      assert.equal(Number(summary[1]) + Number(summary[2]), results.length);
      assert.ok(results.length >= 19, `Only ${results.length} scenarios ran:\n${stdout}`);
      assert.equal(result.code, 0, `The script failed:\n${stdout}\n${stderr}`);
    },
  });
}
