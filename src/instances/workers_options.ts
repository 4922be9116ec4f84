/**
 * The options of {@linkcode workers} and what its Workers share: where they log, and the bytes
 * their tensors cost. Both the provider (`workers.ts`) and each instance (`worker_instance.ts`)
 * read them.
 *
 * @module
 */

/** Where {@linkcode workers} logs crashes and restarts (a `Logger` fits). */
export interface WorkersLogger {
  /** Logs a restart. */
  info(message: string): void;
  /** Logs a crash or a failed restart. */
  error(message: string): void;
}

/** Options of {@linkcode workers}. */
export interface WorkersOptions {
  /**
   * One instance per device: `"cpu"`, `"cuda:N"`, `"cuda"` (`"cuda:0"`), `"gpu"` or `"gpu:N"`.
   * A Worker pinned to a GPU has that GPU current on its thread before the factory runs (see
   * `WorkerContext.gpu`); on a host without GPUs it runs on the CPU. Takes precedence over
   * `count`.
   *
   * @default {undefined}
   */
  devices?: readonly string[];
  /**
   * How many CPU instances, when `devices` is not given.
   *
   * @default {1}
   */
  count?: number;
  /**
   * The Workers' Deno permissions. Anything but `"inherit"` needs `--unstable-worker-options`.
   * With the Triton engine the Workers read inputs in place through FFI, so they need
   * `ffi: true`.
   *
   * @default {"inherit"}
   */
  permissions?: Deno.PermissionOptions;
  /**
   * How many times a crashed instance is restarted in a row before it stays down.
   *
   * @default {3}
   */
  maxRestarts?: number;
  /**
   * Passed to every factory as `ctx.data` (structured-cloned; a `SharedArrayBuffer` is shared).
   *
   * @default {undefined}
   */
  data?: unknown;
  /**
   * Where restarts are logged.
   *
   * @default {a stderr Logger}
   */
  logger?: WorkersLogger;
}

/** Bytes the tensors of all batches cost on their way to and from the Workers. */
export interface WorkerTransferStats {
  /** Batches sent. */
  batches: number;
  /** Requests sent. */
  requests: number;
  /**
   * Input bytes copied: views into larger buffers, BYTES packing, and every tensor of a small
   * batch, which crosses through shared memory instead of a message.
   */
  inputCopiedBytes: number;
  /** Input bytes moved by transfer or shared (no copy). */
  inputMovedBytes: number;
  /** Input bytes passed as native addresses and read in place (Triton engine). */
  inputNativeBytes: number;
  /**
   * Output bytes the Workers copied: views into larger buffers, BYTES packing, and every tensor
   * of small results, which cross through shared memory instead of a message.
   */
  outputCopiedBytes: number;
  /** Output bytes moved by transfer (no copy). */
  outputMovedBytes: number;
}
