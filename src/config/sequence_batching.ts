/**
 * Triton's sequence batcher as a model configures it (`ModelConfig.sequenceBatching`): the
 * strategy (`direct` or `oldest`) and its settings, the idle timeout, the control inputs that
 * tell the model which request starts, ends or is ready and which sequence it belongs to, and
 * implicit state. {@linkcode resolveSequenceBatching} fills in Triton's defaults and refuses
 * what Triton's core would refuse, naming the field; {@linkcode checkSequenceTensors} checks the
 * control and state tensors against the model's own tensors at `bind()`.
 *
 * @module
 */

import { TritonBadParameterError } from "../errors.ts";
import { type DType, type DTypeLike, toDType } from "../tensor/dtype.ts";
import type { ResolvedTensorSpec } from "./tensor_spec.ts";

/**
 * A sequence's correlation ID: an unsigned 64-bit integer or a string, as the client sent it
 * (`sequence_id`). `0n` and `""` mean none.
 */
export type SequenceId = bigint | string;

/** How the sequence batcher forms batches. */
export type SequenceStrategy = "direct" | "oldest";

/** The dtypes of the START, END and READY control tensors. */
export type ControlDType = "bool" | "int32" | "float32";

/** The dtypes of the CORRID control tensor: integers carry integer IDs, `bytes` string IDs. */
export type CorrelationIdDType = "uint64" | "int64" | "uint32" | "int32" | "bytes";

/** A boolean control input (START, END or READY): a tensor of shape `[1]` per request. */
export interface SequenceControl {
  /** The tensor's name, as the callable finds it among the request's inputs. */
  name: string;
  /**
   * Its dtype (Triton's `int32_false_true`, `fp32_false_true` or `bool_false_true`).
   *
   * @default {"int32"}
   */
  dtype?: ControlDType;
  /**
   * The values for false and true.
   *
   * @default {[0, 1] (bool: [false, true])}
   */
  falseTrue?: readonly [number, number] | readonly [boolean, boolean];
}

/** The CORRID control input: each request's correlation ID, a tensor of shape `[1]`. */
export interface CorrelationIdControl {
  /** The tensor's name. */
  name: string;
  /**
   * Its dtype; it also declares which IDs the model takes: integers for an integer dtype,
   * strings for `bytes` (a request with the other kind is refused).
   */
  dtype: CorrelationIdDType;
}

/** The control inputs a model asks for; each is optional. */
export interface SequenceControls {
  /**
   * True for the first request of a sequence.
   *
   * @default {undefined}
   */
  start?: SequenceControl;
  /**
   * True for the last request of a sequence.
   *
   * @default {undefined}
   */
  end?: SequenceControl;
  /**
   * False for the padding requests of the direct strategy (they carry no data of any sequence).
   *
   * @default {undefined}
   */
  ready?: SequenceControl;
  /**
   * The correlation ID.
   *
   * @default {undefined}
   */
  correlationId?: CorrelationIdControl;
}

/**
 * Implicit state (Triton's `sequence_batching.state`): the engine keeps a tensor per sequence,
 * hands it to each request as the input `inputName` and takes the request's output `outputName`
 * as the next one. It starts as zeros.
 */
export interface ImplicitState {
  /** The input the state arrives as. */
  inputName: string;
  /** The output the callable returns the next state as (not sent to the client). */
  outputName: string;
  /** Its dtype. */
  dtype: DTypeLike;
  /** Its shape without the batch axis; `-1` dims start as 1. */
  shape: readonly number[];
}

