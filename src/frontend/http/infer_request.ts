/**
 * Decoding `POST /v2/models/{m}/infer` bodies into a protocol-neutral `InferenceRequest`: the
 * JSON request (with JSON `data` or the binary tensor extension's trailing bytes, read by
 * `protocol/binary_data.ts`'s rules, which the client writes by), and the raw binary request
 * (`Inference-Header-Content-Length: 0`) whose whole body is the single input.
 *
 * @module
 */

import { isNonNegativeInteger, isObject } from "../../json_values.ts";
import type { InferenceRequest, ModelHandle } from "../../engine/engine.ts";
import { InferenceError, messageOf } from "../../errors.ts";
import { jsonToNDArray, parseJsonBytes } from "../../protocol/json_tensor.ts";
import {
  type HeaderForwarding,
  httpRequestParameters,
  type RequestParameters,
} from "../../protocol/request_parameters.ts";
import { deserializeBytes } from "../../tensor/bytes_codec.ts";
import { elementSize, fromKServe } from "../../tensor/dtype.ts";
import { fromRawBytes, type NDArray } from "../../tensor/ndarray.ts";
import {
  BINARY_DATA,
  BINARY_DATA_SIZE,
  BinaryDataReader,
  binaryDataSize,
} from "../../protocol/binary_data.ts";
import { sharedMemoryRef } from "../../protocol/shared_memory.ts";
import { SharedMemoryBinding } from "../shared_memory.ts";
import type { SharedMemoryRegistry } from "../../shm/registry.ts";
import { traceContextOf } from "../../protocol/trace_context.ts";
import type { TraceCarrier } from "../../telemetry/otel.ts";
import type { Tensor } from "../../tensor/device_tensor.ts";

/** How one output is returned. */
export interface OutputFormat {
  /** Whether its data follows the JSON as binary. */
  readonly binary: boolean;
  /** Top-N classification requested (0 for none). */
  readonly classification: number;
}

/** An HTTP inference request: the engine's request plus how the client wants its outputs. */
export interface HttpInferRequest {
  /** The protocol-neutral request for the engine. */
  readonly request: InferenceRequest;
  /** Formats of the outputs the client named; others use `defaultBinary`. */
  readonly outputFormats: ReadonlyMap<string, OutputFormat>;
  /** The request's `binary_data_output` (or `true` for raw binary requests). */
  readonly defaultBinary: boolean;
  /** The shared-memory regions the request uses; release them once it is answered. */
  readonly sharedMemory: SharedMemoryBinding;
}

/** Options of {@linkcode decodeInferRequest} and {@linkcode decodeRawInferRequest}. */
export interface DecodeInferOptions {
  /** The model name from the URL. */
  modelName: string;
  /**
   * The model version from the URL.
   *
   * @default {undefined}
   */
  modelVersion?: number;
  /**
   * The request headers, for header forwarding.
   *
   * @default {undefined}
   */
  headers?: Headers;
  /**
   * Headers whose names match become string parameters.
   *
   * @default {undefined}
   */
  headerForwardPattern?: RegExp;
  /**
   * Aborted when the client disconnects.
   *
   * @default {undefined}
   */
  signal?: AbortSignal;
  /**
   * The server's system shared-memory regions; without it, tensors in shared memory are
   * refused.
   *
   * @default {undefined}
   */
  sharedMemory?: SharedMemoryRegistry;
}

function nonNegativeInteger(value: unknown): number | undefined {
  if (isNonNegativeInteger(value)) return value;
  if (typeof value === "bigint" && value >= 0n && value <= BigInt(Number.MAX_SAFE_INTEGER)) {
    return Number(value);
  }
  return undefined;
}

function forwarding(options: DecodeInferOptions): HeaderForwarding {
  return {
    ...(options.headers !== undefined ? { headers: options.headers } : {}),
    ...(options.headerForwardPattern !== undefined
      ? { headerForwardPattern: options.headerForwardPattern }
      : {}),
  };
}

function readShape(name: string, raw: unknown): number[] {
  if (!Array.isArray(raw)) {
    throw InferenceError.invalidArg(
      `Unable to parse 'shape' of input '${name}': expected an array of integers`,
    );
  }
  return raw.map((dim) => {
    const value = nonNegativeInteger(dim);
    if (value === undefined) {
      throw InferenceError.invalidArg(
        `Unable to parse 'shape' of input '${name}': dimension ${
          JSON.stringify(typeof dim === "bigint" ? String(dim) : dim)
        } is not a non-negative integer`,
      );
    }
    return value;
  });
}

