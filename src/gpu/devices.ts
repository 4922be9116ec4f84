/**
 * Device names and where instances run: `"cpu"` or a GPU (`"cuda:N"`, with PyTriton's `"cuda"`
 * and `"gpu"`/`"gpu:N"` accepted), the GPUs a host has ({@linkcode GpuInventory}), and the one
 * placement rule both engines follow: an instance pinned to `cuda:N` runs on GPU N when the host
 * has GPUs (N beyond them is an error), and on the CPU when it has none, so a model written for
 * GPUs still serves (and its tests run) on a CPU-only host.
 *
 * @module
 */

import { InferenceError, TritonValidationError } from "../errors.ts";

/** One GPU, as the CUDA driver reports it. */
export interface GpuDevice {
  /** The CUDA device ordinal, N of `cuda:N` (after `CUDA_VISIBLE_DEVICES`). */
  readonly index: number;
  /** The product name, e.g. `"NVIDIA H100 80GB HBM3"`. */
  readonly name: string;
  /** Total device memory in bytes. */
  readonly totalMemoryBytes: number;
  /** Compute capability `[major, minor]`. */
  readonly computeCapability: readonly [number, number];
  /** The device UUID as `nvidia-smi -L` prints it (`GPU-…`), or `""` when the driver has none. */
  readonly uuid: string;
}

/** The GPUs instances may be placed on. */
export interface GpuInventory {
  /** The GPUs, by index; empty on a host without GPUs. */
  readonly devices: readonly GpuDevice[];
  /**
   * The CUDA driver library the devices were found through: each GPU Worker opens it to make its
   * device current. Without it, Workers pinned to a GPU fail to load.
   */
  readonly driverLibrary?: string;
  /** Why `devices` is empty (for the log line), e.g. that the driver cannot be loaded. */
  readonly reason?: string;
}

/** A device name, parsed. */
export interface ParsedDevice {
  /** The canonical name: `"cpu"` or `"cuda:N"`. */
  readonly device: string;
  /** `"cpu"` or `"gpu"`. */
  readonly kind: "cpu" | "gpu";
  /** The GPU index, -1 for the CPU. */
  readonly id: number;
}

/** The device names accepted, for error messages. */
export const DEVICE_NAMES = `"cpu", "cuda", "cuda:N", "gpu" or "gpu:N"`;

const DEVICE = /^(?:cpu|(?:cuda|gpu)(?::(\d{1,9}))?)$/;

/**
 * Parses a device name: `"cpu"`, `"cuda:N"`, `"cuda"` (PyTriton's and PyTorch's name for
 * `cuda:0`), `"gpu"` or `"gpu:N"`.
 *
 * @param device The name.
 * @returns The canonical name, kind and GPU index; `undefined` for a name that is none of these.
 *
 * @example Names
 * ```ts
 * import { parseDevice } from "./devices.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(parseDevice("cuda"), { device: "cuda:0", kind: "gpu", id: 0 });
 * assert.deepEqual(parseDevice("gpu:1"), { device: "cuda:1", kind: "gpu", id: 1 });
 * assert.deepEqual(parseDevice("cpu"), { device: "cpu", kind: "cpu", id: -1 });
 * assert.equal(parseDevice("gpu0"), undefined);
 * ```
 */
export function parseDevice(device: string): ParsedDevice | undefined {
  const match = DEVICE.exec(device);
  if (match === null) return undefined;
  if (device === "cpu") return { device: "cpu", kind: "cpu", id: -1 };
  const id = Number(match[1] ?? 0);
  return { device: `cuda:${id}`, kind: "gpu", id };
}

/**
 * Parses a list of device names, for an instance provider's `devices` option.
 *
 * @param devices The names.
 * @param what What is being created, for the message ("Cannot create <what>: ...").
 * @returns The canonical names (`"cpu"` or `"cuda:N"`).
 * @throws {TritonValidationError} For a name that is not a device.
 *
 * @example Name a GPU's index; refuse an unknown device
 * ```ts
 * import { parseDevices } from "./devices.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(parseDevices(["cuda", "cpu"], "instances"), ["cuda:0", "cpu"]);
 * assert.throws(() => parseDevices(["tpu"], "instances"), {
 *   message: `Cannot create instances: invalid device "tpu", expected "cpu", "cuda", "cuda:N", "gpu" or "gpu:N"`,
 * });
 * ```
 */
export function parseDevices(devices: readonly string[], what: string): string[] {
  return devices.map((device) => {
    const parsed = parseDevice(device);
    if (parsed === undefined) {
      throw new TritonValidationError(
        `Cannot create ${what}: invalid device ${JSON.stringify(device)}, expected ${DEVICE_NAMES}`,
      );
    }
    return parsed.device;
  });
}