/** Sequence batching settings, Triton's `ModelSequenceBatching` with camelCase names. */
export interface SequenceBatching {
  /**
   * `direct`: each sequence gets a slot of one instance (`maxBatchSize` slots per instance), and a
   * batch holds one request per slot, in slot order, padded with not-ready requests. `oldest`:
   * each instance has `maxCandidateSequences` slots, and its dynamic batcher batches the oldest
   * requests of those sequences, at most one per sequence.
   *
   * @default {"direct"}
   */
  strategy?: SequenceStrategy;
  /**
   * How long a sequence may go without a request before it is ended and its slot freed.
   *
   * @default {1000000}
   */
  maxSequenceIdleMicroseconds?: number;
  /**
   * How long a batch may wait for more requests.
   *
   * @default {0}
   */
  maxQueueDelayMicroseconds?: number;
  /**
   * `direct` only: a batch waits (up to the queue delay) until this share of an instance's slots
   * have a request, within [0, 1].
   *
   * @default {0}
   */
  minimumSlotUtilization?: number;
  /**
   * `oldest` only: slots per instance.
   *
   * @default {maxBatchSize (1 without batching)}
   */
  maxCandidateSequences?: number;
  /**
   * `oldest` only: batch sizes the batcher prefers.
   *
   * @default {[maxBatchSize]}
   */
  preferredBatchSize?: readonly number[];
  /**
   * `oldest` only: responses go back in the order their requests arrived.
   *
   * @default {false}
   */
  preserveOrdering?: boolean;
  /**
   * The control inputs the callable receives.
   *
   * @default {{}}
   */
  controls?: SequenceControls;
  /**
   * Implicit state tensors.
   *
   * @default {[]}
   */
  states?: readonly ImplicitState[];
}

/** A boolean control with its defaults filled in; bool values are 0 and 1. */
export interface ResolvedSequenceControl {
  /** See {@linkcode SequenceControl.name}. */
  readonly name: string;
  /** See {@linkcode SequenceControl.dtype}. */
  readonly dtype: ControlDType;
  /** The values for false and true, as numbers. */
  readonly falseTrue: readonly [number, number];
}

/** An implicit state with its dtype resolved. */
export interface ResolvedImplicitState {
  /** See {@linkcode ImplicitState.inputName}. */
  readonly inputName: string;
  /** See {@linkcode ImplicitState.outputName}. */
  readonly outputName: string;
  /** See {@linkcode ImplicitState.dtype}. */
  readonly dtype: DType;
  /** See {@linkcode ImplicitState.shape}. */
  readonly shape: readonly number[];
}

/** Sequence batching with every default filled in and validated. */
export interface ResolvedSequenceBatching {
  /** See {@linkcode SequenceBatching.strategy}. */
  readonly strategy: SequenceStrategy;
  /** See {@linkcode SequenceBatching.maxSequenceIdleMicroseconds}. */
  readonly maxSequenceIdleMicroseconds: number;
  /** See {@linkcode SequenceBatching.maxQueueDelayMicroseconds}. */
  readonly maxQueueDelayMicroseconds: number;
  /** See {@linkcode SequenceBatching.minimumSlotUtilization} (0 for `oldest`). */
  readonly minimumSlotUtilization: number;
  /** The value given for `oldest` (0: none given); 0 for `direct`. */
  readonly maxCandidateSequences: number;
  /** Slots per instance, as the strategy decides it. */
  readonly slots: number;
  /** See {@linkcode SequenceBatching.preferredBatchSize} (as given; empty for `direct`). */
  readonly preferredBatchSize: readonly number[];
  /** See {@linkcode SequenceBatching.preserveOrdering}. */
  readonly preserveOrdering: boolean;
  /** The boolean controls. */
  readonly start?: ResolvedSequenceControl;
  /** See {@linkcode SequenceControls.end}. */
  readonly end?: ResolvedSequenceControl;
  /** See {@linkcode SequenceControls.ready}. */
  readonly ready?: ResolvedSequenceControl;
  /** See {@linkcode SequenceControls.correlationId}. */
  readonly correlationId?: CorrelationIdControl;
  /** See {@linkcode SequenceBatching.states}. */
  readonly states: readonly ResolvedImplicitState[];
}

/** Triton's default idle timeout (`SEQUENCE_IDLE_DEFAULT_MICROSECONDS`). */
export const DEFAULT_SEQUENCE_IDLE_MICROSECONDS = 1_000_000;

/** What {@linkcode resolveSequenceBatching} needs of the rest of the model config. */
export interface SequenceBatchingContext {
  /** The model's `maxBatchSize` (0 without batching). */
  readonly maxBatchSize: number;
}

