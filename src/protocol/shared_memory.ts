/**
 * The shared-memory tensor parameters of the KServe v2 shared-memory extension, one rule for
 * both front ends: an input or requested output with `shared_memory_region` (string) and
 * `shared_memory_byte_size` (integer), plus an optional `shared_memory_offset` (integer,
 * default 0), has its bytes in a registered region instead of the request or response.
 *
 * {@linkcode SharedMemoryBinding} holds the regions one request uses: inputs are views over the
 * mapping (no copy), outputs are written into their regions once, after the engine answers, and
 * the response then carries no bytes for them (as in Triton). The request holds its regions
 * until {@linkcode SharedMemoryBinding.release}, so unregistering meanwhile unmaps only after it.
 *
 * @module
 */

import type { ServerMetadata } from "../engine/engine.ts";
import { InferenceError } from "../errors.ts";
import type { RegionView, SharedMemoryRegistry } from "../shm/registry.ts";
import type { DType } from "../tensor/dtype.ts";
import { type NDArray, toRawBytes } from "../tensor/ndarray.ts";
import { tensorFromRaw } from "./tensor_contents.ts";

/** Where one tensor lies in shared memory. */
export interface SharedMemoryRef {
  /** The registered region's name. */
  readonly region: string;
  /** The tensor's size in bytes. */
  readonly byteSize: number;
  /** Its offset in the region, in bytes. */
  readonly offset: number;
}

/**
 * The server metadata a front end answers: the engine's, plus `system_shared_memory` where the
 * front end serves regions (as Triton lists it). `cuda_shared_memory` is never listed: CUDA
 * registration is refused.
 *
 * @param metadata The engine's server metadata.
 * @param registry The front end's regions; `undefined` where it has none.
 * @returns The metadata to answer.
 *
 * @example
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

/** Names a register request in {@linkcode byteCount}'s errors. */
export const REGISTER_REQUEST = "the shared memory register request";

/**
 * Reads a byte count or offset of the shared-memory extension, one rule for both front ends
 * and for tensor parameters and register requests alike: a non-negative safe integer.
 *
 * @param value The value (a JSON number or bigint, or a decoded gRPC integer as a bigint).
 * @param key Its name, e.g. `offset`.
 * @param what Names where it came from in errors, e.g. `the shared memory register request`.
 * @returns The count.
 * @throws {InferenceError} (INVALID_ARG) For anything else.
 *
 * @example
 * ```ts
 * import { byteCount } from "./shared_memory.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(byteCount(16n, "offset", "the shared memory register request"), 16);
 * assert.throws(
 *   () => byteCount(2n ** 64n - 1n, "offset", "the shared memory register request"),
 *   /Unable to parse 'offset' of the shared memory register request: expected a non-negative integer/,
 * );
 * ```
 */
export function byteCount(value: unknown, key: string, what: string): number {
  const number = typeof value === "bigint" ? Number(value) : value;
  if (typeof number !== "number" || !Number.isSafeInteger(number) || number < 0) {
    throw InferenceError.invalidArg(
      `Unable to parse '${key}' of ${what}: expected a non-negative integer`,
    );
  }
  return number;
}

/**
 * Reads the shared-memory parameters of one tensor.
 *
 * @param parameters The tensor's parameters (plain values: JSON's, or gRPC's decoded).
 * @param what Names the tensor in errors, e.g. `input 'x'`.
 * @returns Where the tensor lies, or `undefined` when it sets none of the parameters.
 * @throws {InferenceError} (INVALID_ARG) When a value has the wrong type, or the region or the
 *   byte size is given without the other.
 *
 * @example
 * ```ts
 * import { sharedMemoryRef } from "./shared_memory.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(
 *   sharedMemoryRef({ shared_memory_region: "r", shared_memory_byte_size: 16 }, "input 'x'"),
 *   { region: "r", byteSize: 16, offset: 0 },
 * );
 * assert.equal(sharedMemoryRef({ binary_data_size: 4 }, "input 'x'"), undefined);
 * assert.throws(
 *   () => sharedMemoryRef({ shared_memory_region: "r" }, "input 'x'"),
 *   /'shared_memory_byte_size' is required/,
 * );
 * ```
 */
export function sharedMemoryRef(
  parameters: Readonly<Record<string, unknown>> | undefined,
  what: string,
): SharedMemoryRef | undefined {
  if (parameters === undefined) return undefined;
  const region = parameters["shared_memory_region"];
  const size = parameters["shared_memory_byte_size"];
  const offset = parameters["shared_memory_offset"];
  if (region === undefined && size === undefined && offset === undefined) return undefined;
  if (region === undefined) {
    throw InferenceError.invalidArg(
      `Invalid shared memory parameters of ${what}: 'shared_memory_region' is required with '${
        size !== undefined ? "shared_memory_byte_size" : "shared_memory_offset"
      }'`,
    );
  }
  if (typeof region !== "string") {
    throw InferenceError.invalidArg(
      `Unable to parse 'shared_memory_region' of ${what}: expected a string`,
    );
  }
  if (size === undefined) {
    throw InferenceError.invalidArg(
      `Invalid shared memory parameters of ${what}: 'shared_memory_byte_size' is required with 'shared_memory_region'`,
    );
  }
  return {
    region,
    byteSize: byteCount(size, "shared_memory_byte_size", what),
    offset: offset === undefined ? 0 : byteCount(offset, "shared_memory_offset", what),
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
   * in its region (for an engine to write there directly), or nothing when there are none.
   *
   * @returns Fields to spread into the `InferenceRequest`.
   */
  requestFields(): { outputBuffers?: ReadonlyMap<string, Uint8Array> } {
    if (this.#outputs.size === 0) return {};
    return {
      outputBuffers: new Map([...this.#outputs].map(([name, view]) => [name, view.bytes])),
    };
  }

  /**
   * Writes each output directed to a region into it (one copy per output).
   *
   * @param outputs The engine's outputs.
   * @throws {InferenceError} (INTERNAL) When an output is larger than its region's bytes, with
   *   Triton's message.
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
