import assert from "node:assert/strict";
import { trace } from "@opentelemetry/api";
import { parseTraceConfig } from "../config/trace_config.ts";
import { Tracer } from "./tracer.ts";

const CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";

/** Which of `n` requests (1-based) the tracer traces. */
function tracedOf(tracer: Tracer, n: number, traceparent?: string): number[] {
  const traced: number[] = [];
  for (let i = 1; i <= n; i++) {
    const request = {
      model: "m",
      version: 1,
      ...(traceparent === undefined ? {} : { traceContext: { traceparent } }),
    };
    if (tracer.start(request) !== undefined) traced.push(i);
  }
  return traced;
}

Deno.test("Tracer: level OFF traces nothing, whatever the client sends", async () => {
  const tracer = new Tracer(parseTraceConfig(["mode=opentelemetry", "rate=1"]));
  try {
    assert.deepEqual(tracedOf(tracer, 3), []);
    assert.deepEqual(tracedOf(tracer, 3, `00-${CLIENT_TRACE}-00f067aa0ba902b7-01`), []);
  } finally {
    await tracer.close();
  }
});

Deno.test("Tracer: mode triton samples one request in rate, up to count", async () => {
  const dir = await Deno.makeTempDir();
  const tracer = new Tracer(
    parseTraceConfig(["level=TIMESTAMPS", "rate=3", "count=2", `triton,file=${dir}/t.json`]),
  );
  try {
    // A traceparent means nothing in mode triton.
    assert.deepEqual(tracedOf(tracer, 10, `00-${CLIENT_TRACE}-00f067aa0ba902b7-01`), [3, 6]);
  } finally {
    await tracer.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Tracer: mode opentelemetry continues a client's sampled trace whatever the rate, and leaves an unsampled one to the rate", async () => {
  const tracer = new Tracer(
    parseTraceConfig([
      "mode=opentelemetry",
      "level=TIMESTAMPS",
      "rate=4",
      // Nothing is exported here: no span ends.
      "opentelemetry,url=http://127.0.0.1:9/v1/traces",
    ]),
  );
  try {
    assert.deepEqual(tracedOf(tracer, 5, `00-${CLIENT_TRACE}-00f067aa0ba902b7-01`), [
      1,
      2,
      3,
      4,
      5,
    ]);
    const continued = tracer.start({
      model: "m",
      version: 1,
      traceContext: { traceparent: `00-${CLIENT_TRACE}-00f067aa0ba902b7-01` },
    });
    assert.equal(trace.getSpanContext(continued!.callableContext()!)?.traceId, CLIENT_TRACE);
    // Unsampled (flags 00), malformed, or none: one in four, every request counted, the 6
    // above too (so the 8th, 12th, 16th and 20th).
    assert.deepEqual(tracedOf(tracer, 6, `00-${CLIENT_TRACE}-00f067aa0ba902b7-00`), [2, 6]);
    assert.deepEqual(tracedOf(tracer, 4, "00-not-a-trace-01"), [4]);
    assert.deepEqual(tracedOf(tracer, 4), [4]);
  } finally {
    await tracer.close();
  }
});