function bad(field: string, detail: string): TritonBadParameterError {
  return new TritonBadParameterError(
    `Invalid model config: sequenceBatching.${field} ${detail}`,
  );
}

function integerWithin(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw bad(field, `must be an integer within [${min}, ${max}], got ${String(value)}`);
  }
  return value;
}

const CONTROL_DTYPES: readonly ControlDType[] = ["bool", "int32", "float32"];
const CORRID_DTYPES: readonly CorrelationIdDType[] = [
  "uint64",
  "int64",
  "uint32",
  "int32",
  "bytes",
];
const ONLY_OLDEST = ["maxCandidateSequences", "preferredBatchSize", "preserveOrdering"] as const;

function resolveControl(
  control: SequenceControl | undefined,
  field: string,
): ResolvedSequenceControl | undefined {
  if (control === undefined) return undefined;
  if (typeof control.name !== "string" || control.name === "") {
    throw bad(`${field}.name`, "must be a non-empty string");
  }
  const dtype = control.dtype ?? "int32";
  if (!CONTROL_DTYPES.includes(dtype)) {
    throw bad(
      `${field}.dtype`,
      `must be one of ${CONTROL_DTYPES.join(", ")}, got ${JSON.stringify(dtype)}`,
    );
  }
  const given = control.falseTrue ?? (dtype === "bool" ? [false, true] : [0, 1]);
  if (!Array.isArray(given) || given.length !== 2) {
    throw bad(`${field}.falseTrue`, "must have exactly 2 entries: the false and the true value");
  }
  const falseTrue = given.map((value: number | boolean) => {
    const ok = dtype === "bool"
      ? typeof value === "boolean"
      : typeof value === "number" && Number.isFinite(value) &&
        (dtype === "float32" || Number.isInteger(value));
    if (!ok) {
      throw bad(
        `${field}.falseTrue`,
        `must hold ${
          dtype === "bool" ? "booleans" : dtype === "int32" ? "integers" : "numbers"
        } for dtype ${dtype}, got ${JSON.stringify(given)}`,
      );
    }
    return Number(value);
  }) as [number, number];
  return { name: control.name, dtype, falseTrue };
}

/**
 * Fills in Triton's defaults and validates sequence batching, naming the field at fault.
 *
 * @param config The model's `sequenceBatching`.
 * @param context The model's `maxBatchSize`.
 * @returns The resolved settings.
 * @throws {TritonBadParameterError} For a value Triton's core would refuse or one this strategy
 *   does not have.
 *
 * @example The oldest strategy
 * ```ts
 * import { resolveSequenceBatching } from "./sequence_batching.ts";
 * import assert from "node:assert/strict";
 *
 * const resolved = resolveSequenceBatching(
 *   { strategy: "oldest", maxCandidateSequences: 8, controls: { start: { name: "START" } } },
 *   { maxBatchSize: 4 },
 * );
 * assert.equal(resolved.slots, 8);
 * assert.equal(resolved.maxSequenceIdleMicroseconds, 1000000);
 * assert.deepEqual(resolved.start, { name: "START", dtype: "int32", falseTrue: [0, 1] });
 * assert.throws(
 *   () => resolveSequenceBatching({ minimumSlotUtilization: 2 }, { maxBatchSize: 4 }),
 *   { message: "Invalid model config: sequenceBatching.minimumSlotUtilization must be a number within [0, 1], got 2" },
 * );
 * ```
 */
