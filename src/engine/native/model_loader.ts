/**
 * Loading a model into the Triton core and unloading it. A load starts the model's instances,
 * warms them up (the shared rule of `../warmup.ts`: the core is never handed a `model_warmup`),
 * opens a channel in the bridge with one consumer loop per instance, writes nothing but an empty
 * version directory into the temporary repository, and loads the generated config into the core
 * (one instance group per instance, so instance thread i feeds instance i). An unload lets the
 * core finish in-flight batches, then closes the channel and stops the instances. Loading a model
 * the core serves reloads it: the core loads the new one beside it and swaps it in once it is
 * ready, and the old one is retired the way an unload ends. That takes a full reload, which the
 * new channel's number in the config guarantees: the core updates a served model in place instead
 * when only its instance groups or version policy changed.
 *
 * @module
 */

import { type GpuInventory, planPlacement } from "../../gpu/devices.ts";
import { toTritonModelConfig } from "../../config/triton_model_config.ts";
import { InferenceError, messageOf, type TritonUnrecoverableError } from "../../errors.ts";
import type { ModelInstance } from "../../instances/instance.ts";
import type { ModelCaller } from "../../callable/types.ts";
import type { Logger } from "../../log.ts";
import type { ModelDefinition, ModelHandle } from "../engine.ts";
import { modelHandle } from "../model_handle.ts";
import { warmUp } from "../warmup.ts";
import { consumeInstance } from "./backend_bridge.ts";
import { connectDoorbell, untilFinalized } from "./doorbell.ts";
import type { NativeLibraries } from "../../native/ffi.ts";
import { BACKEND_NAME } from "../../setup/install.ts";
import { CHANNEL_PARAMETER, repositoryIndex } from "./queries.ts";
import type { ResponseStream } from "./response_stream.ts";
import { SequenceClock } from "../sequences.ts";
import { check, cString } from "./status.ts";
import type { RequestTrace } from "../../telemetry/request_trace.ts";
import type { MetricsBackend } from "../../callable/metrics.ts";
import type { OpenTelemetryTraceConfig } from "../../config/trace_config.ts";

const PARAMETER_STRING = 0;

/** A model the core serves. */
export interface LoadedModel {
  /** What was bound. */
  readonly definition: ModelDefinition;
  /** The handle requests receive, built once. */
  readonly handle: ModelHandle;
  /** The bridge channel its instances are fed through. */
  readonly channel: bigint;
  /** Its started instances, by slot. */
  readonly instances: readonly ModelInstance[];
  /** Settles once every consumer loop has ended. */
  readonly consumers: Promise<void>;
  /** Output names in declared order (responses list them so). */
  readonly order: readonly string[];
  /**
   * For a model with sequence batching, its sequences' idle clocks: the core ends an idle
   * sequence by its own clock without telling the backend, so the engine keeps one beside it
   * and drops the state of a sequence the core ended (see {@linkcode sequenceClockOf}).
   */
  readonly sequences?: SequenceClock;
}

/**
 * How much later than the core the engine lets a sequence's state go: the core's clock starts
 * when the request reaches its scheduler, a little after the engine's, and its reaper may wake a
 * little late. A state is never dropped while the core still runs its sequence.
 */
const IDLE_GRACE_MS = 50;

/**
 * The idle clocks of a model's sequences, which drop a sequence's state on every instance (only
 * the one that ran it holds it) once the core has ended it.
 *
 * @param model The model.
 * @param instances Its instances.
 * @returns The clocks, or `undefined` for a model without sequence batching.
 */
export function sequenceClockOf(
  model: ModelDefinition,
  instances: readonly ModelInstance[],
): SequenceClock | undefined {
  const sequencing = model.config.sequenceBatching;
  if (sequencing === undefined) return undefined;
  return new SequenceClock(
    sequencing.maxSequenceIdleMicroseconds / 1000 + IDLE_GRACE_MS,
    (ids) => {
      for (const instance of instances) instance.dropSequences?.(ids);
    },
  );
}

/** What loading needs from the engine. */
export interface LoaderContext {
  /** The opened libraries. */
  readonly libraries: NativeLibraries;
  /** The `TRITONSERVER_Server*`. */
  readonly server: Deno.PointerValue;
  /** The temporary model repository. */
  readonly repository: string;
  /** The host's GPUs: instances pinned to `cuda:N` become `KIND_GPU` groups on GPU N. */
  readonly gpus: GpuInventory;
  /** Where loads, unloads and failures are logged. */
  readonly logger?: Logger;
  /** The bridge's log target of the engine: the core's lines during a load go there. */
  readonly logTarget: bigint;
  /** Called after a batch failed with a `TritonUnrecoverableError`. */
  readonly onUnrecoverable?: (error: TritonUnrecoverableError) => void;
  /** Aborted when the server gives up on running batches at stop. */
  readonly stopping: AbortSignal;
  /** The stream of a decoupled request, by its {@linkcode STREAM_PARAMETER} number. */
  readonly streamOf: (token: number) => ResponseStream | undefined;
  /** The signal of an ensemble's request, by its token (see `ConsumeOptions.signalOf`). */
  readonly signalOf?: (token: number) => AbortSignal | undefined;
  /** Dispatches the completion events the consumer loops' own calls queued. */
  readonly delivered: () => void;
  /** Runs the calls of the instances' callables to other models (the engine's). */
  readonly caller?: ModelCaller;
  /** The trace of a request the core traces, by the core's trace id. */
  readonly traceOf: (id: bigint) => RequestTrace | undefined;
  /** Where the callables' own metrics go. */
  readonly metrics?: MetricsBackend;
  /** The server's OpenTelemetry export, for instances in Workers. */
  readonly opentelemetry?: OpenTelemetryTraceConfig;
}

