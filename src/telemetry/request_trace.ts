/**
 * One traced request: the activities both engines report for it, with Triton's names
 * (`REQUEST_START`, `QUEUE_START`, `COMPUTE_START`, `COMPUTE_INPUT_END`,
 * `COMPUTE_OUTPUT_START`, `COMPUTE_END`, `REQUEST_END`; the Triton engine takes them from the
 * core's trace callbacks, the built-in engine from the same points of its scheduler), its
 * tensors at level `TENSORS`, and, once it ends, its output: Triton's JSON trace records for
 * the trace file (mode `triton`), or OpenTelemetry spans (mode `opentelemetry`): a span named
 * after the model from `REQUEST_START` to `REQUEST_END`, a child of the client's span when it
 * sent a `traceparent`, with `queue` (`QUEUE_START` to `COMPUTE_START`) and `compute`
 * (`COMPUTE_START` to `COMPUTE_END`) children and the activities as events.
 *
 * Timestamps are nanoseconds (bigint) of a monotonic clock; `clockOffsetNs` turns them into
 * nanoseconds since the epoch for spans.
 *
 * @module
 */

import { type Attributes, type Context, trace as traceApi } from "@opentelemetry/api";
import type { DType } from "../tensor/dtype.ts";
import { newSpanId, newTraceId, type OpenTelemetryExport, spanContextOf } from "./otel.ts";
import {
  TRACE_LEVEL_TENSORS,
  TRACE_LEVEL_TIMESTAMPS,
  type TraceSetting,
} from "./trace_settings.ts";

/** The core's timeline activities, by their `TRITONSERVER_InferenceTraceActivity` value. */
export const TRACE_ACTIVITIES = [
  "REQUEST_START",
  "QUEUE_START",
  "COMPUTE_START",
  "COMPUTE_INPUT_END",
  "COMPUTE_OUTPUT_START",
  "COMPUTE_END",
  "REQUEST_END",
] as const;

/** A timeline activity. */
export type TraceActivity = typeof TRACE_ACTIVITIES[number];

/** The core's tensor activities, by value minus 7. */
export const TENSOR_ACTIVITIES = [
  "TENSOR_QUEUE_INPUT",
  "TENSOR_BACKEND_INPUT",
  "TENSOR_BACKEND_OUTPUT",
] as const;

/** A tensor activity. */
export type TensorActivity = typeof TENSOR_ACTIVITIES[number];

/** KServe datatype names of the DTypes (Triton writes these in tensor records). */
const KSERVE: Readonly<Record<string, string>> = {
  bool: "BOOL",
  uint8: "UINT8",
  uint16: "UINT16",
  uint32: "UINT32",
  uint64: "UINT64",
  int8: "INT8",
  int16: "INT16",
  int32: "INT32",
  int64: "INT64",
  float16: "FP16",
  bfloat16: "BF16",
  float32: "FP32",
  float64: "FP64",
  bytes: "BYTES",
};

/**
 * A tensor's values as Triton's trace writes them: comma-separated, strings for BYTES, nothing
 * for the half-precision types (Triton writes none either).
 *
 * @param datatype The KServe datatype.
 * @param raw The tensor's bytes (little-endian; BYTES length-prefixed).
 * @returns The values.
 */
export function tensorValues(datatype: string, raw: Uint8Array): string {
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const out: string[] = [];
  const each = (size: number, read: (at: number) => number | bigint): void => {
    for (let at = 0; at + size <= raw.byteLength; at += size) out.push(String(read(at)));
  };
  switch (datatype) {
    case "BOOL":
      each(1, (at) => raw[at] === 0 ? 0 : 1);
      break;
    case "UINT8":
      each(1, (at) => view.getUint8(at));
      break;
    case "INT8":
      each(1, (at) => view.getInt8(at));
      break;
    case "UINT16":
      each(2, (at) => view.getUint16(at, true));
      break;
    case "INT16":
      each(2, (at) => view.getInt16(at, true));
      break;
    case "UINT32":
      each(4, (at) => view.getUint32(at, true));
      break;
    case "INT32":
      each(4, (at) => view.getInt32(at, true));
      break;
    case "UINT64":
      each(8, (at) => view.getBigUint64(at, true));
      break;
    case "INT64":
      each(8, (at) => view.getBigInt64(at, true));
      break;
    case "FP32":
      each(4, (at) => view.getFloat32(at, true));
      break;
    case "FP64":
      each(8, (at) => view.getFloat64(at, true));
      break;
    case "BYTES": {
      const decoder = new TextDecoder();
      for (let at = 0; at + 4 <= raw.byteLength;) {
        const length = view.getUint32(at, true);
        at += 4;
        if (at + length > raw.byteLength) break;
        out.push(decoder.decode(raw.subarray(at, at + length)));
        at += length;
      }
      break;
    }
  }
  return out.join(",");
}

