/**
 * The entry module of every instance Worker: makes the instance's GPU current on the Worker's
 * thread (when it has one), loads the user's instance module, calls its default export (the
 * factory) once with the instance's {@linkcode WorkerContext}, then runs one batch at a
 * time: rebuilds the requests from the wire (in place), calls the callable with the
 * `InferContext`, validates the results and moves the outputs back.
 *
 * @module
 */

/// <reference no-default-lib="true" />
/// <reference lib="deno.worker" />

import { batchCalls, type InstanceContext } from "../callable/calls.ts";
import { runCoupled, runDecoupled } from "../callable/invoke.ts";
import type { AnyTensors, InferCallable, InferRequest, InferResult } from "../callable/types.ts";
import { validateResults } from "../callable/validate.ts";
import { TritonError, TritonValidationError } from "../errors.ts";
import { isDeviceTensor } from "../tensor/device_tensor.ts";
import {
  fromWireTensor,
  toWireDeviceTensor,
  toWireError,
  toWireTensor,
  type WireTensor,
  zeroCounts,
} from "../isolate/codec.ts";
import type { FromWorker, ToWorker, WireRequest, WorkerContext } from "./worker_protocol.ts";
import { rememberInput, WorkerCaller } from "./worker_calls.ts";
import { ModelMetrics } from "../callable/metrics.ts";
import type { OpenTelemetryTraceConfig } from "../config/trace_config.ts";
import type { OpenTelemetryExport } from "../telemetry/otel.ts";
import { SequenceStates } from "./sequence_states.ts";
import { RingReader, RingWriter } from "../isolate/ring.ts";
import { LANE_BATCH, readBatch, writeResults } from "./worker_lane.ts";

let callable: InferCallable | undefined;
let context: InstanceContext | undefined;
/** Posts the callables' calls to other models to the instance (`context.infer`). */
const caller = new WorkerCaller((message, transfer) => post(message, transfer));
/** Abort controllers of the running batch, by request index. */
const running = new Map<number, AbortController[]>();
/** Decoupled batches whose consumer stopped reading. */
const stopped = new Set<number>();
/** Steps each running decoupled batch may still post, and how to wake it when it waits. */
const credits = new Map<number, { left: number; wake?: (() => void) | undefined }>();
/** Held for the Worker's whole life: its other end reports when this thread ends. */
let _watch: unknown;
/** The Worker's span export (trace mode `opentelemetry`), flushed before it exits. */
let otel: OpenTelemetryExport | undefined;
/** Runs a batch under its request's span (loaded with the export). */
let underSpan = <T>(_traceparent: string | undefined, fn: () => T): T => fn();

/** Exports the callable's spans from this Worker, like the server's (loaded only then). */
async function startTelemetry(config: OpenTelemetryTraceConfig | undefined): Promise<void> {
  if (config === undefined) return;
  const module = await import("../telemetry/otel.ts");
  otel = new module.OpenTelemetryExport(config);
  underSpan = module.withTraceparent;
}
/** The states of the sequences this instance runs (a model with sequence batching). */
const sequences = new SequenceStates();

/** Messages posted so far: results take the ring only if none was posted during their batch. */
let posted = 0;
/** The ring of results to the main isolate (`worker_lane.ts`), once "init" gave it. */
let resultLane: RingWriter | undefined;
/** The ring of batches from it. */
let batchLane: RingReader | undefined;

function post(message: FromWorker, transfer: Transferable[] = []): void {
  posted++;
  self.postMessage(message, transfer);
}

/** Makes the instance's GPU current on this Worker's thread, before any user code runs. */
async function enterDevice(ctx: WorkerContext, cudaDriver: string | undefined): Promise<void> {
  if (ctx.gpu === undefined) return;
  if (cudaDriver === undefined) {
    throw new TritonError(
      `Cannot make ${ctx.device} current: the GPU inventory names no CUDA driver library`,
    );
  }
  // Loaded only here: CPU Workers never open the CUDA driver.
  const { makeGpuCurrent } = await import("../gpu/cuda.ts");
  makeGpuCurrent(cudaDriver, ctx.gpu.index);
}

async function init(
  module: string,
  ctx: WorkerContext,
  cudaDriver: string | undefined,
  opentelemetry: OpenTelemetryTraceConfig | undefined,
): Promise<void> {
  try {
    await enterDevice(ctx, cudaDriver);
    await startTelemetry(opentelemetry);
    const loaded = await import(module);
    const factory = loaded.default;
    if (typeof factory !== "function") {
      throw new TritonValidationError(
        `Invalid instance module ${module}: its default export must be a factory function, got ${typeof factory}`,
      );
    }
    const made = await factory(ctx);
    if (
      typeof made !== "function" &&
      !(typeof made === "object" && made !== null && typeof made.infer === "function")
    ) {
      throw new TritonValidationError(
        `Invalid instance module ${module}: its factory must return an inference function or an object with an infer method, got ${
          made === null ? "null" : typeof made
        }`,
      );
    }
    callable = made as InferCallable;
    // The model's own metrics go to the engine in the main isolate, in order with the results.
    const metrics = new ModelMetrics({ apply: (change) => post({ type: "metric", change }) });
    context = { model: ctx.model, instanceIndex: ctx.instanceIndex, device: ctx.device, metrics };
    post({ type: "ready" });
  } catch (error) {
    post({ type: "load-failed", error: toWireError(error) });
  }
}

