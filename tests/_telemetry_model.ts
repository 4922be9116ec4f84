/**
 * The model of the telemetry tests (`otel_test.ts`, `custom_metrics_test.ts`), on the main
 * thread or in a Worker (`_workers/telemetry.ts`): an identity that opens a span of its own
 * through `@opentelemetry/api` (named `callable-work`, with the instance's isolate as an
 * attribute) and counts its calls and observes its input sizes in metrics of its own.
 *
 * @module
 */

import { trace } from "@opentelemetry/api";
import type { BindOptions, InferContext, InferFunc, InferRequest } from "../mod.ts";
import { workers } from "../mod.ts";

/** The callable, for the given isolate ("main" or "worker"). */
export function telemetryCallable(isolate: "main" | "worker"): InferFunc {
  return (requests: InferRequest[], context: InferContext) => {
    const calls = context.metrics.family({
      name: "telemetry_calls_total",
      description: "Calls of the telemetry model",
      kind: "counter",
    });
    const sizes = context.metrics.family({
      name: "telemetry_input_size",
      description: "Elements per request",
      kind: "histogram",
    });
    return trace.getTracer("telemetry-test").startActiveSpan("callable-work", (span) => {
      span.setAttribute("isolate", isolate);
      calls.metric({ labels: { isolate } }).increment();
      const results = requests.map((request) => {
        sizes.metric({ labels: { isolate }, buckets: [1, 4, 16] }).observe(
          request.data.x!.data.length,
        );
        return { y: request.data.x! };
      });
      span.end();
      return results;
    });
  };
}

/** The model, its callable on the main thread or in one Worker. */
export function telemetryModel(isolate: "main" | "worker", name = "Telemetry"): BindOptions {
  return {
    modelName: name,
    inferFunc: isolate === "main"
      ? telemetryCallable("main")
      : workers(new URL("./_workers/telemetry.ts", import.meta.url), { count: 1 }),
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
    config: { maxBatchSize: 4 },
  };
}