interface RequestedOutput {
  binary: boolean | undefined;
  classification: number;
}

function readOutputs(
  raw: unknown,
  sharedMemory: SharedMemoryBinding,
): { names?: string[]; formats: Map<string, RequestedOutput> } {
  const formats = new Map<string, RequestedOutput>();
  if (raw === undefined) return { formats };
  if (!Array.isArray(raw)) {
    throw InferenceError.invalidArg("Unable to parse 'outputs': expected an array");
  }
  const names: string[] = [];
  raw.forEach((output, index) => {
    if (!isObject(output) || typeof output["name"] !== "string") {
      throw InferenceError.invalidArg(
        `Unable to parse 'outputs[${index}]': expected an object with a 'name'`,
      );
    }
    const name = output["name"];
    if (formats.has(name)) {
      throw InferenceError.invalidArg(`Duplicate output '${name}' in 'outputs'`);
    }
    const parameters = output["parameters"];
    let binary: boolean | undefined;
    let classification = 0;
    if (parameters !== undefined) {
      if (!isObject(parameters)) {
        throw InferenceError.invalidArg(
          `Unable to parse 'parameters' of output '${name}': expected an object`,
        );
      }
      const shm = sharedMemoryRef(parameters, `output '${name}'`);
      if (shm !== undefined) {
        if (parameters["classification"] !== undefined) {
          throw InferenceError.invalidArg(
            "Output can't set both 'shared_memory_region' and 'classification'",
          );
        }
        if (parameters[BINARY_DATA] === true) {
          throw InferenceError.invalidArg(
            "Output can't set both 'shared_memory_region' and 'binary_data'",
          );
        }
        sharedMemory.output(name, shm);
      }
      const binaryData = parameters[BINARY_DATA];
      if (binaryData !== undefined) {
        if (typeof binaryData !== "boolean") {
          throw InferenceError.invalidArg(
            `Unable to parse 'binary_data' of output '${name}': expected a boolean`,
          );
        }
        binary = binaryData;
      }
      if (parameters["classification"] !== undefined) {
        const count = nonNegativeInteger(parameters["classification"]);
        if (count === undefined) {
          throw InferenceError.invalidArg(
            `Unable to parse 'classification' of output '${name}': expected a non-negative integer`,
          );
        }
        classification = count;
      }
    }
    names.push(name);
    formats.set(name, { binary, classification });
  });
  return { names, formats };
}

/**
 * Decodes a JSON inference request, with binary tensor data after the JSON when
 * `headerLength` is given.
 *
 * @param body The (decompressed) request body.
 * @param headerLength The `Inference-Header-Content-Length` value; `undefined` means all JSON.
 * @param options Model name and version, headers to forward and the abort signal.
 * @returns The request and the output formats.
 * @throws {InferenceError} (INVALID_ARG) Naming what is malformed.
 *
 * @example Binary input after the JSON
 * ```ts
 * import { decodeInferRequest } from "./infer_request.ts";
 * import { hostTensor } from "../../tensor/device_tensor.ts";
 * import assert from "node:assert/strict";
 *
 * const json = new TextEncoder().encode(JSON.stringify({
 *   inputs: [{ name: "x", datatype: "INT16", shape: [2], parameters: { binary_data_size: 4 } }],
 * }));
 * const body = new Uint8Array([...json, 1, 0, 0, 1]);
 * const { request } = decodeInferRequest(body, json.length, { modelName: "m" });
 * assert.deepEqual([...(hostTensor(request.inputs.get("x")!, "x").data as Int16Array)], [1, 256]);
 * ```
 */
export function decodeInferRequest(
  body: Uint8Array,
  headerLength: number | undefined,
  options: DecodeInferOptions,
): HttpInferRequest {
  const reader = new BinaryDataReader(body, headerLength, {
    message: "request",
    model: options.modelName,
  });
  let parsed: unknown;
  try {
    parsed = parseJsonBytes(reader.json);
  } catch (error) {
    throw InferenceError.invalidArg(
      `Unable to parse the request JSON: ${messageOf(error)}`,
    );
  }
  if (!isObject(parsed)) {
    throw InferenceError.invalidArg("Unable to parse the request JSON: expected an object");
  }
  let id: string | undefined;
  if (parsed["id"] !== undefined) {
    if (typeof parsed["id"] !== "string") {
      throw InferenceError.invalidArg("Unable to parse 'id': expected a string");
    }
    id = parsed["id"];
  }
  const params = httpRequestParameters(parsed["parameters"], forwarding(options));
  if (!Array.isArray(parsed["inputs"])) {
    throw InferenceError.invalidArg(
      parsed["inputs"] === undefined
        ? "Unable to parse the request JSON: missing 'inputs'"
        : "Unable to parse 'inputs': expected an array",
    );
  }
  const sharedMemory = new SharedMemoryBinding(options.sharedMemory);
  try {
    return decodeBody(parsed, parsed["inputs"], reader, options, sharedMemory, id, params);
  } catch (error) {
    sharedMemory.release();
    throw error;
  }
}

