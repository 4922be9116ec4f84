/**
 * Submitting an {@linkcode InferenceRequest} to the core: a `TRITONSERVER_InferenceRequest`
 * with inputs pointing at the caller's buffers (kept alive until the release event), requested
 * outputs, typed parameters, priority, timeout and id, built, bound to the completion queue and
 * submitted by one bridge call (`dt_infer`) from a packed description; cancellation on `signal`
 * abort while the core still holds the request.
 *
 * @module
 */

import { InferenceError } from "../../errors.ts";
import { toRawBytes } from "../../tensor/ndarray.ts";
import { isDeviceTensor } from "../../tensor/device_tensor.ts";
import type { InferenceRequest, InferenceResponse } from "../engine.ts";
import type { CompletionPump } from "./events.ts";
import type { NativeLibraries } from "../../native/ffi.ts";
import { Packer } from "./packer.ts";
import { readResponse } from "./response.ts";
import { pointerOf, takeError } from "./status.ts";
import { addressOf, dtypeOfTriton, lend, returnLent, tritonDataType } from "./tensors.ts";
import { EVENT_TRACE_ACTIVITY, EVENT_TRACE_END, EVENT_TRACE_TENSOR } from "./events.ts";
import {
  kserveDatatype,
  type RequestTrace,
  TENSOR_ACTIVITIES,
  TRACE_ACTIVITIES,
} from "../../telemetry/request_trace.ts";

const RESPONSE_FINAL = 1;
const RELEASE_ALL = 1;

/** What a submitted request reports back. */
export interface SubmitHandlers {
  /**
   * One response (null for a flags-only final); `final` marks the last. The response must be
   * consumed synchronously: it is deleted right after this returns.
   */
  response(response: Deno.PointerValue, final: boolean): void;
  /**
   * Results another isolate lent to this request's responses, released by their deletion (a
   * thread sharing the core: the engine's isolate lent them). Without it they are dropped.
   */
  foreignLent?(addresses: bigint[]): void;
  /**
   * The request's trace and what hears of it, when the tracer sampled it.
   *
   * @default {undefined}
   */
  readonly traced?: NativeTraceHooks | undefined;
}

/** The core a request goes to: the opened libraries, the completion queue and the server. */
export interface CoreHandles {
  /** The opened libraries. */
  readonly libraries: NativeLibraries;
  /** The completion queue the request's events arrive on. */
  readonly queue: CompletionPump;
  /** The `TRITONSERVER_Server*`. */
  readonly server: Deno.PointerValue;
}

/** How {@linkcode inferCoupled} reads its one response, and who hears of lent results and traces. */
export interface CoupledOptions {
  /** The model's output names in declared order. */
  readonly order: readonly string[];
  /**
   * Receives results another isolate lent (see {@linkcode SubmitHandlers}).
   *
   * @default {undefined}
   */
  readonly foreignLent?: ((addresses: bigint[]) => void) | undefined;
  /**
   * The request's trace and what hears of it, when the tracer sampled it.
   *
   * @default {undefined}
   */
  readonly traced?: NativeTraceHooks | undefined;
}

/** A request the tracer sampled: the core traces it and reports its activities. */
export interface NativeTraceHooks {
  /** The request's trace (its id is set to the core's once submitted). */
  readonly trace: RequestTrace;
  /** Called once the core has the trace, with its id (the backend finds it by that id). */
  started(trace: RequestTrace): void;
  /** Called once the core released the trace: every activity is in. */
  ended(trace: RequestTrace): void;
}

// The lent results one response deletion gives back (read synchronously; see dt_response_delete).
const released = new BigUint64Array(256);

/**
 * Deletes a response and gives back the results its outputs were lent (see `dt_output`); those
 * this isolate did not lend go to `foreign`.
 */
function deleteResponse(
  bridge: NativeLibraries["bridge"],
  response: Deno.PointerObject,
  foreign: ((addresses: bigint[]) => void) | undefined,
): void {
  const count = bridge.dt_response_delete(response, released, released.length);
  let others: bigint[] | undefined;
  for (let i = 0; i < count; i++) {
    if (!returnLent(released[i]!)) (others ??= []).push(released[i]!);
  }
  if (others !== undefined) foreign?.(others);
}