/**
 * Where each instance runs: the GPU index for an instance pinned to a GPU on a host with
 * `gpuCount` GPUs, `undefined` for the CPU. With no GPUs, every instance runs on the CPU.
 *
 * @param devices The instances' device names, by index.
 * @param gpuCount How many GPUs the host has.
 * @returns One GPU index or `undefined` per instance.
 * @throws {TritonValidationError} For a device name that is not one, or (with GPUs) a GPU
 *   index beyond them.
 *
 * @example One GPU
 * ```ts
 * import { placeInstances } from "./devices.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(placeInstances(["cuda:0", "cpu", "cuda"], 1), [0, undefined, 0]);
 * assert.deepEqual(placeInstances(["cuda:1"], 0), [undefined]);
 * assert.throws(() => placeInstances(["cuda:0", "cuda:1"], 1), {
 *   message: "instance 1 is pinned to cuda:1 but this host has 1 GPU (cuda:0)",
 * });
 * ```
 */
export function placeInstances(
  devices: readonly string[],
  gpuCount: number,
): (number | undefined)[] {
  return devices.map((device, index) => {
    const parsed = parseDevice(device);
    if (parsed === undefined) {
      throw new TritonValidationError(
        `instance ${index} has an invalid device ${
          JSON.stringify(device)
        }, expected ${DEVICE_NAMES}`,
      );
    }
    if (parsed.kind === "cpu" || gpuCount === 0) return undefined;
    if (parsed.id >= gpuCount) {
      const range = gpuCount === 1 ? "cuda:0" : `cuda:0 to cuda:${gpuCount - 1}`;
      throw new TritonValidationError(
        `instance ${index} is pinned to ${parsed.device} but this host has ${gpuCount} GPU${
          gpuCount === 1 ? "" : "s"
        } (${range})`,
      );
    }
    return parsed.id;
  });
}

/** Where {@linkcode planPlacement} logs. */
export interface PlacementLogger {
  /** Logs that GPU instances run on the CPU. */
  info(message: string): void;
}

/** The host's GPUs {@linkcode planPlacement} places on, and where it logs. */
export interface PlacementOptions {
  /** The host's GPUs. */
  readonly gpus: GpuInventory;
  /**
   * Where the line goes.
   *
   * @default {undefined}
   */
  readonly logger?: PlacementLogger | undefined;
}

/**
 * The engines' check when a model loads: places its instances on `gpus`, and logs one line when
 * some are pinned to a GPU but the host has none (they run on the CPU).
 *
 * @param modelName The model, for messages.
 * @param devices The instances' device names, by index.
 * @param options The host's GPUs, and where the line goes.
 * @returns One GPU index or `undefined` per instance.
 * @throws {InferenceError} `INVALID_ARG` "Cannot load model '…': instance N is pinned to cuda:M
 *   but this host has …"
 *
 * @example A CPU host
 * ```ts
 * import { planPlacement } from "./devices.ts";
 * import assert from "node:assert/strict";
 *
 * const lines: string[] = [];
 * const placed = planPlacement("Linear", ["cuda:0", "cuda:1"], {
 *   gpus: { devices: [], reason: "the CUDA driver cannot be loaded" },
 *   logger: { info: (line) => lines.push(line) },
 * });
 * assert.deepEqual(placed, [undefined, undefined]);
 * assert.deepEqual(lines, [
 *   "Model 'Linear': instances pinned to cuda:0, cuda:1 run on the CPU: no GPUs (the CUDA driver cannot be loaded)",
 * ]);
 * ```
 */
export function planPlacement(
  modelName: string,
  devices: readonly string[],
  options: PlacementOptions,
): (number | undefined)[] {
  const { gpus, logger } = options;
  let placed: (number | undefined)[];
  try {
    placed = placeInstances(devices, gpus.devices.length);
  } catch (error) {
    throw new InferenceError(`Cannot load model '${modelName}': ${(error as Error).message}`, {
      code: "INVALID_ARG",
      cause: error,
    });
  }
  if (gpus.devices.length === 0) {
    const pinned = devices.filter((device) => parseDevice(device)?.kind === "gpu");
    if (pinned.length > 0) {
      logger?.info(
        `Model '${modelName}': instances pinned to ${
          pinned.map((device) => parseDevice(device)!.device).join(", ")
        } run on the CPU: no GPUs (${gpus.reason ?? "none given"})`,
      );
    }
  }
  return placed;
}

/**
 * One line describing GPUs, e.g. `cuda:0 NVIDIA H100 80GB HBM3 (79.1 GiB, sm_90)`.
 *
 * @param gpus The GPUs.
 * @returns The description, devices separated by `; `.
 *
 * @example Describe one GPU's memory and architecture
 * ```ts
 * import { describeGpus } from "./devices.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   describeGpus([{ index: 0, name: "G", totalMemoryBytes: 2 ** 34, computeCapability: [9, 0], uuid: "" }]),
 *   "cuda:0 G (16.0 GiB, sm_90)",
 * );
 * ```
 */
export function describeGpus(gpus: readonly GpuDevice[]): string {
  return gpus.map((gpu) =>
    `cuda:${gpu.index} ${gpu.name} (${(gpu.totalMemoryBytes / 2 ** 30).toFixed(1)} GiB, sm_${
      gpu.computeCapability.join("")
    })`
  ).join("; ");
}
