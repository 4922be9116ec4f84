/**
 * One mapped system shared-memory region: `shm_open` + `mmap` through the C library
 * (`native/ffi.ts` opens it), with a reference count so the mapping outlives the requests
 * that use it: {@linkcode SystemRegion.close} unmaps at once when nothing holds it, otherwise
 * when the last {@linkcode RegionView} is released.
 *
 * The object is the client's: it may shrink (`ftruncate`) after it was registered, and a read or
 * write of a mapped page past its new end raises SIGBUS, which would end the whole server. The
 * region keeps its descriptor and looks at the object's size before each use (each view a
 * request takes, and each write of an output), refusing a region that no longer holds its
 * registered range with INVALID_ARG.
 *
 * @module
 */

import type { OutputGuard } from "../engine/engine.ts";
import { InferenceError } from "../errors.ts";
import { type LibcLibrary, openLibc } from "../native/ffi.ts";
import { foreignBuffer } from "../tensor/foreign_memory.ts";

const O_RDWR = 2;
const PROT_READ = 1;
const PROT_WRITE = 2;
const MAP_SHARED = 1;
const SEEK_END = 2;
const SC_PAGESIZE = 30;
const MAP_FAILED = 0xffff_ffff_ffff_ffffn;
// Released views kept per range of a region: as many as requests that use it at once, mostly.
const MAX_SPARE = 16;

/** Where a region comes from, as a client registers it. */
export interface RegionSpec {
  /** The region's name. */
  readonly name: string;
  /** The shared-memory key: one name under `/dev/shm`, with or without its leading `/`. */
  readonly key: string;
  /** Where the region starts in the shared-memory object, in bytes. */
  readonly offset: number;
  /** The region's size in bytes. */
  readonly byteSize: number;
}

/** Bytes of a region held by one request; release it once the request is done. */
export interface RegionView {
  /** Always `"system"`. */
  readonly kind: "system";
  /** The bytes, over the mapping (no copy), on an `ArrayBuffer` of their own. */
  readonly bytes: Uint8Array<ArrayBuffer>;
  /**
   * Checks, right before the bytes are used again (an output written into them), that the
   * region's object still holds them.
   *
   * @throws {InferenceError} (INVALID_ARG) When the object shrank below the registered range.
   */
  check(): void;
  /** What an engine checks before it writes into the bytes itself (the Triton core does). */
  readonly guard: OutputGuard;
  /** Gives the hold back; the second call does nothing. */
  release(): void;
}

/**
 * Checks a shared-memory key: a leading `/` and no other, so `shm_open` stays in `/dev/shm`.
 *
 * @param key The key a client gave.
 * @returns Why it is refused, or `undefined` when it is fine.
 *
 * @example A flat key passes; a second slash and .. are refused
 * ```ts
 * import { keyProblem } from "./system_region.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(keyProblem("/input0"), undefined);
 * assert.match(keyProblem("/a/b")!, /'\/'/);
 * assert.match(keyProblem("/..")!, /'\.\.'/);
 * ```
 */
export function keyProblem(key: string): string | undefined {
  const name = key.startsWith("/") ? key.slice(1) : key;
  if (name === "") return "the key names no object";
  if (name.includes("/")) return "a key may hold no '/' after its first character";
  if (name === "." || name === "..") return `'${name}' is not an object in /dev/shm`;
  if (name.includes("\0")) return "a key may hold no NUL character";
  if (name.length > 255) return "a key is at most 255 characters";
  return undefined;
}

/** The object's size now (its end, by `lseek`; the descriptor is never read from), or -1. */
function objectSize(libc: LibcLibrary, fd: number): number {
  return Number(libc.lseek(fd, 0n, SEEK_END));
}

function errnoOf(libc: LibcLibrary): number {
  const at = libc.__errno_location();
  return at === null ? 0 : new Deno.UnsafePointerView(at).getInt32();
}

function errnoText(libc: LibcLibrary, errno = errnoOf(libc)): string {
  const text = libc.strerror(errno);
  return text === null ? `errno ${errno}` : Deno.UnsafePointerView.getCString(text);
}

/**
 * The `shm_open` errors that a client's key causes (Linux numbers): no such object (ENOENT),
 * one the server may not open (EACCES), a name that is no valid object name (EINVAL,
 * ENAMETOOLONG), a link (ELOOP: links are not followed). Any other (EMFILE, ENFILE, ...) is the
 * server's.
 */
