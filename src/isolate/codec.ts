/**
 * How tensors and errors cross isolates, for the Worker instances (`instances/worker_protocol.ts`)
 * and the HTTP threads (`frontend/http/thread_protocol.ts`) alike: numeric buffers are moved
 * (transferred) or shared instead of structured-clone copied, BYTES tensors travel as one packed
 * buffer of length-prefixed elements, tensors in the Triton core's memory travel as raw addresses
 * the receiver views in place, device tensors travel as their handle (pointer, device, driver:
 * the memory stays where it is), and an error keeps its class and Triton code.
 *
 * @module
 */

import {
  type ErrorCode,
  InferenceError,
  TritonError,
  TritonUnrecoverableError,
  TritonValidationError,
} from "../errors.ts";
import type { DType } from "../tensor/dtype.ts";
import { serializeBytes } from "../tensor/bytes_codec.ts";
import { foreignBuffer, isForeign, markForeign } from "../tensor/foreign_memory.ts";
import { isSharedChunk } from "../tensor/small_tensors.ts";
import { fromRawBytes, type NDArray } from "../tensor/ndarray.ts";
import { DeviceTensor } from "../tensor/device_tensor.ts";

/** A tensor on the wire: in a buffer (moved or shared), at a native address, or on a GPU. */
export type WireTensor =
  | {
    readonly dtype: DType;
    readonly shape: readonly number[];
    readonly buffer: ArrayBufferLike;
    readonly byteOffset: number;
    readonly byteLength: number;
    /** The buffer is over foreign memory (see `foreign_memory.ts`): the receiver marks it so. */
    readonly foreign?: true;
  }
  | {
    readonly dtype: DType;
    readonly shape: readonly number[];
    readonly address: bigint;
    readonly byteLength: number;
  }
  | {
    readonly dtype: DType;
    readonly shape: readonly number[];
    /** A `DeviceTensor`'s handle: its memory is not copied. */
    readonly device: {
      readonly pointer: bigint;
      readonly ordinal: number;
      readonly driver: string;
    };
  };

/** An error on the wire. */
export interface WireError {
  /** The error class name. */
  readonly name: string;
  /** The message. */
  readonly message: string;
  /** Triton's code, for `InferenceError`s. */
  readonly code?: ErrorCode;
}

/** Bytes the packing of one message copied and moved. */
export interface WireCounts {
  /** Bytes copied into a fresh buffer (misaligned/shared-buffer views, BYTES packing). */
  copied: number;
  /** Bytes moved by transfer or shared through a `SharedArrayBuffer` (no copy). */
  moved: number;
  /** Bytes passed as native addresses (read in place). */
  native: number;
}

/** What packing one message collects: the buffers to transfer, and the bytes copied and moved. */
export interface WirePacking {
  /** Collects the buffers to transfer. */
  readonly transfer: Transferable[];
  /** Accumulates copied and moved bytes. */
  readonly counts: WireCounts;
}

/** Options of {@linkcode toWireTensor}. */
export interface ToWireOptions {
  /**
   * A view into a larger buffer moves that whole buffer (keeping its offset) instead of being
   * copied: for a sender that gives the buffer up, such as a request body it has decoded.
   *
   * @default {false}
   */
  moveViews?: boolean;
}

/** Fresh zero counts. */
export function zeroCounts(): WireCounts {
  return { copied: 0, moved: 0, native: 0 };
}

/**
 * Packs a tensor for `postMessage`: a buffer the view spans alone is moved, a shared buffer is
 * shared, anything else (a view into a larger buffer, BYTES elements) is copied once into a fresh
 * buffer that is moved. Every buffer it returns is either in `transfer` or shared, so the message
 * never structured-clones tensor data.
 *
 * @param array The tensor.
 * @param packing The message's transfer list and byte counts, which this adds to.
 * @param options Whether a view into a larger buffer moves that whole buffer.
 * @returns The wire tensor.
 *
 * @example A whole buffer moves
 * ```ts
 * import { toWireTensor, zeroCounts } from "./codec.ts";
 * import { ndarray } from "../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const transfer: Transferable[] = [];
 * const counts = zeroCounts();
 * toWireTensor(ndarray(new Float32Array(4)), { transfer, counts });
 * toWireTensor(ndarray(new Float32Array(8).subarray(2, 4)), { transfer, counts });
 * assert.deepEqual(counts, { copied: 8, moved: 16, native: 0 });
 * assert.equal(transfer.length, 2);
 * ```
 */
export function toWireTensor(
  array: NDArray,
  packing: WirePacking,
  options: ToWireOptions = {},
): WireTensor {
  const { transfer, counts } = packing;
  const { dtype, shape } = array;
  if (array.dtype === "bytes") {
    const packed = serializeBytes(array.data);
    counts.copied += packed.byteLength;
    transfer.push(packed.buffer as ArrayBuffer);
    return { dtype, shape, buffer: packed.buffer, byteOffset: 0, byteLength: packed.byteLength };
  }
  const data = array.data;
  const buffer = data.buffer;
  if (typeof SharedArrayBuffer !== "undefined" && buffer instanceof SharedArrayBuffer) {
    counts.moved += data.byteLength;
    return { dtype, shape, buffer, byteOffset: data.byteOffset, byteLength: data.byteLength };
  }
  // A shared chunk holds other tensors too: moving it would detach them.
  const movable = !(buffer as ArrayBuffer).resizable && !(buffer as ArrayBuffer).detached &&
    !isSharedChunk(buffer);
  const whole = data.byteOffset === 0 && data.byteLength === buffer.byteLength;
  if (movable && (whole || options.moveViews)) {
    // The same buffer may back two tensors of one message; transfer it once.
    if (!transfer.includes(buffer as ArrayBuffer)) transfer.push(buffer as ArrayBuffer);
    counts.moved += data.byteLength;
    const wire = { dtype, shape, buffer, byteOffset: data.byteOffset, byteLength: data.byteLength };
    return isForeign(buffer) ? { ...wire, foreign: true } : wire;
  }
  const copy = new Uint8Array(data.byteLength);
  copy.set(new Uint8Array(buffer, data.byteOffset, data.byteLength));
  counts.copied += data.byteLength;
  transfer.push(copy.buffer);
  return { dtype, shape, buffer: copy.buffer, byteOffset: 0, byteLength: data.byteLength };
}