/**
 * Builds and submits a request; returns once the core accepted it.
 *
 * @param handles The core: its libraries, completion queue and server.
 * @param request The request.
 * @param handlers Receives the responses (and its trace's events, when traced).
 * @throws {InferenceError} With the core's code when building or submitting fails, or
 *   CANCELLED when the signal was already aborted.
 */
export function submitRequest(
  handles: CoreHandles,
  request: InferenceRequest,
  handlers: SubmitHandlers,
): void {
  const { libraries, queue, server } = handles;
  const { core, bridge } = libraries;
  const traced = handlers.traced;
  const trace = traced?.trace;
  if (request.signal?.aborted) {
    throw InferenceError.cancelled(`Request for model '${request.modelName}' was cancelled`);
  }
  // Input memory must outlive the request: the core reads it until the release event.
  const keep: Uint8Array[] = [];
  const lentAt: bigint[] = [];
  const giveBack = (): void => {
    for (const address of lentAt) returnLent(address);
    lentAt.length = 0;
    keep.length = 0;
  };
  // The bound-output table must outlive the last response, which may follow the release.
  let bound = boundOutputs(request);
  let packed: Uint8Array;
  try {
    packed = packRequest(request, keep, lentAt, bound, trace?.level ?? 0).bytes();
  } catch (error) {
    giveBack();
    throw error;
  }
  let handle: Deno.PointerValue = null;
  let tag: bigint | undefined;
  try {
    let released = false;
    let finalSeen = false;
    // A traced request's tag stays registered until its trace ends (after the release).
    let traceEnded = trace === undefined;
    const onAbort = (): void => {
      // Cancelling after the release event would touch freed memory.
      if (!released) {
        const failure = core.TRITONSERVER_InferenceRequestCancel(handle);
        if (failure !== null) core.TRITONSERVER_ErrorDelete(failure);
        queueMicrotask(() => queue.drain());
      }
    };
    const finish = (): void => {
      if (released && finalSeen && traceEnded) {
        bound = undefined;
        request.signal?.removeEventListener("abort", onAbort);
        queue.unregister(tag!);
      }
    };
    tag = queue.register({
      response(response, flags): void {
        const final = (flags & RESPONSE_FINAL) !== 0;
        try {
          handlers.response(response, final);
        } finally {
          if (response !== null) deleteResponse(bridge, response, handlers.foreignLent);
          if (final) {
            finalSeen = true;
            finish();
          }
        }
      },
      release(_request, flags): void {
        if ((flags & RELEASE_ALL) === 0) return;
        released = true;
        const failure = core.TRITONSERVER_InferenceRequestDelete(handle);
        if (failure !== null) core.TRITONSERVER_ErrorDelete(failure);
        giveBack();
        // Deleting the request can release its trace here, on this thread: its end event is
        // queued without a wake-up, so it is taken now (folded into the running drain).
        if (trace !== undefined) queue.drain();
        finish();
      },
      ...(trace === undefined ? {} : {
        trace(kind, flags, value): void {
          if (kind === EVENT_TRACE_ACTIVITY) {
            const activity = TRACE_ACTIVITIES[flags];
            if (activity !== undefined) trace.activity(activity, value);
          } else if (kind === EVENT_TRACE_TENSOR) {
            readTracedTensor(trace, value);
          } else if (kind === EVENT_TRACE_END && !traceEnded) {
            traceEnded = true;
            traced!.ended(trace);
            finish();
          }
        },
      }),
    });
    // One call builds, binds and submits it; on failure the bridge has deleted it.
    const failure = takeError(
      core,
      bridge.dt_infer(server, packed, BigInt(packed.byteLength), tag, submitted),
    );
    if (failure !== undefined) throw failure;
    handle = pointerOf(submitted);
    if (trace !== undefined) {
      if (submitted[2] === 0n) {
        traceEnded = true; // the core made no trace (it could not): nothing will come
      } else {
        trace.id = submitted[2]!;
        traced!.started(trace);
      }
    }
    // No { once } options object: the listener is removed at the end in any case.
    request.signal?.addEventListener("abort", onAbort);
    // A cache hit completes inside ServerInferAsync, on this thread; dispatched once the caller
    // has its handlers in place. Nothing queued (the usual case): nothing to drain.
    if (submitted[1] !== 0n) queueMicrotask(() => queue.drain());
  } catch (error) {
    // Before a successful submit no callback fires, and the bridge deleted the request.
    if (tag !== undefined) queue.unregister(tag);
    giveBack();
    throw error;
  }
}