/**
 * The KServe datatype name of a DType.
 *
 * @param dtype The DType.
 * @returns Its KServe name.
 */
export function kserveDatatype(dtype: DType): string {
  return KSERVE[dtype] ?? dtype.toUpperCase();
}

/** Where a traced request was computed (the compute span's attributes). */
export interface ComputePlace {
  /** The instance's index. */
  readonly instance: number;
  /** The instance's device. */
  readonly device: string;
  /** The batch's size (the sum of its requests' batch sizes). */
  readonly batchSize: number;
}

/** What a {@linkcode RequestTrace} writes to once it ends. */
export interface TraceOutput {
  /** Mode `opentelemetry`: the span export. */
  readonly otel?: OpenTelemetryExport;
}

/** What a {@linkcode RequestTrace} is of: the request, and where its spans go. */
export interface RequestTraceInit {
  /** The model. */
  readonly model: string;
  /** The model's version. */
  readonly version: number;
  /**
   * The request's id.
   *
   * @default {""} none
   */
  readonly requestId?: string;
  /**
   * Where spans go (mode `opentelemetry`).
   *
   * @default {{}} records, not spans
   */
  readonly output?: TraceOutput;
  /** The client's trace context, if it sent one. */
  readonly parent?: Context | undefined;
}

/** A tensor as a trace records it (level `TENSORS`). */
export interface TracedTensor {
  /** The tensor's name. */
  readonly name: string;
  /** Its KServe datatype. */
  readonly datatype: string;
  /** Its shape. */
  readonly shape: readonly (number | bigint)[];
  /** Its bytes. */
  readonly raw: Uint8Array;
}

/** One traced request. */
export class RequestTrace {
  /** The trace id (the core's on the Triton engine, else the server's own count). */
  id: bigint;
  /** Whether timestamps are traced. */
  readonly timestamps: boolean;
  /** Whether tensors are traced. */
  readonly tensors: boolean;
  /** The model. */
  readonly model: string;
  /** Its version. */
  readonly version: number;
  readonly #requestId: string;
  readonly #setting: TraceSetting;
  readonly #otel: OpenTelemetryExport | undefined;
  readonly #parent: Context | undefined;
  readonly #times: [TraceActivity, bigint][] = [];
  readonly #tensorRecords: string[] = [];
  #place: ComputePlace | undefined;
  #ended = false;
  // Mode opentelemetry: the ids of the request's and compute spans, chosen now.
  readonly #traceId: string;
  readonly #requestSpanId: string;
  readonly #computeSpanId: string;

  /**
   * A traced request.
   *
   * @param setting The setting that sampled it (and writes its records).
   * @param id Its trace id.
   * @param init The model and version, the request's id, where spans go, and the client's
   *   trace context.
   */
  constructor(setting: TraceSetting, id: bigint, init: RequestTraceInit) {
    const { model, version, requestId = "", output = {}, parent } = init;
    this.#setting = setting;
    this.id = id;
    this.model = model;
    this.version = version;
    this.#requestId = requestId;
    this.timestamps = (setting.level & TRACE_LEVEL_TIMESTAMPS) !== 0;
    this.tensors = (setting.level & TRACE_LEVEL_TENSORS) !== 0 && output.otel === undefined;
    this.#otel = output.otel;
    this.#parent = parent;
    this.#traceId = parent === undefined ? newTraceId() : traceIdOf(parent);
    this.#requestSpanId = newSpanId();
    this.#computeSpanId = newSpanId();
  }

  /** The level bits the request is traced at. */
  get level(): number {
    return this.#setting.level & (this.tensors ? ~0 : ~TRACE_LEVEL_TENSORS);
  }

