/**
 * Triton's model-config JSON (the protobuf JSON of `model_config.proto`, proto field names),
 * generated from a bound model. The Triton-core engine loads models with it; the built-in engine
 * answers `GET /v2/models/{m}/config` with its normalised form, which is what tritonclient,
 * perf_analyzer and PyTriton's client read.
 *
 * @module
 */

import { configName, toDType } from "../tensor/dtype.ts";
import type { ModelWarmup, ResolvedQueuePolicy } from "./model_config.ts";
import type { ResolvedSequenceBatching, ResolvedSequenceControl } from "./sequence_batching.ts";
import type { ResolvedTensorSpec } from "./tensor_spec.ts";
import { placeInstances } from "../gpu/devices.ts";
import { ensembleSchedulingJson } from "./ensemble.ts";
import type { ModelInfo } from "./model_info.ts";

/** Triton's model-config JSON; kept loose because Triton adds fields across versions. */
export type TritonModelConfigJson = Record<string, unknown>;

/** Options of {@linkcode toTritonModelConfig}. */
export interface TritonModelConfigOptions {
  /**
   * The `backend` field.
   *
   * @default {"denotriton"}
   */
  backend?: string;
  /**
   * The instances' devices, by index (`"cpu"` or `"cuda:N"`, see `parseDevice`).
   *
   * @default {["cpu"]}
   */
  devices?: readonly string[];
  /**
   * How many GPUs the host has: instances pinned to `cuda:N` are `KIND_GPU` with `gpus: [N]`
   * when there are any, `KIND_CPU` when there are none (see `placeInstances`).
   *
   * @default {0}
   */
  gpuCount?: number;
  /**
   * Fill in every field Triton prints after normalising a config (for the built-in engine's
   * `/config` answer).
   *
   * @default {false}
   */
  normalized?: boolean;
  /**
   * Extra `parameters` entries, as strings.
   *
   * @default {{}}
   */
  parameters?: Readonly<Record<string, string>>;
}

function queuePolicyJson(policy: ResolvedQueuePolicy): Record<string, unknown> {
  return {
    timeout_action: policy.timeoutAction,
    default_timeout_microseconds: policy.defaultTimeoutMicroseconds,
    allow_timeout_override: policy.allowTimeoutOverride,
    max_queue_size: policy.maxQueueSize,
  };
}

/** Triton's `ModelWarmup`; `input_data_file` keeps the user's path (the engine relocates it). */
function warmupJson(stage: ModelWarmup): Record<string, unknown> {
  return {
    name: stage.name,
    batch_size: stage.batchSize,
    count: stage.count ?? 1,
    inputs: Object.fromEntries(
      Object.entries(stage.inputs).map(([name, input]) => {
        const json: Record<string, unknown> = {
          data_type: configName(toDType(input.dtype)),
          dims: [...input.shape],
        };
        if (input.inputDataFile !== undefined) json["input_data_file"] = input.inputDataFile;
        else if (input.randomData) json["random_data"] = true;
        else json["zero_data"] = true;
        return [name, json];
      }),
    ),
  };
}

function tensorJson(
  spec: ResolvedTensorSpec,
  kind: "input" | "output",
  normalized: boolean,
): Record<string, unknown> {
  const json: Record<string, unknown> = {
    name: spec.name,
    data_type: configName(spec.dtype),
    dims: [...spec.shape],
  };
  if (kind === "input" && (spec.optional || normalized)) json["optional"] = spec.optional;
  if (normalized) {
    if (kind === "input") {
      Object.assign(json, {
        format: "FORMAT_NONE",
        is_shape_tensor: false,
        allow_ragged_batch: false,
        is_non_linear_format_io: false,
      });
    } else {
      Object.assign(json, {
        label_filename: "",
        is_shape_tensor: false,
        is_non_linear_format_io: false,
      });
    }
  }
  return json;
}

const CONTROL_KINDS = {
  start: "CONTROL_SEQUENCE_START",
  end: "CONTROL_SEQUENCE_END",
  ready: "CONTROL_SEQUENCE_READY",
} as const;

const FALSE_TRUE_FIELDS = {
  int32: "int32_false_true",
  float32: "fp32_false_true",
  bool: "bool_false_true",
} as const;

function controlJson(
  kind: keyof typeof CONTROL_KINDS,
  control: ResolvedSequenceControl,
  normalized: boolean,
): Record<string, unknown> {
  const values = control.dtype === "bool" ? control.falseTrue.map(Boolean) : [...control.falseTrue];
  const entry: Record<string, unknown> = { kind: CONTROL_KINDS[kind] };
  if (normalized) {
    // Triton prints every field of the message, the unset lists empty.
    Object.assign(entry, { int32_false_true: [], fp32_false_true: [], bool_false_true: [] });
  }
  entry[FALSE_TRUE_FIELDS[control.dtype]] = values;
  if (normalized) entry["data_type"] = "TYPE_INVALID";
  return { name: control.name, control: [entry] };
}

