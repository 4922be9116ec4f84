// OpenTelemetry mode against a real collector (Jaeger v2, started here on free ports), on both
// engines, with the callable on the main thread and in a Worker: a request that carries its
// client's W3C traceparent (HTTP header, gRPC metadata) gets a span named after the model, a
// child of the client's span, with `queue` and `compute` children (model, version, instance,
// device, batch size as attributes), and the span the callable opens through
// @opentelemetry/api is the compute span's child. The rate is Triton's default (one in 1000): a
// client's sampled trace is continued whatever the rate, an unsampled one (flags 00) is not.

import assert from "node:assert/strict";
import { ModelClient } from "../src/client/mod.ts";
import { ndarray } from "../mod.ts";
import { ENGINES, PEERS_REQUIRED, startServer } from "./_helpers.ts";
import { JAEGER, type JaegerTrace, spanCount, startJaeger, tagsOf, traceOf } from "./_jaeger.ts";
import { telemetryModel } from "./_telemetry_model.ts";

function randomHex(bytes: number): string {
  return [...crypto.getRandomValues(new Uint8Array(bytes))]
    .map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** Checks one request's spans in its trace: who is whose parent, and the attributes. */
function checkRequestSpans(
  trace: JaegerTrace,
  clientSpan: string,
  tracestate: string,
  isolate: "main" | "worker",
  service: string,
): void {
  const byName = (name: string) => {
    const found = trace.spans.filter((span) => span.operationName === name);
    assert.equal(found.length, 1, `one ${name} span in ${trace.spans.map((s) => s.operationName)}`);
    return found[0]!;
  };
  const parentOf = (span: { references: readonly { spanID: string }[] }): string | undefined =>
    span.references[0]?.spanID;
  const request = byName("Telemetry");
  const queue = byName("queue");
  const compute = byName("compute");
  const callable = byName("callable-work");
  assert.equal(parentOf(request), clientSpan);
  assert.equal(parentOf(queue), request.spanID);
  assert.equal(parentOf(compute), request.spanID);
  assert.equal(parentOf(callable), compute.spanID);
  assert.deepEqual(
    Object.fromEntries(
      Object.entries(tagsOf(compute)).filter(([key]) => key.startsWith("triton.")),
    ),
    {
      "triton.model_name": "Telemetry",
      "triton.model_version": 1,
      "triton.instance": 0,
      "triton.device": "cpu",
      "triton.batch_size": 1,
    },
  );
  assert.equal(tagsOf(request)["triton.model_name"], "Telemetry");
  // The client's tracestate travels with its trace (Jaeger shows it as a tag).
  assert.equal(tagsOf(request)["w3c.tracestate"], tracestate);
  assert.equal(tagsOf(callable)["isolate"], isolate);
  for (const span of [request, queue, compute, callable]) {
    assert.equal(trace.processes[span.processID]?.serviceName, service);
  }
}

for (const engine of ENGINES) {
  for (const isolate of ["main", "worker"] as const) {
    const name =
      `OpenTelemetry spans reach Jaeger, the client's trace continued [${engine}, ${isolate}]`;
    Deno.test({
      name: JAEGER ? name : `${name} (skipped: Jaeger is not built)`,
      ignore: JAEGER === undefined && !PEERS_REQUIRED,
      async fn(): Promise<void> {
        await using jaeger = await startJaeger();
        const service = `denotriton-test-${engine}-${isolate}`;
        const triton = await startServer({
          engine,
          models: [telemetryModel(isolate)],
          config: {
            traceConfig: [
              "mode=opentelemetry",
              "level=TIMESTAMPS",
              `opentelemetry,url=${jaeger.otlpTraces}`,
              `opentelemetry,resource=service.name=${service}`,
              "opentelemetry,bsp_schedule_delay=50",
            ],
          },
        });
        const http = { trace: randomHex(16), span: randomHex(8) };
        const grpc = { trace: randomHex(16), span: randomHex(8) };
        const unsampled = { trace: randomHex(16), span: randomHex(8) };
        try {
          const response = await fetch(`${triton.urls.http}/v2/models/Telemetry/infer`, {
            method: "POST",
            headers: {
              traceparent: `00-${http.trace}-${http.span}-01`,
              tracestate: "client=http",
            },
            body: JSON.stringify({
              inputs: [{ name: "x", datatype: "FP32", shape: [1, 2], data: [1, 2] }],
            }),
          });
          assert.equal(response.status, 200, await response.text());
          const notTraced = await fetch(`${triton.urls.http}/v2/models/Telemetry/infer`, {
            method: "POST",
            headers: { traceparent: `00-${unsampled.trace}-${unsampled.span}-00` },
            body: JSON.stringify({
              inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [5] }],
            }),
          });
          assert.equal(notTraced.status, 200, await notTraced.text());
          await using client = new ModelClient(triton.urls.grpc!, "Telemetry");
          const outputs = await client.inferSample(
            { x: ndarray(new Float32Array([3, 4])) },
            {
              headers: {
                traceparent: `00-${grpc.trace}-${grpc.span}-01`,
                tracestate: "client=grpc,vendor=7",
              },
            },
          );
          assert.deepEqual([...outputs.y!.data as Float32Array], [3, 4]);
          // The trace settings answer the mode; its exporter settings are fixed at start.
          const settings = await (await fetch(`${triton.urls.http}/v2/trace/setting`)).json();
          assert.equal(settings.trace_mode, "opentelemetry");
        } finally {
          // Exports what is left.
          await triton.stop();
        }
        checkRequestSpans(
          await traceOf(jaeger, http.trace, 4),
          http.span,
          "client=http",
          isolate,
          service,
        );
        checkRequestSpans(
          await traceOf(jaeger, grpc.trace, 4),
          grpc.span,
          "client=grpc,vendor=7",
          isolate,
          service,
        );
        // The server's stop exported everything, and the two traces above are in.
        assert.equal(await spanCount(jaeger, unsampled.trace), 0);
      },
    });
  }
}