  /**
   * Records an activity.
   *
   * @param activity Its name.
   * @param ns When, in nanoseconds of the engine's monotonic clock.
   */
  activity(activity: TraceActivity, ns: bigint = monotonicNs()): void {
    if (!this.#ended) this.#times.push([activity, ns]);
  }

  /**
   * Records a tensor (level `TENSORS`).
   *
   * @param activity Where it was seen.
   * @param tensor Its name, KServe datatype, shape and bytes.
   */
  tensor(activity: TensorActivity, tensor: TracedTensor): void {
    if (!this.tensors || this.#ended) return;
    const { name, datatype, shape, raw } = tensor;
    this.#tensorRecords.push(
      `{"id":${this.id},"activity":"${activity}","tensor":{"name":${JSON.stringify(name)},"data":${
        JSON.stringify(tensorValues(datatype, raw))
      },"shape":"${shape.join(",")}","dtype":"${datatype}"}}`,
    );
  }

  /**
   * Says where the request is computed (attributes of the compute span).
   *
   * @param place The instance, its device and the batch size.
   */
  computedOn(place: ComputePlace): void {
    this.#place = place;
  }

  /**
   * The context a callable computing this request runs in (mode `opentelemetry`): its compute
   * span, by the id chosen beforehand, so the callable's spans are that span's children.
   *
   * @returns The context, or `undefined` in mode `triton`.
   */
  callableContext(): Context | undefined {
    return this.#otel === undefined ? undefined : spanContextOf(this.#traceId, this.#computeSpanId);
  }

  /**
   * Ends the trace and writes it: its records (mode `triton`) or its spans. Idempotent.
   *
   * @param clockOffsetNs Nanoseconds to add to the timestamps for the epoch (spans only).
   */
  end(clockOffsetNs = 0n): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#otel !== undefined) this.#spans(this.#otel, clockOffsetNs);
    else this.#setting.write(this.#records());
  }

  #records(): string {
    const head = [`"id":${this.id}`, `"model_name":${JSON.stringify(this.model)}`];
    head.push(`"model_version":${this.version}`);
    if (this.#requestId !== "") head.push(`"request_id":${JSON.stringify(this.#requestId)}`);
    const records = [`{${head.join(",")}}`];
    if (this.timestamps) {
      for (const [name, ns] of this.#times) {
        records.push(`{"id":${this.id},"timestamps":[{"name":"${name}","ns":${ns}}]}`);
      }
    }
    records.push(...this.#tensorRecords);
    return records.join(",");
  }

  #spans(otel: OpenTelemetryExport, offsetNs: bigint): void {
    const at = new Map(this.#times);
    const ms = (ns: bigint | undefined): number | undefined =>
      ns === undefined ? undefined : Number(ns + offsetNs) / 1e6;
    const start = ms(at.get("REQUEST_START") ?? this.#times[0]?.[1]);
    if (start === undefined) return;
    const attributes: Attributes = {
      "triton.model_name": this.model,
      "triton.model_version": this.version,
      "triton.trace_id": Number(this.id),
    };
    if (this.#requestId !== "") attributes["triton.request_id"] = this.#requestId;
    const request = otel.span({
      name: this.model,
      parent: this.#parent,
      traceId: this.#traceId,
      spanId: this.#requestSpanId,
      start,
      attributes,
    });
    const inRequest = spanContextOf(this.#traceId, this.#requestSpanId);
    const queued = ms(at.get("QUEUE_START"));
    const computed = ms(at.get("COMPUTE_START"));
    if (queued !== undefined && computed !== undefined) {
      const queue = otel.span({
        name: "queue",
        parent: inRequest,
        traceId: this.#traceId,
        spanId: newSpanId(),
        start: queued,
        attributes: { "triton.model_name": this.model, "triton.model_version": this.version },
      });
      queue.end(computed);
    }
    if (computed !== undefined) {
      const place = this.#place;
      const compute = otel.span({
        name: "compute",
        parent: inRequest,
        traceId: this.#traceId,
        spanId: this.#computeSpanId,
        start: computed,
        attributes: {
          "triton.model_name": this.model,
          "triton.model_version": this.version,
          ...(place === undefined ? {} : {
            "triton.instance": place.instance,
            "triton.device": place.device,
            "triton.batch_size": place.batchSize,
          }),
        },
      });
      for (const name of ["COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START"] as const) {
        const when = ms(at.get(name));
        if (when !== undefined) compute.addEvent(name, when);
      }
      compute.end(ms(at.get("COMPUTE_END")) ?? computed);
    }
    for (const [name, ns] of this.#times) {
      if (name === "REQUEST_START" || name === "QUEUE_START" || name === "REQUEST_END") {
        request.addEvent(name, ms(ns)!);
      }
    }
    request.end(ms(at.get("REQUEST_END") ?? this.#times.at(-1)![1]));
  }
}

// The client's span is the parent: the trace goes on under its trace id.
function traceIdOf(parent: Context): string {
  return traceApi.getSpanContext(parent)?.traceId ?? newTraceId();
}

const ORIGIN_NS = BigInt(Math.round(performance.timeOrigin * 1000)) * 1000n;

/**
 * Nanoseconds of a monotonic clock that reads as the time since the epoch (the built-in
 * engine's trace clock): the isolate's time origin plus `performance.now()`, to the microsecond.
 *
 * @returns The time.
 */
export function monotonicNs(): bigint {
  return ORIGIN_NS + BigInt(Math.round(performance.now() * 1000)) * 1000n;
}
