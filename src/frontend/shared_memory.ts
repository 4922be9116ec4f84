/**
 * System shared memory as the front ends serve it (the wire rules are
 * `protocol/shared_memory.ts`'s): {@linkcode SharedMemoryBinding} holds the regions one request
 * uses: inputs are views over the mapping (no copy), outputs are written into their regions
 * once, after the engine answers, and the response then carries no bytes for them (as in
 * Triton). The request holds its regions until {@linkcode SharedMemoryBinding.release}, so
 * unregistering meanwhile unmaps only after it. {@linkcode withSharedMemoryExtension} lists the
 * extension in the server metadata of a front end that serves regions.
 *
 * @module
 */

import type { InferenceRequest, ServerMetadata } from "../engine/engine.ts";
import { InferenceError } from "../errors.ts";
import type { RegionView, SharedMemoryRegistry } from "../shm/registry.ts";
import type { DType } from "../tensor/dtype.ts";
import { type NDArray, toRawBytes } from "../tensor/ndarray.ts";
import type { SharedMemoryRef } from "../protocol/shared_memory.ts";
import { tensorFromRaw } from "../protocol/tensor_contents.ts";

/**
 * The server metadata a front end answers: the engine's, plus `system_shared_memory` where the
 * front end serves regions (as Triton lists it). `cuda_shared_memory` is never listed: CUDA
 * registration is refused.
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
 *   ["parameters", "system_shared_memory"],
 * );
 * ```
 */
export function withSharedMemoryExtension(
  metadata: ServerMetadata,
  registry: SharedMemoryRegistry | undefined,
): ServerMetadata {
  if (registry === undefined) return metadata;
  return { ...metadata, extensions: [...metadata.extensions, "system_shared_memory"] };
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
 *   () => binding.input("x", "float32", [1], { region: "r", byteSize: 4, offset: 0 }),
 *   /System shared memory is not enabled/,
 * );
 * assert.equal(binding.outputs.size, 0);
 * binding.release();
 * ```
 */
export class SharedMemoryBinding {
  #registry: SharedMemoryRegistry | undefined;
  #views: RegionView[] = [];
  #outputs = new Map<string, RegionView>();

  /**
   * @param registry The server's regions; `undefined` where the server has none.
   */
  constructor(registry: SharedMemoryRegistry | undefined) {
    this.#registry = registry;
  }

  #acquire(ref: SharedMemoryRef): RegionView {
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
   * Builds an input tensor over its region's bytes (a view, no copy, when they are aligned for
   * the element type).
   *
   * @param name Input name.
   * @param dtype Element type.
   * @param shape Dimensions.
   * @param ref Where its bytes lie.
   * @returns The tensor.
   * @throws {InferenceError} For an unknown region, bytes beyond it, or a byte size that does
   *   not match the shape.
   */
  input(name: string, dtype: DType, shape: readonly number[], ref: SharedMemoryRef): NDArray {
    const view = this.#acquire(ref);
    return tensorFromRaw(dtype, shape, view.bytes, `input '${name}'`);
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
    return {
      outputBuffers: new Map(outputs.map(([name, view]) => [name, view.bytes])),
      outputGuards: new Map(outputs.map(([name, view]) => [name, view.guard])),
    };
  }

  /**
   * Writes each output directed to a region into it (one copy per output).
   *
   * @param outputs The engine's outputs.
   * @throws {InferenceError} (INTERNAL) When an output is larger than its region's bytes, with
   *   Triton's message; (INVALID_ARG) when the region's object shrank below its registered range
   *   while the request ran.
   */
  writeOutputs(outputs: ReadonlyMap<string, NDArray>): void {
    for (const [name, view] of this.#outputs) {
      const array = outputs.get(name);
      if (array === undefined) continue;
      const bytes = toRawBytes(array);
      if (bytes.byteLength > view.bytes.byteLength) {
        throw InferenceError.internal(
          `shared memory size specified with the request for output '${name}' (${view.bytes.byteLength} bytes) should be at least ${bytes.byteLength} bytes to hold the results`,
        );
      }
      // Already there: the engine wrote into the region (Triton engine), or an identity model
      // handed back the input's own view.
      if (bytes.buffer !== view.bytes.buffer || bytes.byteOffset !== view.bytes.byteOffset) {
        // The client may have shrunk the region's object while the request ran.
        view.check();
        view.bytes.set(bytes);
      }
    }
  }

  /** Releases every region the request holds. Idempotent. */
  release(): void {
    for (const view of this.#views) view.release();
    this.#views = [];
    this.#outputs.clear();
  }
}
