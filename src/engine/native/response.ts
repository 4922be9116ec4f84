/**
 * Reading a `TRITONSERVER_InferenceResponse` into a protocol-neutral
 * {@linkcode InferenceResponse}: the C bridge describes it into a reused buffer in a packed
 * layout (error, model, version, id, parameters, outputs with addresses; `dt_response_read`),
 * and the outputs are copied out before the response is deleted, except those the core wrote
 * into the request's own output buffers (shared-memory regions), which are viewed there (a CUDA
 * region's as a device tensor over it).
 *
 * @module
 */

import type { ParameterValue } from "../../callable/types.ts";
import { InferenceError } from "../../errors.ts";
import { type DeviceBuffer, DeviceTensor, type Tensor } from "../../tensor/device_tensor.ts";
import type { InferenceResponse } from "../engine.ts";
import type { BridgeLibrary } from "../../native/ffi.ts";
import { Unpacker } from "./packer.ts";
import { errorCodeName } from "./status.ts";
import {
  addressOf,
  dtypeOfTriton,
  LEND_FROM_BYTES,
  lentAt,
  tensorCopy,
  tensorInPlace,
} from "./tensors.ts";

/** A tensor as the bridge describes it. */
export interface DescribedTensor {
  /** Tensor name. */
  name: string;
  /** `TRITONSERVER_DataType` value. */
  datatype: number;
  /** Dimensions. */
  shape: number[];
  /** Address of the data. */
  address: bigint;
  /** Byte size of the data. */
  size: number;
  /**
   * Whether the data is in GPU memory: 0 no, 1 yes (on device `device`), 2 in several GPU chunks
   * (an input the backend does not join).
   */
  gpu: number;
  /** The GPU the data is on (when `gpu` is 1). */
  device: number;
}

/**
 * Reads typed parameters from a packed description: a count, then name and value pairs. Kinds
 * JavaScript does not read (BYTES) are skipped.
 *
 * @param reader The description, at the parameter count.
 * @returns Strings, numbers and booleans by name.
 *
 * @example Read one integer parameter
 * ```ts
 * import { Unpacker } from "./packer.ts";
 * import { readParameters } from "./response.ts";
 * import assert from "node:assert/strict";
 *
 * // One parameter: "a" = int 3.
 * const bytes = new Uint8Array([1, 0, 0, 0, 1, 0, 0, 0, 97, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0]);
 * assert.deepEqual(readParameters(new Unpacker(bytes)), { a: 3 });
 * ```
 */
export function readParameters(reader: Unpacker): Record<string, ParameterValue> {
  const values: Record<string, ParameterValue> = {};
  const count = reader.u32();
  for (let i = 0; i < count; i++) {
    const name = reader.string();
    const value = reader.parameter();
    if (value !== undefined) values[name] = value;
  }
  return values;
}

/**
 * Reads a tensor from a packed description: name, datatype, GPU flag and device, shape, address
 * and size.
 *
 * @param reader The description, at the tensor.
 * @returns The tensor.
 */
export function readTensor(reader: Unpacker): DescribedTensor {
  const name = reader.string();
  const datatype = reader.u32();
  const gpu = reader.u32();
  const device = reader.i64();
  const dims = reader.u32();
  const shape: number[] = [];
  for (let d = 0; d < dims; d++) shape.push(reader.i64());
  const address = reader.u64();
  const size = Number(reader.u64());
  return { name, datatype, shape, address, size, gpu, device };
}

/** How {@linkcode readResponse} lays a response's outputs out. */
export interface ResponseLayout {
  /** Output names in the model's declared order (the response follows it). */
  readonly order: readonly string[];
  /**
   * The request's output buffers (`InferenceRequest.outputBuffers`): an output the core wrote
   * there is answered as a view of them, not copied.
   *
   * @default {undefined}
   */
  readonly bound?: ReadonlyMap<string, Uint8Array | DeviceBuffer> | undefined;
}

// Reused for every response: descriptions are read synchronously, one at a time.
let scratch = new Uint8Array(4096);

/**
 * Reads a response: throws its error, or copies its outputs out.
 *
 * @param bridge The bridge library.
 * @param response The response (still owned by the caller, who deletes it afterwards).
 * @param layout The output order, and the buffers the request bound its outputs to.
 * @returns The response.
 * @throws {InferenceError} The response's error, with the core's code.
 */
export function readResponse(
  bridge: BridgeLibrary,
  response: Deno.PointerValue,
  layout: ResponseLayout,
): InferenceResponse {
  const { order, bound } = layout;
  let size = Number(bridge.dt_response_read(response, scratch, BigInt(scratch.byteLength)));
  if (size > scratch.byteLength) {
    scratch = new Uint8Array(size * 2);
    size = Number(bridge.dt_response_read(response, scratch, BigInt(scratch.byteLength)));
  }
  const reader = new Unpacker(scratch.subarray(0, size));
  const code = reader.i32();
  const message = reader.string();
  if (code >= 0) throw new InferenceError(message, { code: errorCodeName(code) });
  const model = reader.string();
  const version = reader.i64();
  const id = reader.string();
  const parameters = readParameters(reader);
  const byName = new Map<string, Tensor>();
  const count = reader.u32();
  for (let i = 0; i < count; i++) {
    const output = readTensor(reader);
    const dtype = dtypeOfTriton(output.datatype);
    const target = bound?.get(output.name);
    if (output.gpu !== 0) {
      // Only a client's CUDA region is GPU memory the allocator hands out.
      if (
        target === undefined || target instanceof Uint8Array || target.pointer !== output.address ||
        dtype === "bytes"
      ) {
        throw InferenceError.internal(
          `Cannot read output '${output.name}': it is in GPU memory outside its CUDA region`,
        );
      }
      byName.set(
        output.name,
        new DeviceTensor({
          dtype,
          shape: output.shape,
          pointer: target.pointer,
          device: target.device,
          driverLibrary: target.driverLibrary,
        }),
      );
      continue;
    }
    const buffer = target instanceof Uint8Array ? target : undefined;
    // In place: a shared-memory region the core wrote into, or a result the backend lent the
    // response (JavaScript's own memory, given back when the response is deleted).
    const inPlace = buffer !== undefined && output.size <= buffer.byteLength &&
        (output.size === 0 || addressOf(buffer) === output.address)
      ? buffer.subarray(0, output.size)
      : output.size >= LEND_FROM_BYTES
      ? lentAt(output.address, output.size)
      : undefined;
    byName.set(
      output.name,
      inPlace !== undefined
        ? tensorInPlace(dtype, output.shape, inPlace)
        : tensorCopy(dtype, output.shape, output),
    );
  }
  const outputs = new Map<string, Tensor>();
  for (const name of order) {
    const array = byName.get(name);
    if (array !== undefined) outputs.set(name, array);
  }
  for (const [name, array] of byName) if (!outputs.has(name)) outputs.set(name, array);
  return {
    modelName: model,
    modelVersion: String(version),
    ...(id === "" ? {} : { id }),
    outputs,
    ...(Object.keys(parameters).length === 0 ? {} : { parameters }),
  };
}