/**
 * Stops instances, logging (not throwing) a failure to stop one, and the model's sequence clocks.
 *
 * @param context The engine's context (for its logger).
 * @param name The model's name, for the log.
 * @param held The instances, and the model's sequence clocks if it has them (a
 *   {@linkcode LoadedModel} is one).
 */
export async function disposeInstances(
  context: LoaderContext,
  name: string,
  held: {
    readonly instances: readonly ModelInstance[];
    readonly sequences?: SequenceClock | undefined;
  },
): Promise<void> {
  const { instances, sequences } = held;
  sequences?.close();
  await Promise.all(instances.map(async (instance) => {
    try {
      await instance[Symbol.asyncDispose]();
    } catch (error) {
      context.logger?.warn(
        `Failed to stop instance ${instance.index} of '${name}': ${messageOf(error)}`,
      );
    }
  }));
}

/** Opens a channel for the instances and starts one consumer loop per instance. */
function attach(
  context: LoaderContext,
  model: ModelDefinition,
  instances: readonly ModelInstance[],
): { channel: bigint; consumers: Promise<void> } {
  const { bridge } = context.libraries;
  const channel = bridge.dt_channel_open(instances.length, model.config.decoupled ? 1 : 0);
  connectDoorbell(bridge, channel);
  const consumers = Promise.all(instances.map((instance, slot) =>
    consumeInstance({
      bridge,
      channel,
      slot,
      instance,
      model,
      stopping: context.stopping,
      streamOf: context.streamOf,
      ...(context.signalOf === undefined ? {} : { signalOf: context.signalOf }),
      delivered: context.delivered,
      traceOf: context.traceOf,
      ...(context.gpus.driverLibrary ? { cudaDriverLibrary: context.gpus.driverLibrary } : {}),
      ...(context.logger ? { logger: context.logger } : {}),
      ...(context.onUnrecoverable ? { onUnrecoverable: context.onUnrecoverable } : {}),
    }).catch((error) => {
      context.logger?.error(
        `Instance ${slot} of '${model.name}' stopped serving: ${String(error)}`,
      );
    })
  )).then(() => {});
  return { channel, consumers };
}

/** Loads the model's generated config into the core, its instances fed through `channel`. */
async function loadIntoCore(
  context: LoaderContext,
  model: ModelDefinition,
  channel: bigint,
  count: number,
): Promise<void> {
  const devices = Array.from({ length: count }, (_, i) => model.instances.devices[i] ?? "cpu");
  // One group per instance: Triton initializes them in order, so instance thread i attaches
  // to slot i and feeds our instance i (and its Worker).
  const config = toTritonModelConfig(model, {
    backend: BACKEND_NAME,
    devices,
    gpuCount: context.gpus.devices.length,
    parameters: { [CHANNEL_PARAMETER]: String(channel) },
  });
  // Warm-up ran before the load (see ../warmup.ts): the core must not run it again.
  delete config["model_warmup"];
  await loadConfig(context, model, config);
}

/** Writes the model's (empty) version directory and loads `config` into the core. */
async function loadConfig(
  context: LoaderContext,
  model: ModelDefinition,
  config: Record<string, unknown>,
): Promise<void> {
  const { core, bridge } = context.libraries;
  await Deno.mkdir(`${context.repository}/${model.name}/${model.version}`, { recursive: true });
  config["version_policy"] = { specific: { versions: [model.version] } };
  const parameter = core.TRITONSERVER_ParameterNew(
    cString("config"),
    PARAMETER_STRING,
    cString(JSON.stringify(config)),
  );
  if (parameter === null) {
    throw InferenceError.internal(`Cannot load model '${model.name}': cannot create its config`);
  }
  try {
    const list = new BigUint64Array([BigInt(Deno.UnsafePointer.value(parameter))]);
    check(
      core,
      // Through the bridge: serialized with the process's other server starts, deletes and
      // loads, which touch the same process-wide state in the core (`ffi/dt_server.c`).
      await bridge.dt_server_load(
        context.server,
        cString(model.name),
        list,
        1n,
        context.logTarget,
      ),
      `Failed to load model '${model.name}' version ${model.version}`,
    );
  } finally {
    core.TRITONSERVER_ParameterDelete(parameter);
  }
}