/** Triton's `ModelSequenceBatching`; implicit states start as zeros (an `initial_state`). */
function sequenceBatchingJson(
  sequence: ResolvedSequenceBatching,
  maxBatchSize: number,
  normalized: boolean,
): Record<string, unknown> {
  const controls: Record<string, unknown>[] = [];
  for (const kind of ["start", "end", "ready"] as const) {
    const control = sequence[kind];
    if (control !== undefined) controls.push(controlJson(kind, control, normalized));
  }
  const corrid = sequence.correlationId;
  if (corrid !== undefined) {
    const control: Record<string, unknown> = { kind: "CONTROL_SEQUENCE_CORRID" };
    if (normalized) {
      Object.assign(control, { int32_false_true: [], fp32_false_true: [], bool_false_true: [] });
    }
    control["data_type"] = configName(corrid.dtype);
    controls.push({ name: corrid.name, control: [control] });
  }
  // In the order the core prints them: the strategy first.
  const json: Record<string, unknown> = {};
  if (sequence.strategy === "oldest") {
    // The core fills in `[max_batch_size]` for no preferred size, as for the dynamic batcher.
    const preferred = normalized && sequence.preferredBatchSize.length === 0 && maxBatchSize > 0
      ? [maxBatchSize]
      : sequence.preferredBatchSize;
    json["oldest"] = {
      max_candidate_sequences: sequence.maxCandidateSequences,
      preferred_batch_size: [...preferred],
      max_queue_delay_microseconds: sequence.maxQueueDelayMicroseconds,
      preserve_ordering: sequence.preserveOrdering,
    };
  } else {
    json["direct"] = {
      max_queue_delay_microseconds: sequence.maxQueueDelayMicroseconds,
      minimum_slot_utilization: sequence.minimumSlotUtilization,
    };
  }
  json["max_sequence_idle_microseconds"] = sequence.maxSequenceIdleMicroseconds;
  json["control_input"] = controls;
  json["state"] = sequence.states.map((state) => {
    const dims = [...state.shape];
    // The core starts variable dims at 1 too; an initial state's dims must be fixed. It prints
    // these 64-bit dims as strings, unlike the others.
    const initialDims = dims.map((dim) => dim === -1 ? 1 : dim);
    const entry: Record<string, unknown> = {
      input_name: state.inputName,
      output_name: state.outputName,
      data_type: configName(state.dtype),
      dims,
      initial_state: [{
        data_type: configName(state.dtype),
        dims: normalized ? initialDims.map(String) : initialDims,
        name: "zero",
        zero_data: true,
      }],
    };
    if (normalized) {
      Object.assign(entry, { use_same_buffer_for_input_output: false, use_growable_memory: false });
    }
    return entry;
  });
  if (normalized) json["iterative_sequence"] = false;
  return json;
}

/**
 * One group per instance (count 1, in device order), on both engines: Triton initializes the
 * groups in order, so the core's instance i is our instance i (and its Worker).
 */
function instanceGroups(
  name: string,
  devices: readonly string[],
  gpuCount: number,
  normalized: boolean,
): Record<string, unknown>[] {
  return placeInstances(devices, gpuCount).map((gpu, index) => {
    const group = {
      name: `${name}_${index}`,
      kind: gpu === undefined ? "KIND_CPU" : "KIND_GPU",
      count: 1,
      gpus: gpu === undefined ? [] : [gpu],
    };
    return normalized
      ? { ...group, secondary_devices: [], profile: [], passive: false, host_policy: "" }
      : group;
  });
}

/**
 * Builds Triton's model-config JSON for a bound model.
 *
 * @param model The bound model.
 * @param options Backend name, devices, GPU count and whether to normalise.
 * @returns The config JSON object.
 * @throws {TritonValidationError} For an instance pinned to a GPU beyond `gpuCount`.
 *
 * @example AddSub
 * ```ts
 * import { toTritonModelConfig } from "./triton_model_config.ts";
 * import { resolveModelConfig } from "./model_config.ts";
 * import assert from "node:assert/strict";
 *
 * const json = toTritonModelConfig({
 *   name: "AddSub", version: 1, strict: false,
 *   inputs: [{ name: "a", dtype: "float32", shape: [-1], optional: false }],
 *   outputs: [{ name: "add", dtype: "float32", shape: [-1], optional: false }],
 *   config: resolveModelConfig({ maxBatchSize: 8 }),
 * });
 * assert.equal(json.max_batch_size, 8);
 * assert.deepEqual(json.input, [{ name: "a", data_type: "TYPE_FP32", dims: [-1] }]);
 * assert.deepEqual(json.dynamic_batching, {});
 * ```
 *
 * @example Instance groups on a host with two GPUs
 * ```ts
 * import { toTritonModelConfig } from "./triton_model_config.ts";
 * import { resolveModelConfig } from "./model_config.ts";
 * import assert from "node:assert/strict";
 *
 * const model = {
 *   name: "Linear", version: 1, strict: false, inputs: [], outputs: [],
 *   config: resolveModelConfig({}),
 * };
 * const json = toTritonModelConfig(model, { devices: ["cuda:1", "cpu"], gpuCount: 2 });
 * assert.deepEqual(json.instance_group, [
 *   { name: "Linear_0", kind: "KIND_GPU", count: 1, gpus: [1] },
 *   { name: "Linear_1", kind: "KIND_CPU", count: 1, gpus: [] },
 * ]);
 * ```
 */
