/**
 * OpenTelemetry through the OpenTelemetry JS packages: the SDK's `TracerProvider` with a batch
 * span processor and the OTLP/HTTP (protobuf) exporter, configured from `traceConfig` (the
 * collector's URL, resource attributes, the batch processor's sizes), the way `tritonserver
 * --trace-config opentelemetry,...` is. Deno's built-in OpenTelemetry (`OTEL_DENO=true`) is
 * configured only by environment variables read when the process starts, so a library cannot
 * honour `traceConfig` with it; when it is on, it stays the global provider that a user's own
 * `@opentelemetry/api` calls reach, and the server's spans, which carry the same trace ids, go
 * through this module's exporter.
 *
 * `@opentelemetry/api` is the instrumentation API on both sides: the server registers its
 * provider, an `AsyncLocalStorage` context manager and the W3C trace-context propagator as the
 * API's globals when none is registered yet (in the main isolate, and in each Worker instance),
 * and runs each callable with its request's compute span as the active context, so a span the
 * callable opens with `trace.getTracer(...)` is that span's child.
 *
 * The server's own spans are built when a request ends, from its activity timestamps (the
 * core's on the Triton engine, which arrive through the bridge's event queue after the fact):
 * their ids are chosen when the request starts, so that the callable's spans can name their
 * parent before it exists, and the provider's id generator hands those ids to the spans when
 * they are made.
 *
 * @module
 */

import {
  type Attributes,
  type Context,
  context as contextApi,
  propagation,
  ROOT_CONTEXT,
  type Span,
  trace,
  TraceFlags,
  type Tracer,
} from "@opentelemetry/api";
import { BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import type { OpenTelemetryTraceConfig } from "../config/trace_config.ts";

/** The W3C trace-context headers (or gRPC metadata) of a request. */
export interface TraceCarrier {
  /** `traceparent`. */
  readonly traceparent?: string;
  /** `tracestate`. */
  readonly tracestate?: string;
}

const propagator = new W3CTraceContextPropagator();

function randomHex(bytes: number): string {
  const raw = crypto.getRandomValues(new Uint8Array(bytes));
  let hex = "";
  for (const byte of raw) hex += byte.toString(16).padStart(2, "0");
  return /^0+$/.test(hex) ? randomHex(bytes) : hex;
}

/** A random span id (16 hex digits). */
export function newSpanId(): string {
  return randomHex(8);
}

/** A random trace id (32 hex digits). */
export function newTraceId(): string {
  return randomHex(16);
}

/**
 * The client's trace context from its `traceparent` / `tracestate`, or `undefined` when it sent
 * none (or one that does not parse).
 *
 * @param carrier The headers.
 * @returns The context holding the client's span as a remote parent.
 */
export function extractTraceContext(carrier: TraceCarrier | undefined): Context | undefined {
  if (carrier?.traceparent === undefined) return undefined;
  const extracted = propagator.extract(ROOT_CONTEXT, carrier, {
    get: (headers, key) => (headers as Record<string, string | undefined>)[key],
    keys: (headers) => Object.keys(headers as object),
  });
  return trace.getSpanContext(extracted) === undefined ? undefined : extracted;
}

/**
 * Whether the client's span in `parent` is sampled (its `traceparent`'s flags `01`): a client
 * that did not sample its trace asks the services it calls not to record it either (W3C trace
 * context; the SDK's default parent-based sampler would drop the spans anyway).
 *
 * @param parent The context {@linkcode extractTraceContext} answered.
 * @returns Whether it is sampled.
 */
export function isSampled(parent: Context): boolean {
  const span = trace.getSpanContext(parent);
  return span !== undefined && (span.traceFlags & TraceFlags.SAMPLED) !== 0;
}

/**
 * The context whose active span is `spanId` of `traceId` (sampled): what a callable runs in.
 *
 * @param traceId The trace.
 * @param spanId The span.
 * @returns The context.
 */
export function spanContextOf(traceId: string, spanId: string): Context {
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId,
    spanId,
    traceFlags: TraceFlags.SAMPLED,
    isRemote: true,
  });
}

/**
 * The `traceparent` of the active context's span, to hand a Worker; `undefined` when none is
 * active.
 *
 * @returns The header value.
 */
export function activeTraceparent(): string | undefined {
  const span = trace.getSpanContext(contextApi.active());
  if (span === undefined) return undefined;
  return `00-${span.traceId}-${span.spanId}-0${span.traceFlags & 1}`;
}

