/**
 * `DeviceTensor`: a tensor in GPU memory, as a typed handle (device pointer, dtype, shape, device,
 * byte size) that FFI code hands to cuBLAS or a kernel launched through the driver API, with no
 * host copy. An input in a client's CUDA shared-memory region reaches a callable on that GPU as
 * one (when its spec says `deviceTensor: true`), and a callable may return one for such an output.
 * {@linkcode DeviceTensor.toHost} is the explicit copy to host memory; nothing copies implicitly.
 *
 * @module
 */

import { CudaMemory, deviceMemoryError } from "../native/cuda_memory.ts";
import { type DTypeOf, elementSize, type NumericDType } from "./dtype.ts";
import {
  fromRawBytes,
  type NDArray,
  type NumericNDArray,
  shapeSize,
  toRawBytes,
} from "./ndarray.ts";
import type { DTypeLike } from "./dtype.ts";
import { toDType } from "./dtype.ts";
import { InferenceError, TritonValidationError } from "../errors.ts";

/** The CUDA driver a device tensor's copies go through unless it names another. */
export const DEFAULT_CUDA_DRIVER = "libcuda.so.1";

/** Raw bytes in GPU memory: where an output goes (a client's CUDA region), or a tensor's bytes. */
export interface DeviceBuffer {
  /** The device pointer (a `CUdeviceptr`). */
  readonly pointer: bigint;
  /** How many bytes. */
  readonly byteSize: number;
  /** The CUDA device ordinal: N of `cuda:N`. */
  readonly device: number;
  /** The CUDA driver library that copies it (the one that mapped or allocated it). */
  readonly driverLibrary: string;
}

/** What {@linkcode DeviceTensor}'s constructor takes. */
export interface DeviceTensorInit<D extends NumericDType = NumericDType> {
  /** The element type, in any spelling `toDType` accepts (`"float32"`, `"FP32"`, ...). */
  readonly dtype: D | DTypeLike;
  /** The dimensions, row-major. */
  readonly shape: readonly number[];
  /** The device pointer of the first element. */
  readonly pointer: bigint;
  /** The CUDA device ordinal the memory is on. */
  readonly device: number;
  /**
   * The CUDA driver library to copy through.
   *
   * @default {"libcuda.so.1"}
   */
  readonly driverLibrary?: string;
}

/**
 * A tensor in GPU memory. It does not own the memory: whoever allocated or mapped it frees it
 * (the server, for an input in a client's region: valid while the callable runs; the callable,
 * for an output it returns: valid until the engine copied it, which happens before the
 * callable's next call).
 *
 * @typeParam D The dtype (numeric: BYTES tensors are never on a device here).
 *
 * @example Describe device memory, and copy it to the host (needs a GPU)
 * ```ts ignore
 * import { DeviceTensor } from "../../mod.ts";
 *
 * const x = new DeviceTensor({ dtype: "float32", shape: [2, 3], pointer: 0x7f0000000000n, device: 0 });
 * console.log(x.byteSize); // 24
 * const host = x.toHost(); // NDArray<"float32">: one copy from cuda:0
 * ```
 *
 * @example Fields
 * ```ts
 * import { DeviceTensor, isDeviceTensor, ndarray } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const x = new DeviceTensor({ dtype: "FP32", shape: [2, 3], pointer: 4096n, device: 1 });
 * assert.equal(x.dtype, "float32");
 * assert.equal(x.byteSize, 24);
 * assert.equal(x.deviceName, "cuda:1");
 * assert.ok(isDeviceTensor(x));
 * assert.ok(!isDeviceTensor(ndarray([1])));
 * ```
 */
export class DeviceTensor<D extends NumericDType = NumericDType> implements DeviceBuffer {
  /** The element type. */
  readonly dtype: D;
  /** The dimensions, row-major. */
  readonly shape: readonly number[];
  /** The device pointer of the first element. */
  readonly pointer: bigint;
  /** The CUDA device ordinal. */
  readonly device: number;
  /** The bytes of its elements (row-major, packed). */
  readonly byteSize: number;
  /** The CUDA driver library its copies go through. */
  readonly driverLibrary: string;

  /**
   * Describes device memory as a tensor (no copy, nothing allocated).
   *
   * @param init Dtype, shape, pointer, device and driver.
   * @throws {TritonValidationError} For a BYTES dtype, a bad shape, pointer or device.
   */
  constructor(init: DeviceTensorInit<D>) {
    const dtype = toDType(init.dtype as DTypeLike);
    if (dtype === "bytes") {
      throw new TritonValidationError("Invalid device tensor: BYTES tensors cannot be on a device");
    }
    if (!init.shape.every((dim) => Number.isSafeInteger(dim) && dim >= 0)) {
      throw new TritonValidationError(
        `Invalid device tensor: shape [${init.shape}] must hold non-negative integers`,
      );
    }
    if (typeof init.pointer !== "bigint" || init.pointer < 0n) {
      throw new TritonValidationError("Invalid device tensor: pointer must be a bigint >= 0");
    }
    if (!Number.isSafeInteger(init.device) || init.device < 0) {
      throw new TritonValidationError(
        `Invalid device tensor: device must be a CUDA device ordinal, got ${init.device}`,
      );
    }
    this.dtype = dtype as D;
    this.shape = [...init.shape];
    this.pointer = init.pointer;
    this.device = init.device;
    this.byteSize = shapeSize(this.shape) * elementSize(dtype);
    this.driverLibrary = init.driverLibrary ?? DEFAULT_CUDA_DRIVER;
  }

