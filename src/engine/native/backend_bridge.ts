/**
 * The JavaScript half of the forwarding backend. For each model instance a consumer loop waits
 * (nonblocking FFI) for the batch Triton's instance thread parked in the C backend, reads the
 * inputs in place, runs the {@linkcode ModelInstance}, writes outputs straight into the buffers
 * the client's allocator hands out, sends the responses and tells the C side the batch is done,
 * which reports statistics, releases the requests and lets `ModelInstanceExecute` return.
 *
 * Input tensors are views of the core's request memory: they are valid only while the callable
 * runs (until its batch is done).
 *
 * @module
 */

import type { InferRequest, InferResult, ModelInfo } from "../../callable/types.ts";
import {
  type ErrorCode,
  InferenceError,
  toInferenceError,
  TritonUnrecoverableError,
} from "../../errors.ts";
import type { ModelInstance, NativeTensorLocation } from "../../instances/instance.ts";
import { type NDArray, toRawBytes } from "../../tensor/ndarray.ts";
import type { BridgeLibrary } from "./ffi.ts";
import { type DescribedParameter, type DescribedTensor, parameterValues } from "./response.ts";
import { cString, errorCodeName, errorCodeValue, readCString } from "./status.ts";
import { dtypeOfTriton, tensorInPlace, tritonDataType, viewAt } from "./tensors.ts";

interface DescribedRequest {
  id: string;
  cancelled: boolean;
  parameters: Record<string, DescribedParameter | null>;
  inputs: DescribedTensor[];
  outputs: string[];
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
}

const WAIT_MS = 1000;
const CANCEL_POLL_MS = 20;

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
    const count = await bridge.dt_next_batch(channel, slot, WAIT_MS);
    if (count < 0) return;
    if (count === 0) continue;
    try {
      await runBatch(options, nameOf);
    } finally {
      bridge.dt_batch_done(channel, slot);
    }
  }
}

function sendError(
  options: ConsumeOptions,
  index: number,
  code: ErrorCode,
  message: string,
): void {
  options.bridge.dt_send(
    options.channel,
    options.slot,
    index,
    1,
    errorCodeValue(code),
    cString(message),
  );
}

/** Writes one request's outputs into the response buffers and sends the response. */
function sendResult(
  options: ConsumeOptions,
  nameOf: (name: string) => Uint8Array,
  index: number,
  requested: readonly string[],
  result: InferResult,
  final: boolean,
): void {
  const { bridge, channel, slot } = options;
  const out = new BigUint64Array(1);
  for (const name of requested) {
    const array: NDArray | undefined = result[name];
    if (array === undefined) continue;
    const bytes = toRawBytes(array);
    const shape = new BigInt64Array(array.shape.map((d) => BigInt(d)));
    const status = bridge.dt_output(
      channel,
      slot,
      index,
      nameOf(name),
      tritonDataType(array.dtype),
      shape,
      array.shape.length,
      BigInt(bytes.byteLength),
      out,
    );
    if (status !== 0) {
      const message = readCString(bridge.dt_slot_error(channel, slot));
      const code = status < 0 && status >= -7 ? errorCodeName(-status) : "INTERNAL";
      sendError(options, index, code, message);
      return;
    }
    if (bytes.byteLength > 0) viewAt(Number(out[0]), bytes.byteLength).set(bytes);
  }
  bridge.dt_send(channel, slot, index, final ? 1 : 0, -1, null);
}

async function runBatch(
  options: ConsumeOptions,
  nameOf: (name: string) => Uint8Array,
): Promise<void> {
  const { bridge, channel, slot, instance, model } = options;
  const described: DescribedRequest[] = JSON.parse(
    readCString(bridge.dt_batch_describe(channel, slot)),
  );
  const requests: InferRequest[] = [];
  const controllers: AbortController[] = [];
  const indices: number[] = [];
  // Addresses too, so instances in Workers can read the inputs in place.
  const native: Record<string, NativeTensorLocation>[] = [];
  described.forEach((entry, index) => {
    try {
      const data: Record<string, NDArray> = {};
      const locations: Record<string, NativeTensorLocation> = {};
      for (const input of entry.inputs) {
        if (input.gpu) throw new Error(`Input '${input.name}' is in GPU memory`);
        data[input.name] = tensorInPlace(
          dtypeOfTriton(input.datatype),
          input.shape,
          viewAt(input.ptr, input.size),
        );
        locations[input.name] = { address: BigInt(input.ptr), byteLength: input.size };
      }
      const controller = new AbortController();
      if (entry.cancelled) controller.abort();
      requests.push({
        data,
        parameters: parameterValues(entry.parameters),
        requestedOutputNames: entry.outputs,
        signal: controller.signal,
      });
      native.push(locations);
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
  const isCancelled = bridge.dt_request_cancelled;
  const allCancelled = (): boolean => {
    let live = 0;
    indices.forEach((index, i) => {
      const controller = controllers[i]!;
      if (!controller.signal.aborted && isCancelled?.(channel, slot, index) === 1) {
        controller.abort(
          new InferenceError(`Request for model '${model.name}' was cancelled`, {
            code: "CANCELLED",
          }),
        );
      }
      if (!controller.signal.aborted) live++;
    });
    return live === 0;
  };
  const poll = isCancelled === null ? undefined : setInterval(allCancelled, CANCEL_POLL_MS);
  try {
    if (model.config.decoupled) {
      for await (const step of instance.stream(requests, native)) {
        step.forEach((result, i) =>
          sendResult(
            options,
            nameOf,
            indices[i]!,
            requests[i]!.requestedOutputNames,
            result,
            false,
          )
        );
        if (allCancelled()) break;
      }
      // The flags-only final closes every stream.
      for (const index of indices) bridge.dt_send(channel, slot, index, 1, -1, null);
    } else {
      const results = await instance.execute(requests, native);
      results.forEach((result, i) =>
        sendResult(options, nameOf, indices[i]!, requests[i]!.requestedOutputNames, result, true)
      );
    }
  } catch (error) {
    const failure = toInferenceError(error);
    for (const index of indices) sendError(options, index, failure.code, failure.message);
    if (error instanceof TritonUnrecoverableError) options.onUnrecoverable?.(error);
  } finally {
    clearInterval(poll);
  }
}
