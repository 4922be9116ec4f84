/**
 * The shared-memory regions of one server, system and CUDA in one name space (as Triton's
 * `SharedMemoryManager` keeps them): what `/v2/systemsharedmemory/...`,
 * `/v2/cudasharedmemory/...` and the gRPC `SystemSharedMemory*` / `CudaSharedMemory*` RPCs
 * register, list and unregister, and where requests find their input and output bytes. Both front
 * ends share one registry. Errors follow Triton 2.51's `shared_memory_manager.cc`.
 *
 * @module
 */

import { InferenceError } from "../errors.ts";
import { DEFAULT_CUDA_DRIVER } from "../tensor/device_tensor.ts";
import { CudaRegion, type CudaRegionSpec, type CudaRegionView } from "./cuda_region.ts";
import { type RegionSpec, type RegionView, SystemRegion } from "./system_region.ts";

export type { CudaRegionSpec, CudaRegionView, RegionSpec, RegionView };

/** One system region as the status endpoints list it (Triton's field names). */
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

/** One CUDA region as the status endpoints list it (Triton's field names). */
export interface CudaRegionStatus {
  /** The region's name. */
  readonly name: string;
  /** The device its memory is on. */
  readonly device_id: number;
  /** Its size in bytes. */
  readonly byte_size: number;
}

/** Options of {@linkcode SharedMemoryRegistry}. */
export interface SharedMemoryRegistryOptions {
  /**
   * The CUDA driver that opens the clients' CUDA IPC handles (the GPU inventory's).
   *
   * @default {"libcuda.so.1"}
   */
  cudaDriverLibrary?: string;
}

/** Bytes of a region held by one request: system (host) or CUDA (device) memory. */
export type SharedRegionView = RegionView | CudaRegionView;

type Kind = "system" | "cuda";

/**
 * The registered shared-memory regions of one server.
 *
 * @example Errors for unknown regions
 * ```ts
 * import { SharedMemoryRegistry } from "./registry.ts";
 * import assert from "node:assert/strict";
 *
 * const registry = new SharedMemoryRegistry();
 * assert.deepEqual(registry.status(), []);
 * assert.deepEqual(registry.cudaStatus(), []);
 * assert.throws(() => registry.status("r"), /Unable to find system shared memory region: 'r'/);
 * assert.throws(() => registry.cudaStatus("r"), /Unable to find cuda shared memory region: 'r'/);
 * assert.throws(() => registry.acquire("r", 0, 4), /Unable to find shared memory region: 'r'/);
 * registry.unregister("r"); // unknown names unregister quietly, as in Triton
 * registry.unregisterCuda("r");
 * registry.close();
 * ```
 */
export class SharedMemoryRegistry {
  #regions = new Map<string, SystemRegion | CudaRegion>();
  #cudaDriverLibrary: string;

  /**
   * @param options The CUDA driver for CUDA regions.
   */
  constructor(options: SharedMemoryRegistryOptions = {}) {
    this.#cudaDriverLibrary = options.cudaDriverLibrary ?? DEFAULT_CUDA_DRIVER;
  }