function toRequests(id: number, wire: readonly WireRequest[]): InferRequest<AnyTensors>[] {
  const controllers = wire.map(() => new AbortController());
  running.set(id, controllers);
  return wire.map((entry, index) => {
    const data: AnyTensors = {};
    for (const [name, tensor] of Object.entries(entry.data)) {
      const array = data[name] = fromWireTensor(tensor);
      // A call passing it on sends its address (read in place) or a copy: the callable keeps it.
      if (!isDeviceTensor(array)) {
        rememberInput(array, "address" in tensor ? tensor.address : undefined);
      }
    }
    if (entry.cancelled) controllers[index]!.abort();
    return {
      data,
      parameters: entry.parameters,
      requestedOutputNames: entry.requestedOutputNames,
      signal: controllers[index]!.signal,
      ...(entry.parent === undefined ? {} : { parent: entry.parent }),
      ...(entry.sequence === undefined
        ? {}
        : { sequence: { ...entry.sequence, state: undefined } }),
    };
  });
}

/**
 * Sends a batch's results: on the ring when `onRing` (nothing was posted during the batch, so no
 * message of it, a metric or a call, is still on its way ahead of them) and they fit, else by
 * message.
 */
function postResults(id: number, results: InferResult<AnyTensors>[], onRing = false): void {
  const transfer: Transferable[] = [];
  const counts = zeroCounts();
  const wire = results.map((result) => {
    const out: Record<string, WireTensor> = {};
    for (const [name, array] of Object.entries(result)) {
      // A device tensor goes back as its handle: the engine copies it out before this Worker
      // gets its next batch.
      out[name] = isDeviceTensor(array)
        ? toWireDeviceTensor(array)
        : toWireTensor(array, { transfer, counts });
    }
    return out;
  });
  const message: FromWorker = { type: "results", id, results: wire, counts };
  if (onRing && resultLane !== undefined && writeResults(resultLane, message)) return;
  post(message, transfer);
}

/** Waits until the consumer of a decoupled batch has room for another step, or stopped it. */
async function untilCredit(id: number): Promise<void> {
  const credit = credits.get(id)!;
  while (credit.left <= 0 && !stopped.has(id)) {
    await new Promise<void>((resolve) => credit.wake = resolve);
  }
  credit.wake = undefined;
}

async function runBatch(
  id: number,
  decoupled: boolean,
  wire: readonly WireRequest[],
  credit: number,
): Promise<void> {
  let calls: ReturnType<typeof batchCalls> | undefined;
  let requests: ReturnType<typeof toRequests> = [];
  const postedBefore = posted;
  try {
    if (callable === undefined || context === undefined) {
      throw new Error("The instance received a batch before it was loaded");
    }
    requests = sequences.attach(toRequests(id, wire));
    calls = batchCalls(context, requests, caller.forBatch(id));
    if (decoupled) {
      credits.set(id, { left: credit });
      for await (const step of runDecoupled(callable, requests, calls.context)) {
        postResults(id, validateResults(step, requests, context.model));
        credits.get(id)!.left--;
        // A slow consumer pauses the generator here: its next step is pulled once there is room.
        await untilCredit(id);
        if (stopped.has(id)) break;
      }
      // The batch's calls end before the batch does (they may read its inputs).
      await calls.settle();
      post({ type: "done", id });
    } else {
      const value = await runCoupled(callable, requests, calls.context);
      const results = validateResults(value, requests, context.model);
      await calls.settle();
      postResults(id, results, posted === postedBefore);
    }
  } catch (error) {
    await calls?.settle();
    post({ type: "failed", id, error: toWireError(error) });
  } finally {
    sequences.finish(requests);
    running.delete(id);
    stopped.delete(id);
    credits.delete(id);
  }
}

function startBatch(message: Extract<ToWorker, { type: "batch" }>): void {
  void underSpan(
    message.traceparent,
    () => runBatch(message.id, message.decoupled, message.requests, message.credit),
  );
}

function onRecord(kind: number, payload: Uint8Array): void {
  if (kind !== LANE_BATCH) throw new Error(`Unknown record kind ${kind}`);
  startBatch(readBatch(payload));
}

self.onmessage = (event: MessageEvent<ToWorker>): void => {
  const message = event.data;
  // A batch written to the ring before this message was posted comes first: a "cancel" finds it.
  batchLane?.drain(onRecord);
  switch (message.type) {
    case "init":
      _watch = message.watch;
      if (message.lanes !== undefined) {
        resultLane = new RingWriter(message.lanes.toMain);
        batchLane = new RingReader(message.lanes.toWorker);
        void batchLane.pump(onRecord, (error) => {
          // A record that cannot be read is a bug; its batch then waits for the execution
          // timeout, if any, while the Worker goes on serving.
          console.error(`Instance Worker: reading a batch: ${(error as Error)?.stack ?? error}`);
        });
      }
      void init(message.module, message.context, message.cudaDriver, message.opentelemetry);
      break;
    case "batch":
      startBatch(message);
      break;
    case "credit": {
      const credit = credits.get(message.id);
      if (credit === undefined) break;
      credit.left += message.steps;
      credit.wake?.();
      break;
    }
    case "cancel":
      running.get(message.id)?.[message.request]?.abort();
      break;
    case "stop":
      if (!running.has(message.id)) break;
      stopped.add(message.id);
      for (const controller of running.get(message.id)!) controller.abort();
      credits.get(message.id)?.wake?.();
      break;
    case "drop-sequences":
      sequences.drop(message.ids);
      break;
    case "exit":
      // The callable's last spans are exported before the thread ends.
      if (otel === undefined) self.close();
      else void otel.shutdown().catch(() => {}).finally(() => self.close());
      break;
    case "call-result":
    case "call-step":
    case "call-end":
    case "call-failed":
      caller.receive(message);
      break;
  }
};
