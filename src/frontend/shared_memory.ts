/**
 * Shared memory, system and CUDA, as the front ends serve it (the wire rules are
 * `protocol/shared_memory.ts`'s): {@linkcode SharedMemoryBinding} holds the regions one request
 * uses. Inputs are views over a system region's mapping (no copy), or device tensors over a CUDA
 * region (no copy); outputs are written into their regions once, after the engine answers,
 * unless the engine already put them there, and the response then carries no bytes for them (as
 * in Triton). The request holds its regions until {@linkcode SharedMemoryBinding.release}, so
 * unregistering meanwhile unmaps (or closes the CUDA mapping) only after it.
 * {@linkcode withSharedMemoryExtension} lists the extensions in the server metadata of a front
 * end that serves regions.
 *
 * Copies into a region, by what the engine answered: a host output into a system region is one
 * host copy, into a CUDA region one host-to-device copy; a device tensor into a system region is
 * one device-to-host copy, into a CUDA region one device-to-device copy; an output already in its
 * region (the Triton core wrote there, the built-in engine copied a device tensor there, or an
 * identity model answered its input's own view) is none.
 *
 * @module
 */

import type { InferenceRequest, ServerMetadata } from "../engine/engine.ts";
import { InferenceError } from "../errors.ts";
import type { SharedMemoryRegistry, SharedRegionView } from "../shm/registry.ts";
import { elementSize } from "../tensor/dtype.ts";
import { shapeSize, toRawBytes } from "../tensor/ndarray.ts";
import {
  type DeviceBuffer,
  DeviceTensor,
  isDeviceTensor,
  type Tensor,
} from "../tensor/device_tensor.ts";
import { CudaMemory, deviceMemoryError } from "../native/cuda_memory.ts";
import type { SharedMemoryRef } from "../protocol/shared_memory.ts";
import { tensorFromRaw, type WireTensorSpec } from "../protocol/tensor_contents.ts";

/**
 * The server metadata a front end answers: the engine's, plus `system_shared_memory` and
 * `cuda_shared_memory` where the front end serves regions (as Triton lists them).
 *
 * @param metadata The engine's server metadata.
 * @param registry The front end's regions; `undefined` where it has none.
 * @returns The metadata to answer.
 *
 * @example Add the extension only with a registry
 * ```ts
 * import { withSharedMemoryExtension } from "./shared_memory.ts";
 * import { SharedMemoryRegistry } from "../shm/registry.ts";
 * import assert from "node:assert/strict";
 *
 * const metadata = { name: "triton", version: "2.51.0", extensions: ["parameters"] };
 * assert.deepEqual(withSharedMemoryExtension(metadata, undefined), metadata);
 * assert.deepEqual(
 *   withSharedMemoryExtension(metadata, new SharedMemoryRegistry()).extensions,
 *   ["parameters", "system_shared_memory", "cuda_shared_memory"],
 * );
 * ```
 */
export function withSharedMemoryExtension(
  metadata: ServerMetadata,
  registry: SharedMemoryRegistry | undefined,
): ServerMetadata {
  if (registry === undefined) return metadata;
  return {
    ...metadata,
    extensions: [...metadata.extensions, "system_shared_memory", "cuda_shared_memory"],
  };
}

/**
 * The regions one request uses. Create it per request, add inputs and outputs while decoding,
 * {@linkcode SharedMemoryBinding.writeOutputs} after the engine answers, and
 * {@linkcode SharedMemoryBinding.release} in a `finally`.
 *
 * @example Without a registry, shared memory is refused
 * ```ts
 * import { SharedMemoryBinding } from "./shared_memory.ts";
 * import assert from "node:assert/strict";
 *
 * const binding = new SharedMemoryBinding(undefined);
 * assert.throws(
 *   () =>
 *     binding.input("x", { dtype: "float32", shape: [1] }, { region: "r", byteSize: 4, offset: 0 }),
 *   /System shared memory is not enabled/,
 * );
 * assert.equal(binding.outputs.size, 0);
 * binding.release();
 * ```
 */
export class SharedMemoryBinding {
  #registry: SharedMemoryRegistry | undefined;
  #views: SharedRegionView[] = [];
  #outputs = new Map<string, SharedRegionView>();

  /**
   * @param registry The server's regions; `undefined` where the server has none.
   */
  constructor(registry: SharedMemoryRegistry | undefined) {
    this.#registry = registry;
  }