/**
 * A wire tensor for data in the Triton core's memory: only its address travels.
 *
 * @param array The tensor (a view of that memory).
 * @param location Its address and byte count (an instance's `NativeTensorLocation`).
 * @param counts Accumulates the bytes passed by address.
 * @returns The wire tensor.
 */
export function toNativeWireTensor(
  array: NDArray,
  location: { readonly address: bigint; readonly byteLength: number },
  counts: WireCounts,
): WireTensor {
  counts.native += location.byteLength;
  return {
    dtype: array.dtype,
    shape: array.shape,
    address: location.address,
    byteLength: location.byteLength,
  };
}

/**
 * A device tensor on the wire: its handle alone (the GPU memory is not touched).
 *
 * @param tensor The device tensor.
 * @returns The wire tensor.
 *
 * @example The handle crosses, not the memory
 * ```ts
 * import { fromWireTensor, toWireDeviceTensor } from "./codec.ts";
 * import { DeviceTensor } from "../tensor/device_tensor.ts";
 * import assert from "node:assert/strict";
 *
 * const x = new DeviceTensor({ dtype: "float32", shape: [2], pointer: 256n, device: 1 });
 * const back = fromWireTensor(structuredClone(toWireDeviceTensor(x)));
 * assert.ok(back instanceof DeviceTensor);
 * assert.deepEqual([back.pointer, back.device, back.byteSize], [256n, 1, 8]);
 * ```
 */
export function toWireDeviceTensor(tensor: DeviceTensor): WireTensor {
  return {
    dtype: tensor.dtype,
    shape: tensor.shape,
    device: { pointer: tensor.pointer, ordinal: tensor.device, driver: tensor.driverLibrary },
  };
}

/**
 * Rebuilds a tensor from the wire, in place: a view of the received buffer, of native memory at
 * the given address (needs `--allow-ffi`), or a device tensor over the same GPU memory.
 *
 * @param wire The wire tensor.
 * @returns The tensor.
 *
 * @example View a received int16 buffer
 * ```ts
 * import { fromWireTensor } from "./codec.ts";
 * import { hostTensor } from "../tensor/device_tensor.ts";
 * import assert from "node:assert/strict";
 *
 * const buffer = new Int16Array([1, 2]).buffer;
 * const t = fromWireTensor({ dtype: "int16", shape: [2], buffer, byteOffset: 0, byteLength: 4 });
 * assert.deepEqual([...(hostTensor(t, "t").data as Int16Array)], [1, 2]);
 * ```
 */
export function fromWireTensor(wire: WireTensor): NDArray | DeviceTensor {
  if ("device" in wire) {
    const { pointer, ordinal, driver } = wire.device;
    return new DeviceTensor({
      dtype: wire.dtype,
      shape: wire.shape,
      pointer,
      device: ordinal,
      driverLibrary: driver,
    });
  }
  if ("address" in wire) {
    const bytes = wire.byteLength === 0 || wire.address === 0n
      ? new Uint8Array(0)
      : new Uint8Array(foreignBuffer(Deno.UnsafePointer.create(wire.address)!, wire.byteLength));
    return fromRawBytes(wire.dtype, wire.shape, bytes);
  }
  if (wire.foreign) markForeign(wire.buffer);
  return fromRawBytes(
    wire.dtype,
    wire.shape,
    new Uint8Array(wire.buffer, wire.byteOffset, wire.byteLength),
  );
}

/**
 * An error as it crosses isolates.
 *
 * @param error Anything thrown.
 * @returns Its name, message and Triton code.
 */
export function toWireError(error: unknown): WireError {
  if (error instanceof InferenceError) {
    return { name: error.name, message: error.message, code: error.code };
  }
  if (error instanceof Error) return { name: error.name, message: error.message };
  return { name: "Error", message: String(error) };
}

/**
 * Rebuilds an error from the wire: an `InferenceError` keeps its code, a
 * `TritonUnrecoverableError` stays one (it stops the server), others become plain errors with
 * their name.
 *
 * @param wire The wire error.
 * @returns The error.
 */
export function fromWireError(wire: WireError): Error {
  if (wire.code !== undefined) return new InferenceError(wire.message, { code: wire.code });
  if (wire.name === "TritonUnrecoverableError") return new TritonUnrecoverableError(wire.message);
  // Its class decides the request's status (toInferenceError): INVALID_ARG, not INTERNAL.
  if (wire.name === "TritonValidationError") return new TritonValidationError(wire.message);
  const error = wire.name.startsWith("Triton")
    ? new TritonError(wire.message)
    : new Error(wire.message);
  error.name = wire.name;
  return error;
}
