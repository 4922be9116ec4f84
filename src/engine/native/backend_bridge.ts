/**
 * The JavaScript half of the forwarding backend. For each model instance a consumer loop waits
 * for the batch Triton's instance thread parked in the C backend (the thread rings the
 * isolate's doorbell, see `doorbell.ts`), reads the
 * inputs in place, runs the {@linkcode ModelInstance}, writes outputs straight into the buffers
 * the client's allocator hands out, sends the responses and tells the C side the batch is done,
 * which reports statistics, releases the requests and lets `ModelInstanceExecute` return.
 *
 * Input tensors are views of the core's request memory: they are valid only while the callable
 * runs (until its batch is done). An input in GPU memory (a client's CUDA region) is a
 * `DeviceTensor` over it, which the instance keeps or copies to the host (`device_inputs.ts`).
 * A device-tensor result goes into the buffer the client's allocator hands out through the CUDA
 * driver: device to device into a CUDA region, device to host otherwise; a host result into a
 * CUDA region is one host-to-device copy. Where that memory is JavaScript's own (the front end's bytes,
 * a shared-memory region's view: see `lend` in `tensors.ts`), they are views of its
 * `ArrayBuffer`, not new ones over the core's pointer. A batch is released only once its
 * instance is done with it (a timed-out callable keeps its batch until it returns); when the
 * server gives up on a running batch at stop, main-thread views of foreign memory are revoked
 * (detached) first, and Worker instances must have ended.
 *
 * @module
 */

import type {
  AnyTensors,
  InferRequest,
  InferResult,
  ParameterValue,
  Sequence,
} from "../../callable/types.ts";
import {
  type ErrorCode,
  InferenceError,
  messageOf,
  toInferenceError,
  TritonUnrecoverableError,
} from "../../errors.ts";
import type { ModelInstance, NativeTensorLocation } from "../../instances/instance.ts";
import type { Logger } from "../../log.ts";
import { SlotSet } from "../../slot_set.ts";
import { refuseMissingInputs } from "../required_inputs.ts";
import { decodeParent, PARENT_PARAMETER } from "../calls.ts";
import { type NDArray, toRawBytes } from "../../tensor/ndarray.ts";
import { isForeign } from "../../tensor/foreign_memory.ts";
import {
  DEFAULT_CUDA_DRIVER,
  DeviceTensor,
  isDeviceTensor,
  type Tensor,
} from "../../tensor/device_tensor.ts";
import { CudaMemory, deviceMemoryError } from "../../native/cuda_memory.ts";
import { forgetSlot, rung } from "./doorbell.ts";
import type { BridgeLibrary } from "../../native/ffi.ts";
import { Unpacker } from "./packer.ts";
import { type DescribedTensor, readParameters, readTensor } from "./response.ts";
import {
  ENSEMBLE_SIGNAL_PARAMETER,
  type ResponseStream,
  STREAM_PARAMETER,
} from "./response_stream.ts";
import { cString, errorCodeName, errorCodeValue, readCString } from "./status.ts";
import {
  dtypeOfTriton,
  lend,
  lendable,
  returnLent,
  tensorInPlace,
  tritonDataType,
  viewAt,
} from "./tensors.ts";
import type { ModelInfo } from "../../config/model_info.ts";
import type { Context } from "@opentelemetry/api";
import type { RequestTrace } from "../../telemetry/request_trace.ts";
import { runInContext } from "../../telemetry/otel.ts";
import type { SequenceId } from "../../config/sequence_batching.ts";

interface DescribedRequest {
  id: string;
  cancelled: boolean;
  traceId: bigint;
  /** `TRITONSERVER_RequestFlag`s: SEQUENCE_START 1, SEQUENCE_END 2. */
  flags: number;
  /** The correlation ID; `0n` when the request has none (the direct strategy's padding). */
  correlationId: SequenceId;
  parameters: Record<string, ParameterValue>;
  inputs: DescribedTensor[];
  outputs: string[];
}