/**
 * Runs one request of a coupled model: submits it and reads its one response.
 *
 * @param handles The core: its libraries, completion queue and server.
 * @param request The request.
 * @param options The output order, and who hears of lent results and of the trace.
 * @returns The response.
 */
export function inferCoupled(
  handles: CoreHandles,
  request: InferenceRequest,
  options: CoupledOptions,
): Promise<InferenceResponse> {
  const { foreignLent, traced } = options;
  const layout = { order: options.order, bound: request.outputBuffers };
  return new Promise<InferenceResponse>((resolve, reject) => {
    submitRequest(handles, request, {
      response: (response, final) => {
        if (response === null) {
          if (final) reject(InferenceError.internal("The model sent no response"));
          return;
        }
        try {
          resolve(readResponse(handles.libraries.bridge, response, layout));
        } catch (error) {
          reject(error);
        }
      },
      ...(foreignLent === undefined ? {} : { foreignLent }),
      traced,
    });
  });
}

const packer = new Packer();
// What `dt_infer` hands back: the request, and how many events its queue holds after the submit.
const submitted = new BigUint64Array(3);
const tablePacker = new Packer();
// `TRITONSERVER_MemoryType` values.
const MEMORY_CPU = 0;
const MEMORY_GPU = 2;
// Typed parameter kinds `dt_infer` reads.
const PARAMETER_STRING = 0;
const PARAMETER_INT = 1;
const PARAMETER_BOOL = 2;
const PARAMETER_DOUBLE = 3;
// The request flags and the correlation ID's kinds `dt_infer` reads.
const SEQUENCE_START = 1;
const SEQUENCE_END = 2;
const CORRID_NONE = 0;
const CORRID_UINT = 1;
const CORRID_STRING = 2;

/**
 * The table of caller-owned output buffers the bridge's allocator hands out (`bound_output` in
 * `ffi/dt_client.c`): u64 table length, u32 count, then per requested output found in
 * `request.outputBuffers` its name, address, byte size, memory type (CPU, or GPU for a CUDA
 * region) and device, and its guard (`request.outputGuards`): the descriptor of the object the
 * buffer is mapped from (-1: none), the size that object must have, and the refusal when it has
 * less; `undefined` when there are none.
 */
function boundOutputs(request: InferenceRequest): Uint8Array | undefined {
  const buffers = request.outputBuffers;
  if (buffers === undefined || buffers.size === 0) return undefined;
  tablePacker.reset();
  tablePacker.i64(0);
  tablePacker.u32(buffers.size);
  for (const [name, buffer] of buffers) {
    tablePacker.string(name);
    if (buffer instanceof Uint8Array) {
      tablePacker.i64(buffer.byteLength === 0 ? 0n : addressOf(buffer));
      tablePacker.i64(buffer.byteLength);
      tablePacker.u32(MEMORY_CPU);
      tablePacker.i64(0);
    } else {
      tablePacker.i64(buffer.pointer);
      tablePacker.i64(buffer.byteSize);
      tablePacker.u32(MEMORY_GPU);
      tablePacker.i64(buffer.device);
    }
    const guard = request.outputGuards?.get(name);
    tablePacker.i64(guard?.fd ?? -1);
    tablePacker.i64(guard?.minimumSize ?? 0);
    tablePacker.string(guard?.refusal ?? "");
  }
  const table = tablePacker.bytes().slice();
  new DataView(table.buffer).setBigUint64(0, BigInt(table.byteLength), true);
  return table;
}

/**
 * Writes the description `dt_infer` reads: model, version, id, priority, timeout, the sequence
 * (flags, then the correlation ID's kind and value), the inputs (name, datatype, shape, data
 * address and size, memory type and device), the requested outputs, the typed parameters and
 * the address of the bound-output table (0: none). Each host input's bytes are pushed onto
 * `keep`, and the addresses of those lent to the core (see `lend`) onto `lentAt`; a device
 * tensor (a client's CUDA region, which the front end holds) goes to the core as GPU memory on
 * its device.
 */