const KEY_ERRNOS: ReadonlySet<number> = new Set([2, 13, 22, 36, 40]);

/** What {@linkcode SystemRegion.open} opened and mapped. */
interface Mapped {
  /** The object's descriptor. */
  readonly fd: number;
  /** The mapping's start. */
  readonly mapping: Deno.PointerObject;
  /** The mapping's length (whole pages). */
  readonly mappedBytes: number;
  /** Where the registered offset lies in the mapping. */
  readonly start: number;
}

/**
 * A mapped region. Create it with {@linkcode SystemRegion.open}; take views with
 * {@linkcode SystemRegion.view}; {@linkcode SystemRegion.close} it on unregister.
 *
 * @example Map a region, read it, close it
 * ```ts ignore
 * import { SystemRegion } from "./system_region.ts";
 * import assert from "node:assert/strict";
 *
 * // A 16-byte object in /dev/shm (on Linux, /dev/shm is a file system).
 * Deno.writeFileSync("/dev/shm/denotriton_doc", new Uint8Array(16).fill(7));
 * const region = SystemRegion.open({ name: "r", key: "/denotriton_doc", offset: 0, byteSize: 16 });
 * const view = region.view(4, 4);
 * assert.deepEqual([...view.bytes], [7, 7, 7, 7]);
 * view.release();
 * region.close();
 * Deno.removeSync("/dev/shm/denotriton_doc");
 * ```
 */
export class SystemRegion {
  /** What the client registered. */
  readonly spec: RegionSpec;
  #libc: LibcLibrary;
  /** The object's descriptor, kept to look at its size before each use; closed on unmap. */
  #fd: number;
  #mapping: Deno.PointerObject;
  #mappedBytes: number;
  // Where `spec.offset` lies in the mapping (mmap offsets are whole pages).
  #start: number;
  #holds = 0;
  /** The object's size the registered range needs, and the refusal when it has less. */
  #guard: OutputGuard;
  // ArrayBuffers of released holds, by `offset:byteSize`, for the next hold of the same bytes.
  #spare = new Map<string, ArrayBuffer[]>();
  #closed = false;
  #unmapped = false;

