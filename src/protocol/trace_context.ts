/**
 * The W3C trace context a client sends with a request (`traceparent`, `tracestate`), read the
 * same way from HTTP headers and gRPC metadata, so that in trace mode `opentelemetry` a
 * request's spans continue the client's trace on both front ends.
 *
 * @module
 */

import type { TraceCarrier } from "../telemetry/otel.ts";

/**
 * The request's trace context, when it carries a `traceparent`.
 *
 * @param get Reads a header or metadata value by its lower-case name.
 * @returns The carrier, or `undefined`.
 *
 * @example A traceparent header read, and none
 * ```ts
 * import { traceContextOf } from "./trace_context.ts";
 * import assert from "node:assert/strict";
 *
 * const headers = new Headers({
 *   traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
 * });
 * assert.deepEqual(traceContextOf((name) => headers.get(name) ?? undefined), {
 *   traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
 * });
 * assert.equal(traceContextOf(() => undefined), undefined);
 * ```
 */
export function traceContextOf(
  get: (name: string) => string | undefined,
): TraceCarrier | undefined {
  const traceparent = get("traceparent");
  if (traceparent === undefined) return undefined;
  const tracestate = get("tracestate");
  return tracestate === undefined ? { traceparent } : { traceparent, tracestate };
}
