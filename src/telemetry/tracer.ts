/**
 * The server's tracer: the trace settings (one store that both front ends change and both
 * engines sample by) and where traces go (the trace file, or the OpenTelemetry export). An
 * engine asks {@linkcode Tracer.start} once per request; it answers `undefined` at once when
 * nothing traces, so tracing that is off costs one property read per request.
 *
 * @module
 */

import type { OpenTelemetryTraceConfig, TraceConfig, TraceMode } from "../config/trace_config.ts";
import { extractTraceContext, isSampled, OpenTelemetryExport, type TraceCarrier } from "./otel.ts";
import { RequestTrace } from "./request_trace.ts";
import { TraceSettingsStore } from "./trace_settings.ts";

/** What a request tells the tracer. */
export interface TracedRequest {
  /** The model. */
  readonly model: string;
  /** The model's version. */
  readonly version: number;
  /** The request's id, if any. */
  readonly id?: string | undefined;
  /** The client's W3C trace context (`traceparent`, `tracestate`), if it sent one. */
  readonly traceContext?: TraceCarrier | undefined;
}

/** The server's tracer. */
export class Tracer {
  /** The settings the trace extension reads and changes. */
  readonly settings: TraceSettingsStore;
  /** Where traces go. */
  readonly mode: TraceMode;
  /** Mode `opentelemetry`: the exporter's settings (Worker instances export with them too). */
  readonly opentelemetry: OpenTelemetryTraceConfig | undefined;
  #otel: OpenTelemetryExport | undefined;
  #nextId = 1n;
  #closed = false;

  /**
   * A tracer.
   *
   * @param config The server's trace configuration.
   */
  constructor(config: TraceConfig) {
    this.settings = new TraceSettingsStore(config);
    this.mode = config.mode;
    this.opentelemetry = config.mode === "opentelemetry" ? config.opentelemetry : undefined;
  }

  /**
   * Starts exporting (mode `opentelemetry`), so that a callable's own spans are exported from
   * the server's start on, traced request or not. The facade calls it when the server starts.
   */
  open(): void {
    if (this.mode === "opentelemetry" && !this.#closed) {
      this.#otel ??= new OpenTelemetryExport(this.opentelemetry!);
    }
  }

  /**
   * Decides whether a request is traced (the model's setting's rate and count; in mode
   * `opentelemetry` a request carrying its client's trace context is traced whenever tracing
   * is on), and starts its trace.
   *
   * @param request The request.
   * @param id The trace id; the tracer counts its own when omitted (the Triton engine sets the
   *   core's once it has it).
   * @returns The trace, or `undefined` when the request is not traced.
   */
  start(request: TracedRequest, id?: bigint): RequestTrace | undefined {
    if (this.#closed || !this.settings.active) return undefined;
    const setting = this.settings.settingFor(request.model);
    const parent = this.mode === "opentelemetry"
      ? extractTraceContext(request.traceContext)
      : undefined;
    // A client's sampled trace is continued whatever the rate; an unsampled one is left to the
    // rate (and its spans to the parent-based sampler, which drops them).
    if (!setting.sample(parent !== undefined && isSampled(parent))) return undefined;
    this.open();
    return new RequestTrace(setting, id ?? this.#nextId++, {
      model: request.model,
      version: request.version,
      requestId: request.id ?? "",
      output: this.#otel === undefined ? {} : { otel: this.#otel },
      parent,
    });
  }

  /** Exports the spans ended so far (mode `opentelemetry`). */
  async flush(): Promise<void> {
    await this.#otel?.flush();
  }

  /** Writes what is kept, closes the trace files and stops exporting. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.settings.close();
    const otel = this.#otel;
    this.#otel = undefined;
    await otel?.shutdown();
  }
}
