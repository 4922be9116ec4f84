/**
 * The system shared-memory regions of one server: what `/v2/systemsharedmemory/...` and the
 * gRPC `SystemSharedMemory*` RPCs register, list and unregister, and where requests find their
 * input and output bytes. Both front ends share one registry; the engines see only views.
 * Errors follow Triton 2.51's `shared_memory_manager.cc`.
 *
 * @module
 */

import { InferenceError } from "../errors.ts";
import { type RegionSpec, type RegionView, SystemRegion } from "./system_region.ts";

export type { RegionSpec, RegionView };

/** One region as the status endpoints list it (Triton's field names). */
export interface RegionStatus {
  /** The region's name. */
  readonly name: string;
  /** Its shared-memory key. */
  readonly key: string;
  /** Its offset in the shared-memory object. */
  readonly offset: number;
  /** Its size in bytes. */
  readonly byte_size: number;
}

/**
 * The registered system shared-memory regions of one server.
 *
 * @example Errors for unknown regions
 * ```ts
 * import { SharedMemoryRegistry } from "./registry.ts";
 * import assert from "node:assert/strict";
 *
 * const registry = new SharedMemoryRegistry();
 * assert.deepEqual(registry.status(), []);
 * assert.throws(() => registry.status("r"), /Unable to find system shared memory region: 'r'/);
 * assert.throws(() => registry.acquire("r", 0, 4), /Unable to find shared memory region: 'r'/);
 * registry.unregister("r"); // unknown names unregister quietly, as in Triton
 * registry.close();
 * ```
 */
export class SharedMemoryRegistry {
  #regions = new Map<string, SystemRegion>();

  /**
   * Maps and registers a region.
   *
   * @param spec Name, key, offset and size.
   * @throws {InferenceError} (ALREADY_EXISTS) When the name is taken; the errors of
   *   `SystemRegion.open` otherwise.
   */
  register(spec: RegionSpec): void {
    if (spec.name === "") {
      throw InferenceError.invalidArg(
        "'region name' is necessary to register system shared memory region",
      );
    }
    if (this.#regions.has(spec.name)) {
      throw new InferenceError(`shared memory region '${spec.name}' already in manager`, {
        code: "ALREADY_EXISTS",
      });
    }
    this.#regions.set(spec.name, SystemRegion.open(spec));
  }

  /**
   * Unregisters one region, or every region when `name` is empty or omitted. A region a request
   * still uses leaves the registry at once and is unmapped when that request ends.
   *
   * @param name The region; empty or omitted for all.
   */
  unregister(name?: string): void {
    const names = name === undefined || name === "" ? [...this.#regions.keys()] : [name];
    for (const each of names) {
      const region = this.#regions.get(each);
      if (region === undefined) continue;
      this.#regions.delete(each);
      region.close();
    }
  }

  /**
   * Lists one region or all of them.
   *
   * @param name The region; empty or omitted for all.
   * @returns Their status entries.
   * @throws {InferenceError} (NOT_FOUND) For an unknown name.
   */
  status(name?: string): RegionStatus[] {
    const regions = name === undefined || name === ""
      ? [...this.#regions.values()]
      : [this.#regions.get(name)];
    return regions.map((region) => {
      if (region === undefined) {
        throw InferenceError.notFound(`Unable to find system shared memory region: '${name}'`);
      }
      const { spec } = region;
      return { name: spec.name, key: spec.key, offset: spec.offset, byte_size: spec.byteSize };
    });
  }

  /**
   * Holds bytes of a region for one request.
   *
   * @param name The region.
   * @param offset Offset in the region.
   * @param byteSize Bytes.
   * @returns The view; release it when the request is done.
   * @throws {InferenceError} (NOT_FOUND) For an unknown region, (INVALID_ARG) for bytes beyond
   *   it.
   */
  acquire(name: string, offset: number, byteSize: number): RegionView {
    const region = this.#regions.get(name);
    if (region === undefined) {
      throw InferenceError.notFound(`Unable to find shared memory region: '${name}'`);
    }
    const size = region.spec.byteSize;
    if (offset >= size) {
      throw InferenceError.invalidArg(`Invalid offset for shared memory region: '${name}'`);
    }
    if (offset + byteSize > size) {
      throw InferenceError.invalidArg(
        `Invalid offset + byte size for shared memory region: '${name}'`,
      );
    }
    return region.view(offset, byteSize);
  }

  /** Unregisters every region (the server stops); in-flight requests keep theirs until done. */
  close(): void {
    this.unregister();
  }
}