function decodeBody(
  parsed: Record<string, unknown>,
  inputList: unknown[],
  reader: BinaryDataReader,
  options: DecodeInferOptions,
  sharedMemory: SharedMemoryBinding,
  id: string | undefined,
  params: RequestParameters,
): HttpInferRequest {
  const inputs = new Map<string, Tensor>();
  inputList.forEach((input: unknown, index: number) => {
    if (!isObject(input)) {
      throw InferenceError.invalidArg(`Unable to parse 'inputs[${index}]': expected an object`);
    }
    if (typeof input["name"] !== "string") {
      throw InferenceError.invalidArg(`Unable to parse 'inputs[${index}]': missing 'name' string`);
    }
    const name = input["name"];
    if (inputs.has(name)) throw InferenceError.invalidArg(`Duplicate input '${name}' in 'inputs'`);
    if (typeof input["datatype"] !== "string") {
      throw InferenceError.invalidArg(
        `Unable to parse 'datatype' of input '${name}': missing 'datatype' string`,
      );
    }
    const datatype = input["datatype"];
    const dtype = fromKServe(datatype);
    if (dtype === undefined) {
      throw InferenceError.invalidArg(
        `Invalid datatype '${datatype}' of input '${name}': expected one of BOOL, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, FP16, BF16, FP32, FP64, BYTES`,
      );
    }
    const shape = readShape(name, input["shape"]);
    const parameters = input["parameters"];
    if (parameters !== undefined && !isObject(parameters)) {
      throw InferenceError.invalidArg(
        `Unable to parse 'parameters' of input '${name}': expected an object`,
      );
    }
    const hasData = input["data"] !== undefined;
    const hasBinary = parameters?.[BINARY_DATA_SIZE] !== undefined;
    const shm = sharedMemoryRef(parameters, `input '${name}'`);
    if (shm !== undefined) {
      if (hasData || hasBinary) {
        throw InferenceError.invalidArg(
          `Input '${name}' must set only one of 'data', 'binary_data_size' and 'shared_memory_region': it sets 'shared_memory_region' and '${
            hasData ? "data" : "binary_data_size"
          }'`,
        );
      }
      inputs.set(name, sharedMemory.input(name, { dtype, shape }, shm));
      return;
    }
    if (hasData === hasBinary) {
      throw InferenceError.invalidArg(
        `Input '${name}' must set exactly one of 'data' and 'binary_data_size' in 'parameters': ${
          hasData ? "both are set" : "neither is set"
        }`,
      );
    }
    if (hasData) {
      inputs.set(name, jsonToNDArray(name, { dtype, shape }, input["data"]));
      return;
    }
    const what = `input '${name}'`;
    inputs.set(
      name,
      reader.tensor(what, { dtype, shape, size: binaryDataSize(parameters, what)! }),
    );
  });
  reader.end();
  const { names, formats } = readOutputs(parsed["outputs"], sharedMemory);
  const outputFormats = new Map<string, OutputFormat>();
  for (const [name, format] of formats) {
    outputFormats.set(name, {
      binary: format.binary ?? params.binaryDataOutput,
      classification: format.classification,
    });
  }
  const request = {
    ...inferenceRequest(options, params, inputs, id, names),
    ...sharedMemory.requestFields(),
  };
  return { request, outputFormats, defaultBinary: params.binaryDataOutput, sharedMemory };
}

function inferenceRequest(
  options: DecodeInferOptions,
  params: RequestParameters,
  inputs: Map<string, Tensor>,
  id?: string,
  outputs?: string[],
): InferenceRequest {
  return {
    modelName: options.modelName,
    ...(options.modelVersion !== undefined ? { modelVersion: options.modelVersion } : {}),
    ...(id !== undefined ? { id } : {}),
    inputs,
    ...(outputs !== undefined ? { outputs } : {}),
    parameters: params.parameters,
    ...(params.priority !== undefined ? { priority: params.priority } : {}),
    ...(params.timeoutMicroseconds !== undefined
      ? { timeoutMicroseconds: params.timeoutMicroseconds }
      : {}),
    ...(params.sequence !== undefined ? { sequence: params.sequence } : {}),
    ...(options.signal !== undefined ? { signal: options.signal } : {}),
    ...traceContextField(options.headers),
  };
}

