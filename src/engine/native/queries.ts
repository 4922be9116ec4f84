/**
 * The Triton-core engine's queries: liveness and readiness, server and model metadata, model
 * config, statistics, the repository index and the Prometheus metrics, each one synchronous C
 * call whose `TRITONSERVER_Message` is read as JSON (or whose metrics text is copied out).
 *
 * @module
 */

import type {
  ModelMetadata,
  ModelStatistics,
  RepositoryIndexEntry,
  ServerMetadata,
  TritonModelConfigJson,
} from "../engine.ts";
import type { CoreLibrary } from "../../native/ffi.ts";
import { check, cString, pointerOf, takeError, takeMessageJson } from "./status.ts";

/** The config parameter that names a model load's channel, hidden from `modelConfig`. */
export const CHANNEL_PARAMETER = "denotriton_channel";

/** A model version the core is asked about. */
export interface CoreModelRef {
  /** Model name. */
  readonly name: string;
  /**
   * Model version; chosen by the version policy when undefined.
   *
   * @default {undefined}
   */
  readonly version?: number | undefined;
}

function message(core: CoreLibrary, call: (slot: BigUint64Array) => Deno.PointerValue): unknown {
  const slot = new BigUint64Array(1);
  check(core, call(slot));
  return takeMessageJson(core, pointerOf(slot));
}

/**
 * Whether the core reports the server live.
 *
 * @param core The core library.
 * @param server The server.
 * @returns False when the call fails too.
 */
export function serverIsLive(core: CoreLibrary, server: Deno.PointerValue): boolean {
  const live = new Uint8Array(1);
  return takeError(core, core.TRITONSERVER_ServerIsLive(server, live)) === undefined &&
    live[0] === 1;
}

/**
 * Whether the core reports the server ready (with strict readiness: every model ready).
 *
 * @param core The core library.
 * @param server The server.
 * @returns False when the call fails too.
 */
export function serverIsReady(core: CoreLibrary, server: Deno.PointerValue): boolean {
  const ready = new Uint8Array(1);
  return takeError(core, core.TRITONSERVER_ServerIsReady(server, ready)) === undefined &&
    ready[0] === 1;
}

/**
 * Whether the core reports a model version ready.
 *
 * @param core The core library.
 * @param server The server.
 * @param model The model's name and version.
 * @returns False for unknown models.
 */
export function modelIsReady(
  core: CoreLibrary,
  server: Deno.PointerValue,
  model: CoreModelRef,
): boolean {
  const { name, version } = model;
  const ready = new Uint8Array(1);
  const failure = takeError(
    core,
    core.TRITONSERVER_ServerModelIsReady(server, cString(name), BigInt(version ?? -1), ready),
  );
  return failure === undefined && ready[0] === 1;
}

/**
 * The core's server metadata.
 *
 * @param core The core library.
 * @param server The server.
 * @returns `{name, version, extensions}` as the core reports them.
 */
export function serverMetadata(core: CoreLibrary, server: Deno.PointerValue): ServerMetadata {
  return message(core, (slot) => core.TRITONSERVER_ServerMetadata(server, slot)) as ServerMetadata;
}

/**
 * The core's model metadata.
 *
 * @param core The core library.
 * @param server The server.
 * @param model The model's name and version.
 * @returns `{name, versions, platform, inputs, outputs}`.
 * @throws {InferenceError} The core's error for unknown models.
 */
export function modelMetadata(
  core: CoreLibrary,
  server: Deno.PointerValue,
  model: CoreModelRef,
): ModelMetadata {
  const { name, version } = model;
  return message(
    core,
    (slot) =>
      core.TRITONSERVER_ServerModelMetadata(server, cString(name), BigInt(version ?? -1), slot),
  ) as ModelMetadata;
}

/**
 * The core's normalised model config, without DenoTriton's internal parameter.
 *
 * @param core The core library.
 * @param server The server.
 * @param model The model's name and version.
 * @returns The config JSON.
 * @throws {InferenceError} The core's error for unknown models.
 */
export function modelConfig(
  core: CoreLibrary,
  server: Deno.PointerValue,
  model: CoreModelRef,
): TritonModelConfigJson {
  const { name, version } = model;
  const config = message(
    core,
    (slot) =>
      core.TRITONSERVER_ServerModelConfig(server, cString(name), BigInt(version ?? -1), 1, slot),
  ) as TritonModelConfigJson;
  const parameters = config["parameters"] as Record<string, unknown> | undefined;
  if (parameters !== undefined) delete parameters[CHANNEL_PARAMETER];
  return config;
}

/**
 * The core's statistics.
 *
 * @param core The core library.
 * @param server The server.
 * @param model The model's name and version; every model when its name is undefined.
 * @returns `{model_stats: [...]}`.
 * @throws {InferenceError} The core's error (INVALID_ARG) for models not loaded.
 */
export function modelStatistics(
  core: CoreLibrary,
  server: Deno.PointerValue,
  model: { readonly name?: string | undefined; readonly version?: number | undefined } = {},
): { model_stats: ModelStatistics[] } {
  const { name, version } = model;
  return message(
    core,
    (slot) =>
      core.TRITONSERVER_ServerModelStatistics(
        server,
        cString(name ?? ""),
        BigInt(version ?? -1),
        slot,
      ),
  ) as { model_stats: ModelStatistics[] };
}

/**
 * The core's repository index.
 *
 * @param core The core library.
 * @param server The server.
 * @param readyOnly Only ready versions.
 * @returns The entries.
 */
export function repositoryIndex(
  core: CoreLibrary,
  server: Deno.PointerValue,
  readyOnly: boolean,
): RepositoryIndexEntry[] {
  return message(
    core,
    (slot) => core.TRITONSERVER_ServerModelIndex(server, readyOnly ? 1 : 0, slot),
  ) as RepositoryIndexEntry[];
}

/**
 * The core's Prometheus metrics.
 *
 * @param core The core library.
 * @param server The server.
 * @returns The text exposition.
 */
export function metricsText(core: CoreLibrary, server: Deno.PointerValue): string {
  const slot = new BigUint64Array(1);
  check(core, core.TRITONSERVER_ServerMetrics(server, slot));
  const metrics = pointerOf(slot);
  try {
    const base = new BigUint64Array(1);
    const size = new BigUint64Array(1);
    check(core, core.TRITONSERVER_MetricsFormatted(metrics, 0, base, size));
    const length = Number(size[0]);
    return length === 0 ? "" : new TextDecoder().decode(
      new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(pointerOf(base)!, length)),
    );
  } finally {
    const failure = core.TRITONSERVER_MetricsDelete(metrics);
    if (failure !== null) core.TRITONSERVER_ErrorDelete(failure);
  }
}