// How a batch description carries a correlation ID, and the request flags (`ffi/dt_abi.h`).
const CORRID_UINT = 1;
const CORRID_STRING = 2;
const SEQUENCE_START = 1;
const SEQUENCE_END = 2;

// Reused by every consumer loop: a batch is read synchronously, in one go.
let scratch = new Uint8Array(16384);

/** Reads the taken batch of a slot (`dt_batch_read`): one entry per request. */
function readBatch(bridge: BridgeLibrary, channel: bigint, slot: number): DescribedRequest[] {
  let size = Number(bridge.dt_batch_read(channel, slot, scratch, BigInt(scratch.byteLength)));
  if (size === 0) throw new Error("the bridge has no batch to describe");
  if (size > scratch.byteLength) {
    scratch = new Uint8Array(size * 2);
    size = Number(bridge.dt_batch_read(channel, slot, scratch, BigInt(scratch.byteLength)));
  }
  try {
    const reader = new Unpacker(scratch.subarray(0, size));
    const requests: DescribedRequest[] = [];
    const count = reader.u32();
    for (let r = 0; r < count; r++) {
      const id = reader.string();
      const cancelled = reader.u32() !== 0;
      const traceId = reader.u64();
      const flags = reader.u32();
      const kind = reader.u32();
      const correlationId = kind === CORRID_UINT
        ? reader.u64()
        : kind === CORRID_STRING
        ? reader.string()
        : 0n;
      const parameters = readParameters(reader);
      const inputs: DescribedTensor[] = [];
      const inputCount = reader.u32();
      for (let i = 0; i < inputCount; i++) inputs.push(readTensor(reader));
      const outputs: string[] = [];
      const outputCount = reader.u32();
      for (let i = 0; i < outputCount; i++) outputs.push(reader.string());
      requests.push({ id, cancelled, traceId, flags, correlationId, parameters, inputs, outputs });
    }
    return requests;
  } catch (error) {
    throw new Error(`its description from the bridge is malformed: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/** Options of {@linkcode consumeInstance}. */
export interface ConsumeOptions {
  /** The bridge library. */
  bridge: BridgeLibrary;
  /** The channel id of the model load. */
  channel: bigint;
  /** The slot (instance index within the load). */
  slot: number;
  /** The instance that runs the batches. */
  instance: ModelInstance;
  /** The model. */
  model: ModelInfo;
  /** Called after a batch failed with a `TritonUnrecoverableError`. */
  onUnrecoverable?: (error: TritonUnrecoverableError) => void;
  /** Where failed sends and failed batches are logged. */
  logger?: Logger;
  /**
   * Aborted when the server gives up on running batches (its exit timeout passed): their
   * requests fail with UNAVAILABLE at once, and the batch is released as soon as that is safe.
   */
  stopping?: AbortSignal;
  /**
   * The stream of a decoupled request, by the number in its {@linkcode STREAM_PARAMETER}: its
   * consumer's room decides when the callable's next step is pulled.
   */
  streamOf?: (token: number) => ResponseStream | undefined;
  /**
   * The signal of the ensemble request a step's request serves, by the number in its
   * {@linkcode ENSEMBLE_SIGNAL_PARAMETER}: its abort cancels the step.
   */
  signalOf?: (token: number) => AbortSignal | undefined;
  /**
   * Called after the calls that complete requests on this thread (sends, the batch's end): the
   * core runs the client's callbacks inside them, and their events are dispatched at once.
   */
  delivered?: () => void;
  /** The trace of a request the core traces, by the core's trace id. */
  traceOf?: (id: bigint) => RequestTrace | undefined;
  /**
   * The CUDA driver of the server's GPUs: inputs in GPU memory become device tensors copied
   * through it, and host results go into CUDA regions through it.
   *
   * @default {"libcuda.so.1"}
   */
  cudaDriverLibrary?: string;
}

const CANCEL_POLL_MS = 20;

// The cancellation checks of the running batches. One interval serves them all and stops at the
// first tick that finds none, so batches do not each start and clear a timer.
// Slots, not a Set: every batch comes and goes (see slot_set.ts).
const watching = new SlotSet<() => unknown>();
let watcher: ReturnType<typeof setInterval> | undefined;

function watch(): void {
  watcher ??= setInterval(() => {
    if (watching.size === 0) {
      clearInterval(watcher);
      watcher = undefined;
      return;
    }
    for (const check of watching.values()) check();
  }, CANCEL_POLL_MS);
}

/**
 * Serves one instance's batches until Triton finalizes the instance or the channel closes.
 *
 * @param options Bridge, channel, slot, instance and model.
 * @returns Resolves when the loop ends.
 */
export async function consumeInstance(options: ConsumeOptions): Promise<void> {
  const { bridge, channel, slot } = options;
  const names = new Map<string, Uint8Array>();
  const nameOf = (name: string): Uint8Array => {
    let encoded = names.get(name);
    if (encoded === undefined) names.set(name, encoded = cString(name));
    return encoded;
  };
  while (true) {
    const count = bridge.dt_take_batch(channel, slot);
    if (count < 0) {
      forgetSlot(channel, slot);
      return;
    }
    if (count === 0) {
      await rung(channel, slot);
      continue;
    }
    // Whatever goes wrong, the batch ends here: Triton's instance thread waits for it.
    let failure: InferenceError | undefined;
    try {
      await runBatch(options, nameOf);
    } catch (error) {
      // A fault of the bridge or of this code, not of the callable: its message says enough.
      failure = error instanceof InferenceError
        ? error
        : InferenceError.internal(messageOf(error), {
          cause: error,
        });
      options.logger?.error(
        `Instance ${slot} of '${options.model.name}' failed a batch: ${failure.message}`,
      );
    }
    if (failure === undefined) {
      bridge.dt_batch_done(channel, slot);
    } else {
      bridge.dt_batch_fail(
        channel,
        slot,
        errorCodeValue(failure.code),
        cString(`Cannot run a batch of model '${options.model.name}': ${failure.message}`),
      );
    }
    options.delivered?.();
  }
}

/** The built-in engine's words for the same. */
function stopped(): InferenceError {
  return InferenceError.unavailable("Server stopped before the request completed");
}

// The works racing each `stopping` signal: one abort listener per signal, not one per batch.
const stopWaiters = new WeakMap<AbortSignal, SlotSet<() => void>>();

/** Settles like `work`, or rejects with {@linkcode stopped} once `signal` aborts. */
function unlessStopped<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return work;
  if (signal.aborted) {
    work.catch(() => {});
    return Promise.reject(stopped());
  }
  let waiters = stopWaiters.get(signal);
  if (waiters === undefined) {
    const all = new SlotSet<() => void>();
    signal.addEventListener("abort", () => {
      for (const waiter of all.values()) waiter();
    }, { once: true });
    stopWaiters.set(signal, waiters = all);
  }
  const pending = waiters;
  return new Promise<T>((resolve, reject) => {
    const onStop = (): void => reject(stopped());
    const at = pending.add(onStop);
    work.then((value) => {
      pending.delete(at, onStop);
      resolve(value);
    }, (error) => {
      pending.delete(at, onStop);
      reject(error);
    });
  });
}

/**
 * Waits until the instance is done with the batch's inputs. When the server gives up first, the
 * main thread's views of foreign memory are detached (the callable then sees empty arrays); a
 * Worker reads the memory through views of its own, so only its end makes the batch safe to
 * release.
 */
async function untilDone(options: ConsumeOptions, views: readonly Uint8Array[]): Promise<void> {
  const { instance, stopping } = options;
  if (instance.idle === undefined) return;
  const idle = instance.idle();
  let done = false;
  void idle.then(() => done = true);
  await unlessStopped(idle, stopping).catch(() => {});
  if (done) return;
  if (instance.isolated) {
    await idle;
    return;
  }
  for (const view of views) {
    const buffer = view.buffer as ArrayBuffer;
    if (!buffer.detached) buffer.transferToFixedLength(0);
  }
}

/** Logs a send the core refused (it owns the response all the same). */
function checkSent(options: ConsumeOptions, status: number, index: number): void {
  if (status === 0) return;
  options.logger?.error(
    `Cannot send a response of model '${options.model.name}' (request ${index} of the batch): ${
      readCString(options.bridge.dt_slot_error(options.channel, options.slot))
    }`,
  );
}

function sendError(
  options: ConsumeOptions,
  index: number,
  code: ErrorCode,
  message: string,
): void {
  const status = options.bridge.dt_send(
    options.channel,
    options.slot,
    index,
    1,
    errorCodeValue(code),
    cString(message),
  );
  checkSent(options, status, index);
}

// `dt_output`'s flags: offer the result's memory as the output's buffer; the result is device
// memory; the tensor is the request's next implicit state. Its answers: the allocator took the result; the caller copies (a GPU buffer or a device
// result); its failure after the allocator took the result (the response still holds it).
const OUTPUT_LEND = 1;
const OUTPUT_DEVICE = 2;
const OUTPUT_STATE = 4;
const OUTPUT_LENT = 1;
const OUTPUT_CALLER_COPIES = 2;
const OUTPUT_FAILED_LENT = -98;
const MEMORY_GPU = 2n;
const NO_BYTES = new Uint8Array(0);

// An output's shape for `dt_output`, read synchronously: one buffer serves every output.
let shapeScratch = new BigInt64Array(8);
// Where `dt_output` puts the buffer it leaves to the caller: address, memory type, device.
const bufferSlot = new BigUint64Array(3);

/**
 * Copies a result into the buffer `dt_output` left to JS (`bufferSlot`): a device tensor device
 * to device into GPU memory or device to host; host bytes host to device.
 */
function copyIntoBuffer(options: ConsumeOptions, result: Tensor, bytes: Uint8Array): void {
  const [address, memoryType, device] = bufferSlot;
  const toGpu = memoryType === MEMORY_GPU;
  if (isDeviceTensor(result)) {
    const memory = CudaMemory.open(result.driverLibrary);
    if (toGpu) {
      memory.copyOnDevice(Number(device), address!, result);
    } else memory.copyToHostAt(result.device, address!, result);
  } else {
    CudaMemory.open(options.cudaDriverLibrary ?? DEFAULT_CUDA_DRIVER).copyToDevice(
      Number(device),
      address!,
      bytes,
    );
  }
}

/**
 * Writes the request's next implicit state (a state output of a model with sequence batching)
 * into the core's own memory; returns false after answering the request with the failure.
 */
function writeState(
  options: ConsumeOptions,
  nameOf: (name: string) => Uint8Array,
  index: number,
  name: string,
  array: NDArray,
): boolean {
  const { bridge, channel, slot } = options;
  const bytes = toRawBytes(array);
  const dims = array.shape.length;
  if (dims > shapeScratch.length) shapeScratch = new BigInt64Array(dims);
  for (let d = 0; d < dims; d++) shapeScratch[d] = BigInt(array.shape[d]!);
  const status = bridge.dt_output(
    channel,
    slot,
    index,
    nameOf(name),
    tritonDataType(array.dtype),
    shapeScratch,
    dims,
    bytes,
    BigInt(bytes.byteLength),
    OUTPUT_STATE,
    0n,
    -1,
    bufferSlot,
  );
  if (status < 0) {
    const message = readCString(bridge.dt_slot_error(channel, slot));
    const code = status >= -7 ? errorCodeName(-status) : "INTERNAL";
    sendError(options, index, code, message);
    return false;
  }
  return true;
}

/** Writes one request's outputs (and implicit states) and sends the response. */
function sendResult(
  options: ConsumeOptions,
  nameOf: (name: string) => Uint8Array,
  index: number,
  requested: readonly string[],
  result: InferResult<AnyTensors>,
  final: boolean,
): void {
  const { bridge, channel, slot } = options;
  for (const state of options.model.config.sequenceBatching?.states ?? []) {
    const array: Tensor | undefined = result[state.outputName];
    if (array === undefined) continue;
    if (isDeviceTensor(array)) {
      sendError(
        options,
        index,
        "INVALID_ARG",
        `Cannot write state '${state.outputName}': an implicit state must be in host memory`,
      );
      return;
    }
    if (!writeState(options, nameOf, index, state.outputName, array)) return;
  }
  for (const name of requested) {
    const array: Tensor | undefined = result[name];
    if (array === undefined) continue;
    const device = isDeviceTensor(array);
    const bytes = device ? NO_BYTES : toRawBytes(array as NDArray);
    const dims = array.shape.length;
    if (dims > shapeScratch.length) shapeScratch = new BigInt64Array(dims);
    for (let d = 0; d < dims; d++) shapeScratch[d] = BigInt(array.shape[d]!);
    // The bridge copies host bytes into the buffer the client's allocator hands out, or, for a
    // large result in JavaScript's own memory, the allocator takes the bytes themselves: they
    // stay lent until the response is deleted (request.ts gives them back). A device result, or
    // a buffer in GPU memory, is copied here through the CUDA driver.
    const lending = !device && lendable(bytes);
    const address = lending ? lend(bytes) : 0n;
    const status = bridge.dt_output(
      channel,
      slot,
      index,
      nameOf(name),
      tritonDataType(array.dtype),
      shapeScratch,
      dims,
      bytes,
      BigInt(device ? array.byteSize : bytes.byteLength),
      device ? OUTPUT_DEVICE : lending ? OUTPUT_LEND : 0,
      device ? array.pointer : 0n,
      device ? array.device : -1,
      bufferSlot,
    );
    if (lending && status !== OUTPUT_LENT && status !== OUTPUT_FAILED_LENT) returnLent(address);
    if (status < 0) {
      const message = readCString(bridge.dt_slot_error(channel, slot));
      const code = status >= -7 ? errorCodeName(-status) : "INTERNAL";
      sendError(options, index, code, message);
      return;
    }
    if (status === OUTPUT_CALLER_COPIES) {
      try {
        copyIntoBuffer(options, array, bytes);
      } catch (error) {
        const failure = deviceMemoryError(`Cannot write output '${name}'`, error);
        sendError(options, index, failure.code, failure.message);
        return;
      }
    }
  }
  checkSent(options, bridge.dt_send(channel, slot, index, final ? 1 : 0, -1, null), index);
}

/** The sequence of a request of a model with sequence batching, as the core handed it over. */
function sequenceOfRequest(entry: DescribedRequest): Sequence {
  const id = entry.correlationId;
  return {
    id,
    start: (entry.flags & SEQUENCE_START) !== 0,
    end: (entry.flags & SEQUENCE_END) !== 0,
    // Every request the core accepts for such a model has an ID; only its padding has none.
    ready: id !== 0n && id !== "",
    state: undefined,
  };
}

/**
 * The byte size of a string CORRID control: Triton 2.51 gives it 4 + 128 bytes whatever the ID's
 * length (the rest is not written), so only the element itself is read.
 */
function stringControlSize(address: bigint, size: number): number {
  if (size < 4) return size;
  // Little-endian, as the host is.
  const length = new Deno.UnsafePointerView(Deno.UnsafePointer.create(address)!).getUint32(0);
  return Math.min(size, 4 + length);
}

async function runBatch(
  options: ConsumeOptions,
  nameOf: (name: string) => Uint8Array,
): Promise<void> {
  const { bridge, channel, slot, instance, model, stopping } = options;
  const described = readBatch(bridge, channel, slot);
  const requests: InferRequest<AnyTensors>[] = [];
  const controllers: AbortController[] = [];
  const indices: number[] = [];
  // The streams of decoupled requests, whose consumers' room paces the callable.
  const streams: ResponseStream[] = [];
  // Addresses too, so instances in Workers can read the inputs in place (only they need them).
  const native: Record<string, NativeTensorLocation>[] | undefined = instance.isolated
    ? []
    : undefined;
  // Every view of foreign memory (the core's, a shared-memory mapping), to revoke if the server
  // gives up on the batch.
  const views: Uint8Array[] = [];
  const sequencing = model.config.sequenceBatching;
  const stringId = sequencing?.correlationId?.dtype === "bytes"
    ? sequencing.correlationId.name
    : undefined;
  described.forEach((entry, index) => {
    try {
      let sequence: Sequence | undefined;
      if (sequencing !== undefined) {
        sequence = sequenceOfRequest(entry);
        // A sequence this instance lost (its Worker crashed) or let go (idle timeout) fails
        // alone, with the reason; the core still routes it here.
        const refused = sequence.ready ? instance.sequenceError?.(sequence) : undefined;
        if (refused !== undefined) throw refused;
      }
      const data: AnyTensors = {};
      const locations: Record<string, NativeTensorLocation> = {};
      for (const input of entry.inputs) {
        if (input.gpu === 2) {
          throw new Error(`Input '${input.name}' arrived in several chunks of GPU memory`);
        }
        if (input.gpu === 1) {
          // A client's CUDA region, held by the front end until the response is sent.
          data[input.name] = new DeviceTensor({
            dtype: dtypeOfTriton(input.datatype),
            shape: input.shape,
            pointer: input.address,
            device: input.device,
            driverLibrary: options.cudaDriverLibrary ?? DEFAULT_CUDA_DRIVER,
          });
          continue;
        }
        if (input.name === stringId && sequence?.ready === false) {
          // Padding: the core writes no ID into a string control then (its bytes are unset).
          data[input.name] = { dtype: "bytes", shape: input.shape, data: [new Uint8Array(0)] };
          continue;
        }
        const size = input.name === stringId
          ? stringControlSize(input.address, input.size)
          : input.size;
        const view = viewAt(input.address, size);
        // Only foreign memory (the core's, a shared-memory mapping) can go away under a callable
        // the server gave up on. JavaScript's own bytes lent to the core (a request's input, a
        // shared chunk of small tensors) stay: detaching them would free memory that the caller,
        // other requests and the core may still hold.
        if (isForeign(view.buffer)) views.push(view);
        data[input.name] = tensorInPlace(dtypeOfTriton(input.datatype), input.shape, view);
        if (native !== undefined) {
          locations[input.name] = { address: input.address, byteLength: size };
        }
      }
      // The core counts the inputs of a model with optional ones, but not which came.
      refuseMissingInputs(model, (name) => data[name] !== undefined);
      const controller = new AbortController();
      if (entry.cancelled) controller.abort();
      const {
        [STREAM_PARAMETER]: token,
        [PARENT_PARAMETER]: link,
        [ENSEMBLE_SIGNAL_PARAMETER]: outer,
        ...parameters
      } = entry.parameters;
      const ensembleSignal = typeof outer === "number" ? options.signalOf?.(outer) : undefined;
      if (ensembleSignal !== undefined) {
        // The core cancels no running step when its ensemble's request is cancelled: this does.
        const cancel = (): void =>
          controller.abort(
            InferenceError.cancelled(`Request for model '${model.name}' was cancelled`),
          );
        if (ensembleSignal.aborted) cancel();
        else ensembleSignal.addEventListener("abort", cancel, { once: true });
      }
      const stream = typeof token === "number" ? options.streamOf?.(token) : undefined;
      if (stream !== undefined) streams.push(stream);
      const parent = decodeParent(link);
      requests.push({
        data,
        parameters,
        requestedOutputNames: entry.outputs,
        signal: controller.signal,
        ...(parent === undefined ? {} : { parent }),
        ...(sequence === undefined ? {} : { sequence }),
      });
      native?.push(locations);
      controllers.push(controller);
      indices.push(index);
    } catch (error) {
      const failure = toInferenceError(error, "INVALID_ARG");
      sendError(options, index, failure.code, failure.message);
    }
  });
  if (requests.length === 0) return;
  // The core marks a request cancelled when its client goes away: polled while the callable
  // runs, so it sees request.signal abort (and a stream is not pulled any further).
  const allCancelled = (): boolean => {
    let live = 0;
    indices.forEach((index, i) => {
      const controller = controllers[i]!;
      if (!controller.signal.aborted && bridge.dt_request_cancelled(channel, slot, index) === 1) {
        controller.abort(
          InferenceError.cancelled(`Request for model '${model.name}' was cancelled`),
        );
      }
      if (!controller.signal.aborted) live++;
    });
    return live === 0;
  };
  const watched = watching.add(allCancelled);
  watch();
  // The core times the batch itself (COMPUTE_* come from the statistics the bridge reports); the
  // traces learn where it ran, and the callable runs in the first traced request's compute span
  // (mode opentelemetry), so its own spans are that span's children.
  let span: Context | undefined;
  if (options.traceOf !== undefined) {
    const batchSize = indices.reduce(
      (sum, index) => sum + batchSizeOf(described[index]!, model),
      0,
    );
    for (const index of indices) {
      const id = described[index]!.traceId;
      const trace = id === 0n ? undefined : options.traceOf(id);
      if (trace === undefined) continue;
      trace.computedOn({ instance: instance.index, device: instance.device, batchSize });
      span ??= trace.callableContext();
    }
  }
  try {
    if (model.config.decoupled) {
      const steps = runInContext(span, () => instance.stream(requests, native))[
        Symbol.asyncIterator
      ]();
      let finished = false;
      try {
        while (true) {
          const step = await unlessStopped(runInContext(span, () => steps.next()), stopping);
          if (step.done) {
            finished = true;
            break;
          }
          step.value.forEach((result, i) =>
            sendResult(
              options,
              nameOf,
              indices[i]!,
              requests[i]!.requestedOutputNames,
              result,
              false,
            )
          );
          // Counted as on their way before they are taken, so their arrival frees the room.
          for (const stream of streams) stream.sent();
          options.delivered?.();
          if (allCancelled()) break;
          // The next step waits until every consumer of this batch has room for it.
          const rooms = streams.flatMap((stream) => stream.room() ?? []);
          if (rooms.length > 0) {
            await unlessStopped(Promise.all(rooms), stopping);
            // Cancellations that came while it waited.
            if (allCancelled()) break;
          }
        }
      } finally {
        // Stopped reading early (every request cancelled): the instance ends the stream, and
        // its inputs stay valid until it has.
        if (!finished && !stopping?.aborted) await unlessStopped(steps.return!(), stopping);
      }
      // The flags-only final closes every stream.
      for (const index of indices) {
        checkSent(options, bridge.dt_send(channel, slot, index, 1, -1, null), index);
      }
    } else {
      const results = await unlessStopped(
        runInContext(span, () => instance.execute(requests, native)),
        stopping,
      );
      results.forEach((result, i) =>
        sendResult(options, nameOf, indices[i]!, requests[i]!.requestedOutputNames, result, true)
      );
    }
  } catch (error) {
    const failure = toInferenceError(error);
    indices.forEach((index, i) => {
      // The core names the ensemble of a failing step ("in ensemble 'E', ..."); this names the
      // step's model, as the built-in engine's ensembles do.
      const message = requests[i]!.parent?.ensemble
        ? `model '${model.name}' failed: ${failure.message}`
        : failure.message;
      sendError(options, index, failure.code, message);
    });
    if (error instanceof TritonUnrecoverableError) options.onUnrecoverable?.(error);
  } finally {
    watching.delete(watched, allCancelled);
  }
  await untilDone(options, views);
}

// A request's batch size: its first input's first dimension for a batching model, else 1.
function batchSizeOf(request: DescribedRequest, model: ModelInfo): number {
  if (model.config.maxBatchSize === 0) return 1;
  return Number(request.inputs[0]?.shape[0] ?? 1);
}