  #refuseTaken(name: string): void {
    if (this.#regions.has(name)) {
      throw new InferenceError(`shared memory region '${name}' already in manager`, {
        code: "ALREADY_EXISTS",
      });
    }
  }

  /**
   * Maps and registers a system region.
   *
   * @param spec Name, key, offset and size.
   * @throws {InferenceError} (ALREADY_EXISTS) When the name is taken by a region of either kind;
   *   the errors of `SystemRegion.open` otherwise.
   */
  register(spec: RegionSpec): void {
    if (spec.name === "") {
      throw InferenceError.invalidArg(
        "'region name' is necessary to register system shared memory region",
      );
    }
    this.#refuseTaken(spec.name);
    this.#regions.set(spec.name, SystemRegion.open(spec));
  }

  /**
   * Opens and registers a CUDA region from a client's CUDA IPC handle.
   *
   * @param spec Name, handle, device and size.
   * @throws {InferenceError} (ALREADY_EXISTS) When the name is taken by a region of either kind;
   *   the errors of `CudaRegion.open` otherwise.
   */
  registerCuda(spec: CudaRegionSpec): void {
    if (spec.name === "") {
      throw InferenceError.invalidArg(
        "'region name' is necessary to register cuda shared memory region",
      );
    }
    this.#refuseTaken(spec.name);
    this.#regions.set(spec.name, CudaRegion.open(spec, this.#cudaDriverLibrary));
  }

  #unregister(kind: Kind, name: string | undefined): void {
    const names = name === undefined || name === "" ? [...this.#regions.keys()] : [name];
    const failures: string[] = [];
    for (const each of names) {
      const region = this.#regions.get(each);
      // A name of the other kind is left alone, as Triton does.
      if (region === undefined || kindOf(region) !== kind) continue;
      this.#regions.delete(each);
      try {
        region.close();
      } catch (error) {
        if (names.length === 1) throw error;
        failures.push(each);
      }
    }
    if (failures.length > 0) {
      throw InferenceError.internal(
        `Failed to unregister the following cuda shared memory regions: ${failures.join(", ")}`,
      );
    }
  }

  /**
   * Unregisters one system region, or every system region when `name` is empty or omitted. A
   * region a request still uses leaves the registry at once and is unmapped when that request
   * ends. A CUDA region of that name is left alone.
   *
   * @param name The region; empty or omitted for all.
   */
  unregister(name?: string): void {
    this.#unregister("system", name);
  }

  /**
   * Unregisters one CUDA region, or every CUDA region when `name` is empty or omitted. A region
   * a request still uses leaves the registry at once and its mapping is closed when that request
   * ends. A system region of that name is left alone.
   *
   * @param name The region; empty or omitted for all.
   * @throws {InferenceError} (INTERNAL) When the driver refuses to close a mapping.
   */
  unregisterCuda(name?: string): void {
    this.#unregister("cuda", name);
  }

  #lookup(kind: Kind, name: string | undefined): (SystemRegion | CudaRegion)[] {
    const label = kind === "cuda" ? "cuda" : "system";
    if (name === undefined || name === "") {
      return [...this.#regions.values()].filter((region) => kindOf(region) === kind);
    }
    const region = this.#regions.get(name);
    if (region === undefined) {
      throw InferenceError.notFound(`Unable to find ${label} shared memory region: '${name}'`);
    }
    if (kindOf(region) !== kind) {
      throw InferenceError.notFound(
        kind === "cuda"
          ? `The region named '${name}' is registered as system shared memory, not CUDA shared memory`
          : `The region named '${name}' is registered as CUDA shared memory, not system shared memory`,
      );
    }
    return [region];
  }

  /**
   * Lists one system region or all of them.
   *
   * @param name The region; empty or omitted for all.
   * @returns Their status entries.
   * @throws {InferenceError} (NOT_FOUND) For an unknown name, or one of a CUDA region.
   */
  status(name?: string): RegionStatus[] {
    return this.#lookup("system", name).map((region) => {
      const { spec } = region as SystemRegion;
      return { name: spec.name, key: spec.key, offset: spec.offset, byte_size: spec.byteSize };
    });
  }

  /**
   * Lists one CUDA region or all of them.
   *
   * @param name The region; empty or omitted for all.
   * @returns Their status entries.
   * @throws {InferenceError} (NOT_FOUND) For an unknown name, or one of a system region.
   */
  cudaStatus(name?: string): CudaRegionStatus[] {
    return this.#lookup("cuda", name).map((region) => {
      const { spec } = region as CudaRegion;
      return { name: spec.name, device_id: spec.deviceId, byte_size: spec.byteSize };
    });
  }

  /**
   * Holds bytes of a region of either kind for one request.
   *
   * @param name The region.
   * @param offset Offset in the region.
   * @param byteSize Bytes.
   * @returns The view (`kind` says which); release it when the request is done.
   * @throws {InferenceError} (NOT_FOUND) For an unknown region, (INVALID_ARG) for bytes beyond
   *   it.
   */
  acquire(name: string, offset: number, byteSize: number): SharedRegionView {
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
    try {
      this.unregisterCuda();
    } catch {
      // The server stops: a mapping the driver refuses to close goes with the process.
    }
  }
}

function kindOf(region: SystemRegion | CudaRegion): Kind {
  return region instanceof CudaRegion ? "cuda" : "system";
}