function packRequest(
  request: InferenceRequest,
  keep: Uint8Array[],
  lentAt: bigint[],
  bound: Uint8Array | undefined,
  level: number,
): Packer {
  packer.reset();
  packer.string(request.modelName);
  packer.i64(request.modelVersion ?? -1);
  packer.string(request.id ?? "");
  packer.i64(request.priority !== undefined && request.priority > 0 ? request.priority : 0);
  packer.i64(
    request.timeoutMicroseconds !== undefined && request.timeoutMicroseconds > 0
      ? request.timeoutMicroseconds
      : 0,
  );
  // The sequence, as Triton's front ends set it: the flags and the correlation ID (0 or "": none).
  const sequence = request.sequence;
  packer.u32((sequence?.start ? SEQUENCE_START : 0) | (sequence?.end ? SEQUENCE_END : 0));
  if (typeof sequence?.id === "string" && sequence.id !== "") {
    packer.u32(CORRID_STRING);
    packer.string(sequence.id);
  } else if (typeof sequence?.id === "bigint" && sequence.id !== 0n) {
    packer.u32(CORRID_UINT);
    packer.i64(BigInt.asIntN(64, sequence.id));
  } else {
    packer.u32(CORRID_NONE);
  }
  const outputs = request.outputs ?? [];
  const parameters = Object.entries(request.parameters);
  packer.u32(request.inputs.size);
  packer.u32(outputs.length);
  packer.u32(parameters.length);
  for (const [name, array] of request.inputs) {
    packer.string(name);
    packer.u32(tritonDataType(array.dtype));
    packer.u32(array.shape.length);
    for (const d of array.shape) packer.i64(d);
    if (isDeviceTensor(array)) {
      packer.i64(array.byteSize === 0 ? 0n : array.pointer);
      packer.i64(array.byteSize);
      packer.u32(MEMORY_GPU);
      packer.i64(array.device);
      continue;
    }
    const bytes = toRawBytes(array);
    keep.push(bytes);
    if (bytes.byteLength === 0) {
      packer.i64(0);
    } else {
      // The backend then views these bytes on their own ArrayBuffer.
      const address = lend(bytes);
      lentAt.push(address);
      packer.i64(address);
    }
    packer.i64(bytes.byteLength);
    packer.u32(MEMORY_CPU);
    packer.i64(0);
  }
  for (const name of outputs) packer.string(name);
  for (const [key, value] of parameters) {
    packer.string(key);
    if (typeof value === "string") {
      packer.u32(PARAMETER_STRING);
      packer.string(value);
    } else if (typeof value === "boolean") {
      packer.u32(PARAMETER_BOOL);
      packer.u32(value ? 1 : 0);
    } else if (Number.isInteger(value)) {
      packer.u32(PARAMETER_INT);
      packer.i64(value);
    } else {
      packer.u32(PARAMETER_DOUBLE);
      packer.f64(value);
    }
  }
  packer.i64(bound === undefined ? 0n : addressOf(bound));
  packer.u32(level);
  return packer;
}

/**
 * Reads a traced tensor out of the bridge's blob (`on_trace_tensor` in `ffi/dt_client.c`; the
 * pump frees it afterwards): activity, datatype, shape, name, bytes.
 */
function readTracedTensor(trace: RequestTrace, address: bigint): void {
  const pointer = Deno.UnsafePointer.create(address);
  if (pointer === null) return;
  const view = new Deno.UnsafePointerView(pointer);
  const activity = TENSOR_ACTIVITIES[view.getUint32(0) - 7];
  const datatype = view.getUint32(4);
  const dims = view.getUint32(8);
  const shape: bigint[] = [];
  for (let d = 0; d < dims; d++) shape.push(view.getBigInt64(12 + d * 8));
  let at = 12 + dims * 8;
  const nameLength = view.getUint32(at);
  const name = new TextDecoder().decode(view.getArrayBuffer(nameLength, at + 4));
  at += 4 + nameLength;
  const size = Number(view.getBigUint64(at));
  const raw = new Uint8Array(size);
  if (size > 0) view.copyInto(raw, at + 8);
  if (activity === undefined) return;
  let datatypeName: string;
  try {
    datatypeName = kserveDatatype(dtypeOfTriton(datatype));
  } catch {
    return; // a datatype DenoTriton has no name for: not recorded
  }
  trace.tensor(activity, { name, datatype: datatypeName, shape, raw });
}