export function toTritonModelConfig(
  model: ModelInfo,
  options: TritonModelConfigOptions = {},
): TritonModelConfigJson {
  const normalized = options.normalized ?? false;
  if (model.ensemble !== undefined) return ensembleConfig(model, normalized);
  const { config } = model;
  const json: TritonModelConfigJson = {
    name: model.name,
    backend: options.backend ?? "denotriton",
    max_batch_size: config.maxBatchSize,
    input: model.inputs.map((spec) => tensorJson(spec, "input", normalized)),
    output: model.outputs.map((spec) => tensorJson(spec, "output", normalized)),
    instance_group: instanceGroups(
      model.name,
      options.devices ?? ["cpu"],
      options.gpuCount ?? 0,
      normalized,
    ),
  };
  if (config.sequenceBatching !== undefined) {
    json["sequence_batching"] = sequenceBatchingJson(
      config.sequenceBatching,
      config.maxBatchSize,
      normalized,
    );
  } else if (config.batching) {
    const b = config.batcher;
    const batcher: Record<string, unknown> = {};
    const preferred = normalized && b.preferredBatchSize.length === 0
      ? [config.maxBatchSize]
      : b.preferredBatchSize;
    if (preferred.length > 0) batcher["preferred_batch_size"] = [...preferred];
    if (b.maxQueueDelayMicroseconds > 0 || normalized) {
      batcher["max_queue_delay_microseconds"] = b.maxQueueDelayMicroseconds;
    }
    if (b.preserveOrdering || normalized) batcher["preserve_ordering"] = b.preserveOrdering;
    if (b.priorityLevels > 0 || normalized) batcher["priority_levels"] = b.priorityLevels;
    if (b.defaultPriorityLevel > 0 || normalized) {
      batcher["default_priority_level"] = b.defaultPriorityLevel;
    }
    // Like Triton's normalised config: message fields appear only when set.
    if (b.hasDefaultQueuePolicy) {
      batcher["default_queue_policy"] = queuePolicyJson(b.defaultQueuePolicy);
    }
    if (b.priorityQueuePolicy.size > 0 || normalized) {
      batcher["priority_queue_policy"] = Object.fromEntries(
        [...b.priorityQueuePolicy].map((
          [level, policy],
        ) => [String(level), queuePolicyJson(policy)]),
      );
    }
    json["dynamic_batching"] = batcher;
  }
  if (config.decoupled) json["model_transaction_policy"] = { decoupled: true };
  if (config.responseCache) json["response_cache"] = { enable: true };
  const parameters = Object.entries(options.parameters ?? {});
  if (parameters.length > 0 || normalized) {
    json["parameters"] = Object.fromEntries(
      parameters.map(([key, value]) => [key, { string_value: value }]),
    );
  }
  if (config.warmup.length > 0) json["model_warmup"] = config.warmup.map(warmupJson);
  if (normalized) {
    Object.assign(json, {
      platform: "",
      // Each bound version is served as given, as the Triton-core engine loads it.
      version_policy: { specific: { versions: [model.version] } },
      batch_input: [],
      batch_output: [],
      optimization: {
        priority: "PRIORITY_DEFAULT",
        input_pinned_memory: { enable: true },
        output_pinned_memory: { enable: true },
        gather_kernel_buffer_threshold: 0,
        eager_batching: false,
      },
      default_model_filename: "",
      cc_model_filenames: {},
      metric_tags: {},
      model_warmup: config.warmup.map(warmupJson),
      runtime: "",
    });
  }
  return json;
}

/**
 * An ensemble's config: platform `ensemble`, its steps in `ensemble_scheduling` (one of the
 * scheduling choices, so no `dynamic_batching`), no backend and no instance groups; normalised, the
 * fields the core prints for one.
 */
function ensembleConfig(model: ModelInfo, normalized: boolean): TritonModelConfigJson {
  const scheduling = ensembleSchedulingJson(model.ensemble!);
  const input = model.inputs.map((spec) => tensorJson(spec, "input", normalized));
  const output = model.outputs.map((spec) => tensorJson(spec, "output", normalized));
  if (!normalized) {
    return {
      name: model.name,
      platform: "ensemble",
      max_batch_size: model.config.maxBatchSize,
      input,
      output,
      ensemble_scheduling: scheduling,
    };
  }
  // The fields and defaults the core prints for an ensemble (Triton 2.51).
  return {
    name: model.name,
    platform: "ensemble",
    backend: "",
    runtime: "",
    version_policy: { specific: { versions: [model.version] } },
    max_batch_size: model.config.maxBatchSize,
    input,
    output,
    batch_input: [],
    batch_output: [],
    ensemble_scheduling: {
      step: (scheduling["step"] as Record<string, unknown>[]).map((step) => ({
        ...step,
        model_namespace: "",
      })),
    },
    instance_group: [],
    default_model_filename: "",
    cc_model_filenames: {},
    metric_tags: {},
    parameters: {},
    model_warmup: [],
    model_transaction_policy: { decoupled: false },
  };
}
