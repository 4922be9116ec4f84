// Logging on both engines: the facade warns when verbose logging is on (into logFile), and
// GET/POST /v2/logging read and change the settings in Triton's shape.

import assert from "node:assert/strict";
import { ENGINES, startServer } from "./_helpers.ts";

const WARNING = "Verbose logging is on (logVerbose=1): it costs inference throughput";

for (const engine of ENGINES) {
  Deno.test(`logging (${engine}): verbose warning, settings read and changed`, async () => {
    const logFile = await Deno.makeTempFile({ suffix: ".log" });
    try {
      {
        await using triton = await startServer({
          engine,
          config: { logVerbose: 1, logFile, allowGrpc: false, allowMetrics: false },
        });
        const url = `${triton.urls.http}/v2/logging`;
        assert.deepEqual(await (await fetch(url)).json(), {
          log_file: "",
          log_info: true,
          log_warning: true,
          log_error: true,
          log_verbose_level: 1,
          log_format: "default",
        });
        const changed = await fetch(url, {
          method: "POST",
          body: JSON.stringify({ log_verbose_level: 0, log_format: "ISO8601" }),
        });
        assert.equal(changed.status, 200);
        assert.equal((await changed.json()).log_verbose_level, 0);
        const now = await (await fetch(url)).json();
        assert.equal(now.log_verbose_level, 0);
        assert.equal(now.log_format, "ISO8601");
        const bad = await fetch(url, {
          method: "POST",
          body: JSON.stringify({ log_verbose_level: -1 }),
        });
        assert.equal(bad.status, 400);
        assert.deepEqual(await bad.json(), {
          error: "Invalid 'log_verbose_level': expected a non-negative integer",
        });
        const ready = await fetch(`${triton.urls.http}/v2/health/ready`);
        assert.equal(ready.status, 200);
        await ready.body?.cancel();
      }
      const text = await Deno.readTextFile(logFile);
      assert.ok(text.includes(WARNING), `the log file lacks the warning:\n${text}`);
    } finally {
      await Deno.remove(logFile);
    }
  });

  Deno.test(`logging (${engine}): no warning when verbose logging is off`, async () => {
    const logFile = await Deno.makeTempFile({ suffix: ".log" });
    try {
      {
        await using _triton = await startServer({
          engine,
          config: { logFile, allowGrpc: false, allowMetrics: false },
        });
      }
      const text = await Deno.readTextFile(logFile);
      assert.ok(!text.includes("Verbose logging is on"));
      assert.ok(text.includes("HTTP/REST (KServe v2) listening at"), text);
    } finally {
      await Deno.remove(logFile);
    }
  });
}
