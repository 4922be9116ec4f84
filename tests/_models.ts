/**
 * Shared test models for the end-to-end and interop suites: an identity model per dtype, a model
 * that fails, a slow model and a model that echoes its request parameters. The Python peer
 * scripts in `tests/interop/` rely on the names and tensors declared here.
 *
 * @module
 */

import { type BindOptions, type DType, type KServeDType, ndarray } from "../mod.ts";

/** One dtype the identity models cover, in both spellings. */
export interface IdentityDType {
  /** DenoTriton's name. */
  readonly dtype: DType;
  /** The KServe wire name. */
  readonly kserve: KServeDType;
}

/** Every dtype an identity model is bound for (BF16 has no numpy type in tritonclient). */
export const IDENTITY_DTYPES: readonly IdentityDType[] = [
  { dtype: "bool", kserve: "BOOL" },
  { dtype: "int8", kserve: "INT8" },
  { dtype: "int16", kserve: "INT16" },
  { dtype: "int32", kserve: "INT32" },
  { dtype: "int64", kserve: "INT64" },
  { dtype: "uint8", kserve: "UINT8" },
  { dtype: "uint16", kserve: "UINT16" },
  { dtype: "uint32", kserve: "UINT32" },
  { dtype: "uint64", kserve: "UINT64" },
  { dtype: "float16", kserve: "FP16" },
  { dtype: "float32", kserve: "FP32" },
  { dtype: "float64", kserve: "FP64" },
  { dtype: "bytes", kserve: "BYTES" },
];

/**
 * The name of the identity model of a dtype: `identity_fp32`, `identity_bytes`, ...
 *
 * @param kserve The KServe dtype name.
 * @returns The model name.
 */
export function identityModelName(kserve: KServeDType): string {
  return `identity_${kserve.toLowerCase()}`;
}

/**
 * Identity models, one per dtype in {@linkcode IDENTITY_DTYPES}: input `INPUT`, output `OUTPUT`,
 * shape `[-1]`, batched (max batch 8), strict.
 *
 * @returns The bind options of every identity model.
 */
export function identityModels(): BindOptions[] {
  return IDENTITY_DTYPES.map(({ dtype, kserve }) => ({
    modelName: identityModelName(kserve),
    // Undecorated: each request's tensor goes back untouched, whatever batch it came in.
    inferFunc: (requests) => requests.map((request) => ({ OUTPUT: request.data.INPUT! })),
    inputs: [{ name: "INPUT", dtype, shape: [-1] }],
    outputs: [{ name: "OUTPUT", dtype, shape: [-1] }],
    config: { maxBatchSize: 8 },
    strict: true,
  }));
}

/** The message the {@linkcode failingModel} throws. */
export const FAILING_MESSAGE = "Deliberate failure: division by zero in the test model";

/**
 * `Failing`: every call throws an `Error` with {@linkcode FAILING_MESSAGE}. Input `x` FP32 `[-1]`,
 * output `y` FP32 `[-1]`, batched.
 *
 * @param modelName The model name.
 * @returns The bind options.
 */
export function failingModel(modelName = "Failing"): BindOptions {
  return {
    modelName,
    inferFunc: () => {
      throw new Error(FAILING_MESSAGE);
    },
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
    config: { maxBatchSize: 8 },
  };
}

/**
 * `Slow`: an FP32 identity (`x` → `y`, shape `[-1]`, batched up to 16) that waits before
 * answering each batch, so several requests are in flight at once.
 *
 * @param delayMs Milliseconds each batch waits.
 * @returns The bind options.
 */
export function slowModel(delayMs = 100): BindOptions {
  return {
    modelName: "Slow",
    inferFunc: async (requests) => {
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      return requests.map((request) => ({ y: request.data.x! }));
    },
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
    config: { maxBatchSize: 16, batcher: { maxQueueDelayMicroseconds: 1000 } },
    strict: true,
  };
}

/** The header pattern the server needs so that {@linkcode parametersModel} sees `x-forward-*`. */
export const HEADER_FORWARD_PATTERN = "x-forward-.*";

/**
 * `Parameters`: returns its request parameters (KServe body parameters and forwarded headers) as
 * JSON with sorted keys, in BYTES output `parameters` (shape `[1]` per batch row). Input `x` FP32
 * `[-1]`, batched, undecorated so that it sees the parameters.
 *
 * @returns The bind options.
 */
export function parametersModel(): BindOptions {
  return {
    modelName: "Parameters",
    inferFunc: (requests) =>
      requests.map((request) => {
        const keys = Object.keys(request.parameters).sort();
        const json = JSON.stringify(
          Object.fromEntries(keys.map((key) => [key, request.parameters[key]])),
        );
        const rows = request.data.x!.shape[0]!;
        return { parameters: ndarray(Array(rows).fill(json), [rows, 1], { dtype: "bytes" }) };
      }),
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "parameters", dtype: "bytes", shape: [1] }],
    config: { maxBatchSize: 8 },
    strict: true,
  };
}

/**
 * Every shared test model at once (identity per dtype, `Failing`, `Slow`, `Parameters`).
 *
 * @returns Their bind options.
 */
export function allTestModels(): BindOptions[] {
  return [...identityModels(), failingModel(), slowModel(), parametersModel()];
}
