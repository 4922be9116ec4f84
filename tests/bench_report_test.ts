import assert from "node:assert/strict";
import { errorLine } from "../bench/report.ts";

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