function traceContextField(headers: Headers | undefined): { traceContext?: TraceCarrier } {
  const traceContext = headers === undefined
    ? undefined
    : traceContextOf((name) => headers.get(name) ?? undefined);
  return traceContext === undefined ? {} : { traceContext };
}

/**
 * Decodes a raw binary request (`Inference-Header-Content-Length: 0`): the whole body is the
 * only input of a one-input model. Its shape comes from the model's declared input, with batch size 1
 * for batching models and one `-1` dimension resolved from the byte size. All outputs are
 * returned binary.
 *
 * @param body The (decompressed) request body.
 * @param model The target model (its inputs and `maxBatchSize`), as `Engine.model` resolves it.
 * @param options Model name and version, headers to forward and the abort signal.
 * @returns The request.
 * @throws {InferenceError} (INVALID_ARG) For models without exactly one input, or sizes that do not fit.
 *
 * @example FP32 vector
 * ```ts
 * import { decodeRawInferRequest } from "./infer_request.ts";
 * import assert from "node:assert/strict";
 *
 * const model = { maxBatchSize: 8, inputs: [{ name: "x", dtype: "float32", shape: [-1], optional: false }] } as const;
 * const body = new Uint8Array(new Float32Array([1, 2, 3]).buffer);
 * const { request, defaultBinary } = decodeRawInferRequest(body, model, { modelName: "m" });
 * assert.deepEqual(request.inputs.get("x")!.shape, [1, 3]);
 * assert.equal(defaultBinary, true);
 * ```
 */
export function decodeRawInferRequest(
  body: Uint8Array,
  model: Pick<ModelHandle, "inputs" | "maxBatchSize">,
  options: DecodeInferOptions,
): HttpInferRequest {
  const input = model.inputs[0];
  if (model.inputs.length !== 1 || input === undefined) {
    throw InferenceError.invalidArg(
      `Raw binary request (Inference-Header-Content-Length: 0) needs a model with exactly one input: model '${options.modelName}' has ${model.inputs.length}`,
    );
  }
  const { name, dtype, shape: dims } = input;
  const batching = model.maxBatchSize > 0;
  const shape = batching ? [1, ...dims] : [...dims];
  const dynamic = shape.filter((dim) => dim === -1).length;
  const known = shape.reduce((product, dim) => dim === -1 ? product : product * dim, 1);
  let elements: Uint8Array[] | undefined;
  let count: number;
  if (dtype === "bytes") {
    try {
      // A fixed shape bounds the elements built; with a -1 the body decides the count.
      elements = deserializeBytes(body, dynamic === 0 ? known : undefined);
    } catch (error) {
      throw InferenceError.invalidArg(
        `Invalid raw binary data of input '${name}': ${(error as Error).message}`,
      );
    }
    count = elements.length;
  } else {
    const size = elementSize(dtype);
    if (body.byteLength % size !== 0) {
      throw InferenceError.invalidArg(
        `Unexpected size for raw input '${name}': ${body.byteLength} bytes is not a multiple of the ${dtype} element size ${size}`,
      );
    }
    count = body.byteLength / size;
  }
  if (dynamic > 1) {
    throw InferenceError.invalidArg(
      `Cannot infer the shape of raw input '${name}': shape [${shape}] has more than one -1 dimension`,
    );
  }
  if (dynamic === 1) {
    if (known === 0 ? count !== 0 : count % known !== 0) {
      throw InferenceError.invalidArg(
        `Unexpected size for raw input '${name}': ${count} elements do not fill shape [${shape}]`,
      );
    }
    const resolved = known === 0 ? 0 : count / known;
    shape.splice(shape.indexOf(-1), 1, resolved);
  } else if (count !== known) {
    throw InferenceError.invalidArg(
      `Unexpected size for raw input '${name}': shape [${shape}] needs ${known} elements, the body holds ${count}`,
    );
  }
  const array: NDArray = elements !== undefined
    ? { dtype: "bytes", shape, data: elements }
    : fromRawBytes(dtype, shape, body);
  const params = httpRequestParameters(undefined, forwarding(options));
  const request = inferenceRequest(options, params, new Map([[name, array]]));
  return {
    request,
    outputFormats: new Map(),
    defaultBinary: true,
    sharedMemory: new SharedMemoryBinding(options.sharedMemory),
  };
}