export function resolveSequenceBatching(
  config: SequenceBatching,
  context: SequenceBatchingContext,
): ResolvedSequenceBatching {
  if (typeof config !== "object" || config === null) {
    throw new TritonBadParameterError(
      "Invalid model config: sequenceBatching must be an object",
    );
  }
  const strategy = config.strategy ?? "direct";
  if (strategy !== "direct" && strategy !== "oldest") {
    throw bad("strategy", `must be "direct" or "oldest", got ${JSON.stringify(strategy)}`);
  }
  if (strategy === "direct") {
    for (const field of ONLY_OLDEST) {
      if (config[field] !== undefined) {
        throw bad(field, 'applies to the "oldest" strategy only');
      }
    }
  } else if (config.minimumSlotUtilization !== undefined) {
    throw bad("minimumSlotUtilization", 'applies to the "direct" strategy only');
  }
  // Timers take at most 2^31 - 1 ms; 0 means Triton's default, as in the core.
  const idle = integerWithin(
    config.maxSequenceIdleMicroseconds ?? 0,
    "maxSequenceIdleMicroseconds",
    0,
    (2 ** 31 - 1) * 1000,
  );
  const delay = integerWithin(
    config.maxQueueDelayMicroseconds ?? 0,
    "maxQueueDelayMicroseconds",
    0,
    (2 ** 31 - 1) * 1000,
  );
  const utilization = config.minimumSlotUtilization ?? 0;
  if (typeof utilization !== "number" || !(utilization >= 0 && utilization <= 1)) {
    throw bad("minimumSlotUtilization", `must be a number within [0, 1], got ${utilization}`);
  }
  const candidates = integerWithin(
    config.maxCandidateSequences ?? 0,
    "maxCandidateSequences",
    0,
    2 ** 31 - 1,
  );
  const batchSlots = Math.max(1, context.maxBatchSize);
  const preferred = [...(config.preferredBatchSize ?? [])];
  for (const size of preferred) {
    // The core's words: positive and at most max_batch_size.
    integerWithin(size, "preferredBatchSize", 1, context.maxBatchSize);
  }
  const controls = config.controls ?? {};
  const start = resolveControl(controls.start, "controls.start");
  const end = resolveControl(controls.end, "controls.end");
  const ready = resolveControl(controls.ready, "controls.ready");
  const correlationId = controls.correlationId;
  if (correlationId !== undefined) {
    if (typeof correlationId.name !== "string" || correlationId.name === "") {
      throw bad("controls.correlationId.name", "must be a non-empty string");
    }
    if (!CORRID_DTYPES.includes(correlationId.dtype)) {
      throw bad(
        "controls.correlationId.dtype",
        `must be one of ${CORRID_DTYPES.join(", ")}, got ${JSON.stringify(correlationId.dtype)}`,
      );
    }
  }
  const names = [start, end, ready, correlationId].flatMap((control) =>
    control === undefined ? [] : [control.name]
  );
  const repeated = names.find((name, index) => names.indexOf(name) !== index);
  if (repeated !== undefined) {
    throw bad("controls", `name the tensor '${repeated}' for more than one control`);
  }
  const states = (config.states ?? []).map((state, index): ResolvedImplicitState => {
    const field = `states[${index}]`;
    for (const key of ["inputName", "outputName"] as const) {
      if (typeof state[key] !== "string" || state[key] === "") {
        throw bad(`${field}.${key}`, "must be a non-empty string");
      }
    }
    let dtype: DType;
    try {
      dtype = toDType(state.dtype as string);
    } catch (error) {
      throw bad(`${field}.dtype`, (error as Error).message);
    }
    if (
      !Array.isArray(state.shape) ||
      state.shape.some((dim) => !Number.isInteger(dim) || dim < -1 || dim === 0)
    ) {
      throw bad(
        `${field}.shape`,
        `must be a list of dims >= 1 or -1, got ${JSON.stringify(state.shape)}`,
      );
    }
    return {
      inputName: state.inputName,
      outputName: state.outputName,
      dtype,
      shape: [...state.shape],
    };
  });
  for (const key of ["inputName", "outputName"] as const) {
    const seen = states.map((state) => state[key]);
    const twice = seen.find((name, index) => seen.indexOf(name) !== index);
    if (twice !== undefined) throw bad("states", `name the ${key} '${twice}' more than once`);
  }
  return {
    strategy,
    maxSequenceIdleMicroseconds: idle === 0 ? DEFAULT_SEQUENCE_IDLE_MICROSECONDS : idle,
    maxQueueDelayMicroseconds: delay,
    minimumSlotUtilization: utilization,
    maxCandidateSequences: candidates,
    slots: strategy === "oldest" && candidates > 0 ? candidates : batchSlots,
    preferredBatchSize: preferred,
    preserveOrdering: config.preserveOrdering ?? false,
    ...(start === undefined ? {} : { start }),
    ...(end === undefined ? {} : { end }),
    ...(ready === undefined ? {} : { ready }),
    ...(correlationId === undefined ? {} : { correlationId: { ...correlationId } }),
    states,
  };
}