  private constructor(spec: RegionSpec, libc: LibcLibrary, mapped: Mapped) {
    const { fd, mapping, mappedBytes, start } = mapped;
    this.spec = spec;
    this.#libc = libc;
    this.#fd = fd;
    this.#guard = {
      fd,
      minimumSize: spec.offset + spec.byteSize,
      // One message, also the one the bridge answers when the core's write finds it shrunk.
      refusal:
        `Invalid shared memory region: '${spec.name}': '${spec.key}' shrank below offset ${spec.offset} + byte_size ${spec.byteSize} since it was registered`,
    };
    this.#mapping = mapping;
    this.#mappedBytes = mappedBytes;
    this.#start = start;
  }

  /**
   * Opens and maps a region, with Triton's errors.
   *
   * @param spec Name, key, offset and size.
   * @returns The mapped region.
   * @throws {InferenceError} (INVALID_ARG) For a bad key, a key naming no object the server may
   *   open, or an offset and size beyond the object; (INTERNAL) when the server cannot open
   *   (out of descriptors) or map it; (UNSUPPORTED) without `--allow-ffi`.
   */
  static open(spec: RegionSpec): SystemRegion {
    const { name, key, offset, byteSize } = spec;
    const problem = keyProblem(key);
    if (problem !== undefined) {
      throw InferenceError.invalidArg(`Unable to open shared memory region: '${key}': ${problem}`);
    }
    if (byteSize <= 0) {
      throw InferenceError.invalidArg(
        `failed to register shared memory region '${name}': invalid args: 'byte_size' must be above 0`,
      );
    }
    let libc: LibcLibrary;
    try {
      libc = openLibc();
    } catch (error) {
      if (error instanceof Deno.errors.NotCapable) {
        throw InferenceError.unsupported(
          "System shared memory needs --allow-ffi (to map regions with shm_open and mmap)",
          { cause: error },
        );
      }
      throw InferenceError.internal((error as Error).message, { cause: error });
    }
    const path = new TextEncoder().encode(`/${key.startsWith("/") ? key.slice(1) : key}\0`);
    const fd = libc.shm_open(path, O_RDWR, 0o600);
    if (fd < 0) {
      const errno = errnoOf(libc);
      // Triton answers INTERNAL; a key naming no object the server may open is the client's.
      throw new InferenceError(
        `Unable to open shared memory region: '${key}': ${errnoText(libc, errno)}`,
        { code: KEY_ERRNOS.has(errno) ? "INVALID_ARG" : "INTERNAL" },
      );
    }
    try {
      const size = objectSize(libc, fd);
      if (size < 0) {
        throw InferenceError.internal(
          `Invalid shared memory region: '${key}': ${errnoText(libc)}`,
        );
      }
      if (offset + byteSize > size) {
        throw InferenceError.invalidArg(
          `failed to register shared memory region '${name}': invalid args: offset ${offset} + byte_size ${byteSize} is beyond the ${size} bytes of '${key}'`,
        );
      }
      const page = Number(libc.sysconf(SC_PAGESIZE)) || 4096;
      const base = offset - (offset % page);
      const start = offset - base;
      const mappedBytes = start + byteSize;
      const mapping = libc.mmap(
        null,
        BigInt(mappedBytes),
        PROT_READ | PROT_WRITE,
        MAP_SHARED,
        fd,
        BigInt(base),
      );
      if (mapping === null || Deno.UnsafePointer.value(mapping) === MAP_FAILED) {
        throw InferenceError.invalidArg(
          `failed to register shared memory region '${name}': unable to map it: ${errnoText(libc)}`,
        );
      }
      return new SystemRegion(spec, libc, { fd, mapping, mappedBytes, start });
    } catch (error) {
      libc.close(fd);
      throw error;
    }
  }

  /**
   * Throws unless the object still holds the registered range: a client may have shrunk it
   * since, and touching a mapped page past its end would raise SIGBUS. One `lseek` per call.
   */
  #check(): void {
    const size = objectSize(this.#libc, this.#fd);
    if (size < 0) {
      throw InferenceError.invalidArg(
        `Invalid shared memory region: '${this.spec.name}': the size of '${this.spec.key}' cannot be read: ${
          errnoText(this.#libc)
        }`,
      );
    }
    if (size < this.#guard.minimumSize) throw InferenceError.invalidArg(this.#guard.refusal);
  }

  /**
   * Holds `byteSize` bytes from `offset` (relative to the region) for one request. The caller
   * checked the bounds (see `SharedMemoryRegistry.acquire`).
   *
   * @param offset Offset in the region.
   * @param byteSize Bytes.
   * @returns The view and its release.
   */
  view(offset: number, byteSize: number): RegionView {
    if (this.#closed) {
      throw InferenceError.notFound(`Unable to find shared memory region: '${this.spec.name}'`);
    }
    this.#check();
    this.#holds++;
    // Each hold gets its own ArrayBuffer: a Worker may take it by transfer without detaching
    // anyone else's view. Released ones are reused: V8 counts each new one as external memory,
    // and megabytes of it per request would trigger a garbage collection per request.
    const key = `${offset}:${byteSize}`;
    const spare = this.#spare.get(key)?.pop();
    const buffer = spare ??
      (byteSize === 0
        ? new ArrayBuffer(0)
        : foreignBuffer(this.#mapping, byteSize, this.#start + offset));
    const bytes = new Uint8Array(buffer);
    let released = false;
    return {
      kind: "system",
      bytes,
      guard: this.#guard,
      check: () => {
        // A view released, or of an unmapped region, must not be used: it says so.
        if (released || this.#unmapped) {
          throw InferenceError.internal(
            `A view of shared memory region '${this.spec.name}' was used after its release`,
          );
        }
        this.#check();
      },
      release: () => {
        if (released) return;
        released = true;
        this.#holds--;
        if (this.#closed) {
          if (this.#holds === 0) this.#unmap();
        } else if (!buffer.detached && byteSize > 0) {
          const list = this.#spare.get(key) ?? [];
          if (list.length < MAX_SPARE) list.push(buffer);
          this.#spare.set(key, list);
        }
      },
    };
  }

  /** Unmaps now, or when the last view is released. Idempotent. */
  close(): void {
    this.#closed = true;
    if (this.#holds === 0) this.#unmap();
  }

  #unmap(): void {
    if (this.#unmapped) return;
    this.#unmapped = true;
    this.#spare.clear();
    this.#libc.munmap(this.#mapping, BigInt(this.#mappedBytes));
    this.#libc.close(this.#fd);
  }
}