  #acquire(ref: SharedMemoryRef): SharedRegionView {
    if (this.#registry === undefined) {
      throw InferenceError.unsupported(
        "System shared memory is not enabled on this server: send tensors in the request",
      );
    }
    const view = this.#registry.acquire(ref.region, ref.offset, ref.byteSize);
    this.#views.push(view);
    return view;
  }

  /**
   * Builds an input tensor over its region's bytes: a view of a system region (no copy, when the
   * bytes are aligned for the element type), or a device tensor over a CUDA region (no copy).
   *
   * @param name Input name.
   * @param spec Element type and dimensions.
   * @param ref Where its bytes lie.
   * @returns The tensor.
   * @throws {InferenceError} For an unknown region, bytes beyond it, a byte size that does not
   *   match the shape, or a BYTES tensor in a CUDA region.
   */
  input(name: string, spec: WireTensorSpec, ref: SharedMemoryRef): Tensor {
    const { dtype, shape } = spec;
    const view = this.#acquire(ref);
    if (view.kind === "system") {
      return tensorFromRaw(spec, view.bytes, `input '${name}'`);
    }
    if (dtype === "bytes") {
      throw InferenceError.invalidArg(
        `Invalid data for input '${name}': a BYTES tensor cannot be in CUDA shared memory on this server`,
      );
    }
    const expected = shapeSize(shape) * elementSize(dtype);
    if (ref.byteSize !== expected) {
      throw InferenceError.invalidArg(
        `Invalid data for input '${name}': Unexpected byte size for ${dtype} tensor of shape [${shape}]: expected ${expected} bytes, got ${ref.byteSize}`,
      );
    }
    const { pointer, device, driverLibrary } = view.buffer;
    return new DeviceTensor({ dtype, shape, pointer, device, driverLibrary });
  }

  /**
   * Directs an output into its region.
   *
   * @param name Output name.
   * @param ref Where its bytes go.
   * @throws {InferenceError} For an unknown region or bytes beyond it.
   */
  output(name: string, ref: SharedMemoryRef): void {
    this.#outputs.set(name, this.#acquire(ref));
  }

  /** The outputs that go to shared memory. */
  get outputs(): ReadonlySet<string> {
    return new Set(this.#outputs.keys());
  }

  /**
   * The request's fields for its outputs in shared memory: `outputBuffers`, each output's bytes
   * in its region (for an engine to write there directly), and `outputGuards`, what the engine
   * checks before it does (the client may shrink the region meanwhile); nothing when there are
   * none.
   *
   * @returns Fields to spread into the `InferenceRequest`.
   */
  requestFields(): Pick<InferenceRequest, "outputBuffers" | "outputGuards"> {
    if (this.#outputs.size === 0) return {};
    const outputs = [...this.#outputs];
    const guarded = outputs.flatMap(([name, view]) =>
      view.kind === "system" ? [[name, view.guard] as const] : []
    );
    return {
      outputBuffers: new Map(
        outputs.map(([name, view]) => [name, view.kind === "system" ? view.bytes : view.buffer]),
      ),
      ...(guarded.length === 0 ? {} : { outputGuards: new Map(guarded) }),
    };
  }

  /**
   * Writes each output directed to a region into it, unless it is there already (at most one
   * copy per output; the module's documentation says which).
   *
   * @param outputs The engine's outputs.
   * @throws {InferenceError} (INTERNAL) When an output is larger than its region's bytes, with
   *   Triton's message, or the driver refuses a copy; (INVALID_ARG) when a system region's object
   *   shrank below its registered range while the request ran.
   */
  writeOutputs(outputs: ReadonlyMap<string, Tensor>): void {
    for (const [name, view] of this.#outputs) {
      const tensor = outputs.get(name);
      if (tensor === undefined) continue;
      const size = isDeviceTensor(tensor) ? tensor.byteSize : toRawBytes(tensor).byteLength;
      const room = view.kind === "system" ? view.bytes.byteLength : view.buffer.byteSize;
      if (size > room) {
        throw InferenceError.internal(
          `shared memory size specified with the request for output '${name}' (${room} bytes) should be at least ${size} bytes to hold the results`,
        );
      }
      try {
        if (view.kind === "cuda") writeToDevice(view.buffer, tensor);
        else if (isDeviceTensor(tensor)) {
          view.check();
          CudaMemory.open(tensor.driverLibrary).copyToHost(
            tensor.device,
            view.bytes.subarray(0, size),
            tensor.pointer,
          );
        } else {
          const bytes = toRawBytes(tensor);
          // Already there: the engine wrote into the region (Triton engine), or an identity
          // model handed back the input's own view.
          if (bytes.buffer !== view.bytes.buffer || bytes.byteOffset !== view.bytes.byteOffset) {
            // The client may have shrunk the region's object while the request ran.
            view.check();
            view.bytes.set(bytes);
          }
        }
      } catch (error) {
        throw deviceMemoryError(
          `Cannot write output '${name}' into its shared memory region`,
          error,
        );
      }
    }
  }

  /** Releases every region the request holds (closing CUDA mappings unregistered meanwhile). */
  release(): void {
    for (const view of this.#views) view.release();
    this.#views = [];
    this.#outputs.clear();
  }
}

/** Writes an output into a CUDA region: nothing when it is there already. */
function writeToDevice(target: DeviceBuffer, tensor: Tensor): void {
  const memory = CudaMemory.open(target.driverLibrary);
  if (!isDeviceTensor(tensor)) {
    memory.copyToDevice(target.device, target.pointer, toRawBytes(tensor));
  } else if (tensor.pointer !== target.pointer || tensor.device !== target.device) {
    memory.copyOnDevice(target.device, target.pointer, tensor);
  }
}
