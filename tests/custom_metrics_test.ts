// Metrics a model declares (`context.metrics`), on both engines, with the callable on the main
// thread and in a Worker: after three requests of 2, 3 and 5 elements, the model's counter and
// histogram are on /metrics beside Triton's own, with their labels, HELP and TYPE lines and the
// literal counts. On the Triton engine they come out of the core's own metrics text; each test
// starts a fresh server in this process, so a family the previous server left behind would show
// as extra counts here.

import assert from "node:assert/strict";
import { ENGINES, startServer } from "./_helpers.ts";
import { scrape, valueOf } from "./_prometheus.ts";
import { telemetryModel } from "./_telemetry_model.ts";

for (const engine of ENGINES) {
  for (const isolate of ["main", "worker"] as const) {
    Deno.test(`a model's own counter and histogram on /metrics [${engine}, ${isolate}]`, async () => {
      const triton = await startServer({ engine, models: [telemetryModel(isolate)] });
      try {
        for (const size of [2, 3, 5]) {
          const response = await fetch(`${triton.urls.http}/v2/models/Telemetry/infer`, {
            method: "POST",
            body: JSON.stringify({
              inputs: [{
                name: "x",
                datatype: "FP32",
                shape: [1, size],
                data: Array.from({ length: size }, (_, i) => i),
              }],
            }),
          });
          assert.equal(response.status, 200, await response.text());
        }
        const exposition = await scrape(triton.urls.metrics!);
        const labels = { isolate };
        // One call per request: each was sent after the previous one's answer.
        assert.equal(valueOf(exposition, "telemetry_calls_total", labels), 3);
        assert.equal(exposition.types.get("telemetry_calls_total"), "counter");
        assert.equal(exposition.help.get("telemetry_calls_total"), "Calls of the telemetry model");
        const buckets = Object.fromEntries(
          ["1", "4", "16", "+Inf"].map((
            le,
          ) => [le, valueOf(exposition, "telemetry_input_size_bucket", { ...labels, le })]),
        );
        assert.deepEqual(buckets, { "1": 0, "4": 2, "16": 3, "+Inf": 3 });
        assert.equal(valueOf(exposition, "telemetry_input_size_sum", labels), 10);
        assert.equal(valueOf(exposition, "telemetry_input_size_count", labels), 3);
        assert.equal(exposition.types.get("telemetry_input_size"), "histogram");
        // Beside Triton's own metrics.
        assert.equal(
          valueOf(exposition, "nv_inference_request_success", { model: "Telemetry" }),
          3,
        );
      } finally {
        await triton.stop();
      }
    });
  }
}