  /** `"cuda:N"`. */
  get deviceName(): string {
    return `cuda:${this.device}`;
  }

  /**
   * Copies the tensor to host memory: one device-to-host copy into a new buffer.
   *
   * @returns The host tensor.
   * @throws {InferenceError} (INTERNAL) When the driver refuses the copy.
   */
  toHost(): NumericNDArray<D> {
    const bytes = new Uint8Array(this.byteSize);
    try {
      CudaMemory.open(this.driverLibrary).copyToHost(this.device, bytes, this.pointer);
    } catch (error) {
      throw deviceMemoryError(
        `Cannot copy a ${this.dtype} device tensor of ${this.byteSize} bytes from ${this.deviceName} to the host`,
        error,
      );
    }
    return fromRawBytes(this.dtype, this.shape, bytes) as NumericNDArray<D>;
  }

  /**
   * Copies a host tensor of the same dtype and element count into this device memory (one
   * host-to-device copy, complete when this returns).
   *
   * @param array The host tensor.
   * @throws {TritonValidationError} For another dtype or element count.
   * @throws {InferenceError} (INTERNAL) When the driver refuses the copy.
   */
  copyFromHost(array: NDArray<DTypeOf<D>> | NDArray): void {
    if (array.dtype !== this.dtype || shapeSize(array.shape) !== shapeSize(this.shape)) {
      throw new TritonValidationError(
        `Cannot copy a ${array.dtype} tensor of shape [${array.shape}] into a ${this.dtype} device tensor of shape [${this.shape}]`,
      );
    }
    try {
      CudaMemory.open(this.driverLibrary).copyToDevice(
        this.device,
        this.pointer,
        toRawBytes(array),
      );
    } catch (error) {
      throw deviceMemoryError(
        `Cannot copy ${this.byteSize} bytes from the host to ${this.deviceName}`,
        error,
      );
    }
  }
}

/**
 * Whether a value is a {@linkcode DeviceTensor}.
 *
 * @param value Anything.
 * @returns `true` for a device tensor.
 *
 * @example A device tensor, and a host one
 * ```ts
 * import { DeviceTensor, isDeviceTensor, ndarray } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * assert.ok(isDeviceTensor(new DeviceTensor({ dtype: "int32", shape: [1], pointer: 0n, device: 0 })));
 * assert.ok(!isDeviceTensor(ndarray([1])));
 * ```
 */
export function isDeviceTensor(value: unknown): value is DeviceTensor {
  return value instanceof DeviceTensor;
}

/** A tensor in host memory ({@linkcode NDArray}) or in GPU memory ({@linkcode DeviceTensor}). */
export type Tensor = NDArray | DeviceTensor;

/**
 * A tensor known to be in host memory, for code that encodes its bytes: engines answer every
 * output in host memory except one that went into a client's CUDA region, which front ends send
 * without its bytes.
 *
 * @param tensor The tensor.
 * @param what Names it in the error, e.g. `output 'y'`.
 * @returns The same tensor, as an `NDArray`.
 * @throws {InferenceError} (INTERNAL) For a device tensor.
 *
 * @example A host tensor passes, a device tensor is refused
 * ```ts
 * import { hostTensor } from "./device_tensor.ts";
 * import { DeviceTensor, ndarray } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const x = ndarray([1]);
 * assert.equal(hostTensor(x, "output 'x'"), x);
 * const d = new DeviceTensor({ dtype: "int8", shape: [1], pointer: 0n, device: 0 });
 * assert.throws(() => hostTensor(d, "output 'd'"), /Cannot send output 'd': it is in GPU memory/);
 * ```
 */
export function hostTensor(tensor: Tensor, what: string): NDArray {
  if (!isDeviceTensor(tensor)) return tensor;
  throw InferenceError.internal(
    `Cannot send ${what}: it is in GPU memory on ${tensor.deviceName}, outside a CUDA shared-memory region`,
  );
}

/**
 * Tensors known to be in host memory (see {@linkcode hostTensor}), by name.
 *
 * @param tensors The tensors.
 * @returns The same map, typed as host tensors.
 * @throws {InferenceError} (INTERNAL) When one is a device tensor, naming it.
 */
export function hostTensors(tensors: ReadonlyMap<string, Tensor>): ReadonlyMap<string, NDArray> {
  for (const [name, tensor] of tensors) hostTensor(tensor, `output '${name}'`);
  return tensors as ReadonlyMap<string, NDArray>;
}