/**
 * Runs `fn` with `traceparent`'s span as the active context (a Worker's side of
 * {@linkcode activeTraceparent}).
 *
 * @param traceparent The span, or `undefined` to run `fn` as it is.
 * @param fn What to run.
 * @returns What `fn` returns.
 */
export function withTraceparent<T>(traceparent: string | undefined, fn: () => T): T {
  const parent = extractTraceContext(traceparent === undefined ? undefined : { traceparent });
  return parent === undefined ? fn() : contextApi.with(parent, fn);
}

/**
 * Runs `fn` in `context` (when given).
 *
 * @param context The context, or `undefined`.
 * @param fn What to run.
 * @returns What `fn` returns.
 */
export function runInContext<T>(context: Context | undefined, fn: () => T): T {
  return context === undefined ? fn() : contextApi.with(context, fn);
}

// The ids the next span gets: set right before `startSpan`, which takes them synchronously.
class PinnedIds {
  traceId: string | undefined;
  spanId: string | undefined;

  generateTraceId(): string {
    const id = this.traceId ?? newTraceId();
    this.traceId = undefined;
    return id;
  }

  generateSpanId(): string {
    const id = this.spanId ?? newSpanId();
    this.spanId = undefined;
    return id;
  }
}

/** How a span is made by {@linkcode OpenTelemetryExport.span}. */
export interface SpanOptions {
  /** Its name. */
  readonly name: string;
  /** Its parent, or none for a root span. */
  readonly parent: Context | undefined;
  /** Its id, chosen beforehand. */
  readonly spanId: string;
  /** Its trace id, for a root span (a child takes its parent's). */
  readonly traceId: string;
  /** Start, epoch milliseconds (fractional). */
  readonly start: number;
  /** Attributes. */
  readonly attributes?: Attributes;
}

let globalsOwner: OpenTelemetryExport | undefined;

/** An isolate's span export: the SDK provider, its batch processor and OTLP exporter. */
export class OpenTelemetryExport {
  readonly #provider: TracerProvider;
  readonly #pinned = new PinnedIds();
  readonly #tracer: Tracer;

  /**
   * Starts exporting; registers the provider, an `AsyncLocalStorage` context manager and the
   * W3C propagator as `@opentelemetry/api`'s globals unless another provider (Deno's built-in
   * OpenTelemetry, the user's own SDK) holds them.
   *
   * @param config The exporter's settings.
   */
  constructor(config: OpenTelemetryTraceConfig) {
    const exporter = new OTLPTraceExporter({ url: config.url });
    this.#provider = new TracerProvider({
      resource: resourceFromAttributes({ ...config.resource }),
      idGenerator: this.#pinned,
      spanProcessors: [
        new BatchSpanProcessor({
          exporter,
          maxQueueSize: config.bspMaxQueueSize,
          scheduledDelayMillis: config.bspScheduleDelayMs,
          maxExportBatchSize: config.bspMaxExportBatchSize,
        }),
      ],
    });
    this.#tracer = this.#provider.getTracer("denotriton");
    if (globalsOwner === undefined && trace.setGlobalTracerProvider(this.#provider)) {
      globalsOwner = this;
      contextApi.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
      propagation.setGlobalPropagator(propagator);
    }
  }

  /**
   * Makes a span with ids chosen beforehand.
   *
   * @param options Name, parent, ids, start and attributes.
   * @returns The span (end it with its end time).
   */
  span(options: SpanOptions): Span {
    if (options.parent === undefined) this.#pinned.traceId = options.traceId;
    this.#pinned.spanId = options.spanId;
    try {
      return this.#tracer.startSpan(
        options.name,
        {
          startTime: options.start,
          ...(options.attributes ? { attributes: options.attributes } : {}),
        },
        options.parent ?? ROOT_CONTEXT,
      );
    } finally {
      this.#pinned.traceId = undefined;
      this.#pinned.spanId = undefined;
    }
  }

  /** Exports every span ended so far. */
  async flush(): Promise<void> {
    await this.#provider.forceFlush();
  }

  /** Exports what is left and stops; gives the API's globals back when it holds them. */
  async shutdown(): Promise<void> {
    try {
      await this.#provider.shutdown();
    } finally {
      if (globalsOwner === this) {
        globalsOwner = undefined;
        trace.disable();
        contextApi.disable();
        propagation.disable();
      }
    }
  }
}