/**
 * Starts a model's instances, warms them up and loads the model into the core.
 *
 * @param context The engine's context.
 * @param model The model.
 * @returns The loaded model.
 * @throws {InferenceError} INTERNAL when an instance fails to start or a strict model's warm-up
 *   fails (the built-in engine's words), or the core's load error.
 */
export async function loadModel(
  context: LoaderContext,
  model: ModelDefinition,
): Promise<LoadedModel> {
  const failed = (error: unknown): InferenceError =>
    InferenceError.internal(
      `Failed to load model '${model.name}' version ${model.version}: ${messageOf(error)}`,
      { cause: error },
    );
  planPlacement(model.name, model.instances.devices, {
    gpus: context.gpus,
    logger: context.logger,
  });
  let instances: ModelInstance[];
  try {
    instances = await model.instances.start(model, {
      gpus: context.gpus,
      ...(context.caller === undefined ? {} : { caller: context.caller }),
      ...(context.metrics === undefined ? {} : { metrics: context.metrics }),
      ...(context.opentelemetry === undefined ? {} : { opentelemetry: context.opentelemetry }),
    });
  } catch (error) {
    throw failed(error);
  }
  try {
    await warmUp(model, instances, context.logger);
  } catch (error) {
    await disposeInstances(context, model.name, { instances });
    throw failed(error);
  }
  const { channel, consumers } = attach(context, model, instances);
  try {
    await loadIntoCore(context, model, channel, instances.length);
  } catch (error) {
    context.libraries.bridge.dt_channel_close(channel);
    await consumers;
    await disposeInstances(context, model.name, { instances });
    throw error;
  }
  const sequences = sequenceClockOf(model, instances);
  return {
    definition: model,
    handle: modelHandle(model),
    channel,
    instances,
    consumers,
    order: model.outputs.map((output) => output.name),
    ...(sequences === undefined ? {} : { sequences }),
  };
}

/**
 * Loads an ensemble into the core: its config alone (platform `ensemble`), which the core's own
 * ensemble scheduler serves by sending each step's request to the step's model; it has no
 * instances and no channel.
 *
 * @param context The engine's context.
 * @param model The ensemble.
 * @returns The loaded model.
 * @throws {InferenceError} The core's load error (a step's model missing, tensors that do not
 *   match the step's model).
 */
export async function loadEnsemble(
  context: LoaderContext,
  model: ModelDefinition,
): Promise<LoadedModel> {
  await loadConfig(context, model, toTritonModelConfig(model)).catch((error) => {
    // The core ends an ensemble's load error with a newline; the message ends with its reason.
    if (!(error instanceof InferenceError)) throw error;
    throw new InferenceError(error.message.trimEnd(), { code: error.code, cause: error });
  });
  return {
    definition: model,
    handle: modelHandle(model),
    channel: 0n,
    instances: [],
    consumers: Promise.resolve(),
    order: model.outputs.map((output) => output.name),
  };
}

/**
 * Unloads a model from the core, which waits for its in-flight batches, and closes its channel;
 * its instances are stopped next ({@linkcode disposeInstances}).
 *
 * @param context The engine's context.
 * @param loaded The loaded model.
 * @throws {InferenceError} The core's unload error.
 */
export async function unloadFromCore(context: LoaderContext, loaded: LoadedModel): Promise<void> {
  const { core, bridge } = context.libraries;
  const { name } = loaded.definition;
  check(
    core,
    await core.TRITONSERVER_ServerUnloadModel(context.server, cString(name)),
    `Failed to unload model '${name}'`,
  );
  // Triton finalizes the instances once in-flight batches are done; the consumers then end.
  await untilFinalized(loaded.consumers, {
    id: loaded.channel,
    slots: loaded.instances.length,
  });
  bridge.dt_channel_close(loaded.channel);
  // The core's unload does not wait for the model to be unloaded, and its state leaves
  // UNLOADING a moment after the instances are finalized: wait, so that the index says
  // UNAVAILABLE once the unload resolved, as on the built-in engine.
  for (let waited = 0; waited < UNLOAD_WAIT_MS; waited += 5) {
    const entry = repositoryIndex(core, context.server, false)
      .find((model) => model.name === name && model.version === String(loaded.definition.version));
    if (entry?.state !== "UNLOADING") break;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * Retires a model the core replaced (a load of its name that reloaded it): the core finalizes
 * its instances once its in-flight batches are done; then its channel closes and its instances
 * stop.
 *
 * @param context The engine's context.
 * @param replaced The model the core no longer serves.
 */
export async function retire(context: LoaderContext, replaced: LoadedModel): Promise<void> {
  await untilFinalized(replaced.consumers, {
    id: replaced.channel,
    slots: replaced.instances.length,
  });
  context.libraries.bridge.dt_channel_close(replaced.channel);
  await disposeInstances(context, replaced.definition.name, replaced);
}

/** How long an unload waits for the core to report the model unloaded, in milliseconds. */
const UNLOAD_WAIT_MS = 5000;