/**
 * Checks the control and state tensors against the model's own: a control or state input may
 * not be named like a declared input, a state output not like a declared output.
 *
 * @param model The model's name.
 * @param sequence Its resolved sequence batching.
 * @param tensors Its declared inputs and outputs.
 * @throws {TritonBadParameterError} Naming the tensor.
 *
 * @example A control named like an input
 * ```ts
 * import { checkSequenceTensors, resolveSequenceBatching } from "./sequence_batching.ts";
 * import assert from "node:assert/strict";
 *
 * const sequence = resolveSequenceBatching({ controls: { start: { name: "x" } } }, { maxBatchSize: 1 });
 * const x = { name: "x", dtype: "int32" as const, shape: [1], optional: false };
 * assert.throws(() => checkSequenceTensors("Acc", sequence, { inputs: [x], outputs: [] }), {
 *   message: "Cannot bind model 'Acc': sequenceBatching.controls.start names 'x', which is a declared input",
 * });
 * ```
 */
export function checkSequenceTensors(
  model: string,
  sequence: ResolvedSequenceBatching,
  tensors: {
    readonly inputs: readonly ResolvedTensorSpec[];
    readonly outputs: readonly ResolvedTensorSpec[];
  },
): void {
  const { inputs, outputs } = tensors;
  const inputNames = new Set(inputs.map((spec) => spec.name));
  const outputNames = new Set(outputs.map((spec) => spec.name));
  const refuse = (field: string, name: string, what: string): never => {
    throw new TritonBadParameterError(
      `Cannot bind model '${model}': sequenceBatching.${field} names '${name}', which is a declared ${what}`,
    );
  };
  for (const kind of ["start", "end", "ready", "correlationId"] as const) {
    const name = sequence[kind]?.name;
    if (name !== undefined && inputNames.has(name)) refuse(`controls.${kind}`, name, "input");
  }
  const controls = new Set(
    (["start", "end", "ready", "correlationId"] as const).flatMap((kind) =>
      sequence[kind] === undefined ? [] : [sequence[kind].name]
    ),
  );
  sequence.states.forEach((state, index) => {
    if (inputNames.has(state.inputName)) {
      refuse(`states[${index}].inputName`, state.inputName, "input");
    }
    if (controls.has(state.inputName)) {
      refuse(`states[${index}].inputName`, state.inputName, "control input");
    }
    if (outputNames.has(state.outputName)) {
      refuse(`states[${index}].outputName`, state.outputName, "output");
    }
  });
}

/**
 * Which correlation IDs a model takes, as its CORRID control declares: `"uint64"` for an integer
 * dtype, `"string"` for `bytes`, `undefined` (both) without the control.
 *
 * @param sequence The model's resolved sequence batching.
 * @returns The kind of ID the model takes.
 *
 * @example A model that takes string IDs
 * ```ts
 * import { declaredIdKind, resolveSequenceBatching } from "./sequence_batching.ts";
 * import assert from "node:assert/strict";
 *
 * const sequence = resolveSequenceBatching(
 *   { controls: { correlationId: { name: "CORRID", dtype: "bytes" } } },
 *   { maxBatchSize: 1 },
 * );
 * assert.equal(declaredIdKind(sequence), "string");
 * ```
 */
export function declaredIdKind(
  sequence: ResolvedSequenceBatching,
): "uint64" | "string" | undefined {
  const control = sequence.correlationId;
  if (control === undefined) return undefined;
  return control.dtype === "bytes" ? "string" : "uint64";
}
