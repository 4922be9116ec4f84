/**
 * The model configuration as the client sees it, parsed from Triton's model-config JSON
 * (`GET /v2/models/{m}/config`, or the gRPC `ModelConfig` answer turned into the same JSON).
 *
 * @module
 */

import { isObject } from "../json_values.ts";
import { type DType, toDType } from "../tensor/dtype.ts";
import { ClientValueError } from "./errors.ts";

/** An input or output of a model. */
export interface ClientTensorSpec {
  /** The tensor name. */
  readonly name: string;
  /** The element type. */
  readonly dtype: DType;
  /** The dimensions without the batch axis; `-1` is variable. */
  readonly shape: readonly number[];
  /** Whether an input may be left out (always `false` for outputs). */
  readonly optional: boolean;
}

/** The dynamic batcher settings of a model. */
export interface ClientDynamicBatcher {
  /** Batch sizes the scheduler prefers. */
  readonly preferredBatchSize: readonly number[];
  /** How long the scheduler waits to fill a batch, in microseconds. */
  readonly maxQueueDelayMicroseconds: number;
  /** Whether responses keep the request order. */
  readonly preserveOrdering: boolean;
  /** The number of priority levels (0: no priorities). */
  readonly priorityLevels: number;
  /** The priority of requests that set none. */
  readonly defaultPriorityLevel: number;
}

/** A parsed model configuration. */
export interface ClientModelConfig {
  /** The model name. */
  readonly name: string;
  /** The largest batch the model takes; 0 when it does not batch. */
  readonly maxBatchSize: number;
  /** Whether the model batches (`maxBatchSize > 0`): inputs carry a leading batch axis. */
  readonly batching: boolean;
  /** The dynamic batcher, when the model has one. */
  readonly batcher: ClientDynamicBatcher | undefined;
  /** Whether the model streams any number of responses per request. */
  readonly decoupled: boolean;
  /** Whether the server caches the model's responses. */
  readonly responseCache: boolean;
  /** The backend name (`denotriton`, `python`, ...), `""` when not set. */
  readonly backend: string;
  /** The inputs, in declared order. */
  readonly inputs: readonly ClientTensorSpec[];
  /** The outputs, in declared order. */
  readonly outputs: readonly ClientTensorSpec[];
  /** The model's string parameters. */
  readonly parameters: Readonly<Record<string, string>>;
  /** The JSON the config was parsed from. */
  readonly raw: Readonly<Record<string, unknown>>;
}

// Protobuf JSON prints 64-bit integers as strings; Triton prints them as numbers.
function toInt(value: unknown, what: string, fallback = 0): number {
  if (value === undefined || value === null) return fallback;
  const number = typeof value === "string" && value.trim() !== "" ? Number(value) : value;
  if (typeof number !== "number" || !Number.isInteger(number)) {
    throw new ClientValueError(
      `Invalid model config: ${what} must be an integer, got ${JSON.stringify(value)}`,
    );
  }
  return number;
}

function toBool(value: unknown): boolean {
  return value === true || value === "true";
}

function parseTensor(value: unknown, kind: "input" | "output", index: number): ClientTensorSpec {
  if (!isObject(value) || typeof value["name"] !== "string") {
    throw new ClientValueError(`Invalid model config: ${kind} ${index} has no name`);
  }
  const name = value["name"];
  const typeName = value["data_type"] ?? "TYPE_FP32";
  let dtype: DType;
  try {
    dtype = toDType(String(typeName));
  } catch (error) {
    throw new ClientValueError(
      `Invalid model config: ${kind} '${name}' has unknown data_type ${JSON.stringify(typeName)}`,
      { cause: error },
    );
  }
  // A reshape gives the shape the model sees; the client talks in the declared dims.
  const dims = Array.isArray(value["dims"]) ? value["dims"] : [];
  const shape = dims.map((dim, i) => toInt(dim, `${kind} '${name}' dims[${i}]`));
  return { name, dtype, shape, optional: kind === "input" && toBool(value["optional"]) };
}

function parseBatcher(value: unknown): ClientDynamicBatcher | undefined {
  if (!isObject(value)) return undefined;
  const preferred = Array.isArray(value["preferred_batch_size"])
    ? value["preferred_batch_size"]
    : [];
  return {
    preferredBatchSize: preferred.map((size, i) => toInt(size, `preferred_batch_size[${i}]`)),
    maxQueueDelayMicroseconds: toInt(
      value["max_queue_delay_microseconds"],
      "max_queue_delay_microseconds",
    ),
    preserveOrdering: toBool(value["preserve_ordering"]),
    priorityLevels: toInt(value["priority_levels"], "priority_levels"),
    defaultPriorityLevel: toInt(value["default_priority_level"], "default_priority_level"),
  };
}

function parseParameters(value: unknown): Record<string, string> {
  const parameters: Record<string, string> = {};
  if (!isObject(value)) return parameters;
  for (const [key, entry] of Object.entries(value)) {
    if (isObject(entry) && typeof entry["string_value"] === "string") {
      parameters[key] = entry["string_value"];
    } else if (typeof entry === "string") {
      parameters[key] = entry;
    }
  }
  return parameters;
}

/**
 * Parses Triton's model-config JSON.
 *
 * @param json The config JSON object (proto field names, as `/config` answers).
 * @returns The parsed config.
 * @throws {ClientValueError} When the JSON is not a model config.
 *
 * @example A batching model
 * ```ts
 * import { parseModelConfig } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const config = parseModelConfig({
 *   name: "AddSub",
 *   max_batch_size: 8,
 *   input: [{ name: "a", data_type: "TYPE_FP32", dims: [-1] }],
 *   output: [{ name: "add", data_type: "TYPE_FP32", dims: ["-1"] }],
 *   dynamic_batching: {},
 * });
 * assert.equal(config.batching, true);
 * assert.deepEqual(config.inputs, [{ name: "a", dtype: "float32", shape: [-1], optional: false }]);
 * assert.deepEqual(config.outputs[0]?.shape, [-1]);
 * assert.equal(config.decoupled, false);
 * ```
 */
export function parseModelConfig(json: unknown): ClientModelConfig {
  if (!isObject(json)) {
    throw new ClientValueError(`Invalid model config: expected a JSON object, got ${typeof json}`);
  }
  const maxBatchSize = toInt(json["max_batch_size"], "max_batch_size");
  if (maxBatchSize < 0) {
    throw new ClientValueError(
      `Invalid model config: max_batch_size is negative (${maxBatchSize})`,
    );
  }
  const inputs = Array.isArray(json["input"]) ? json["input"] : [];
  const outputs = Array.isArray(json["output"]) ? json["output"] : [];
  const policy = json["model_transaction_policy"];
  const cache = json["response_cache"];
  return {
    name: typeof json["name"] === "string" ? json["name"] : "",
    maxBatchSize,
    batching: maxBatchSize > 0,
    batcher: parseBatcher(json["dynamic_batching"]),
    decoupled: isObject(policy) && toBool(policy["decoupled"]),
    responseCache: isObject(cache) && toBool(cache["enable"]),
    backend: typeof json["backend"] === "string" ? json["backend"] : "",
    inputs: inputs.map((spec, i) => parseTensor(spec, "input", i)),
    outputs: outputs.map((spec, i) => parseTensor(spec, "output", i)),
    parameters: parseParameters(json["parameters"]),
    raw: json,
  };
}
