/**
 * The JSON Schemas of the KServe v2 HTTP bodies, as the OpenAPI document's components, and the
 * schemas of one model's inference and generate bodies, built from its inputs and outputs (names,
 * datatypes, shapes, batching). Written as JSON Schema 2020-12 by hand rather than converted from
 * zod: the bodies are Triton's wire format, open where Triton's are (a response may carry keys a
 * newer Triton adds), and a conversion would add bounds and closed objects the wire does not have.
 *
 * Over 500 lines for a reason: it is data, one schema per KServe body (about thirty), and splitting
 * them by route would put the shared pieces (tensors, parameters, errors) in a third file that
 * every part imports. The pieces the OpenAI bodies' schemas (`../openai/openapi_schemas.ts`) share
 * with these are exported from here, so each is written once.
 *
 * @module
 */

import type { ModelHandle } from "../../engine/engine.ts";
import type { ResolvedTensorSpec } from "../../config/tensor_spec.ts";
import { type DType, kserveName } from "../../tensor/dtype.ts";
import { type JsonSchema, schemaRef } from "./route_doc.ts";

/** Every KServe datatype name. */
export const KSERVE_DATATYPES: readonly string[] = [
  "BOOL",
  "UINT8",
  "UINT16",
  "UINT32",
  "UINT64",
  "INT8",
  "INT16",
  "INT32",
  "INT64",
  "FP16",
  "FP32",
  "FP64",
  "BF16",
  "BYTES",
];

/** A string: the schema both the KServe and the OpenAI bodies' schemas build on. */
export const STRING: { readonly type: "string" } = { type: "string" };
/** A non-negative integer: a count, a size, an offset. */
export const NON_NEGATIVE: { readonly type: "integer"; readonly minimum: 0 } = {
  type: "integer",
  minimum: 0,
};
const BOOLEAN = { type: "boolean" } as const;
const STRINGS = { type: "array", items: STRING } as const;
/** Objects this document leaves open (Triton's own, described elsewhere). */
const OBJECT: JsonSchema = { type: "object" };
const OBJECTS: JsonSchema = { type: "array", items: OBJECT };

/** The field of an error body that says what was wrong (KServe's `error`, OpenAI's `message`). */
export const ERROR_MESSAGE: JsonSchema = { ...STRING, description: "What was wrong." };

/**
 * One item, or a list of them: the alternatives of an `anyOf` (a generate request's scalar or
 * flat list, OpenAI's string or list of strings).
 *
 * @param item The item's schema.
 * @param bounds The list's `minItems` and `maxItems`, if any.
 * @returns The two alternatives.
 *
 * @example A string, or one or two strings
 * ```ts
 * import { oneOrMany, STRING } from "./openapi_schemas.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(oneOrMany(STRING, { minItems: 1, maxItems: 2 }), [
 *   { type: "string" },
 *   { type: "array", items: { type: "string" }, minItems: 1, maxItems: 2 },
 * ]);
 * ```
 */
export function oneOrMany(
  item: JsonSchema,
  bounds: { readonly minItems?: number; readonly maxItems?: number } = {},
): JsonSchema[] {
  return [item, { type: "array", items: item, ...bounds }];
}

/** The same fields (each with one `type` or an `enum`), each also null: a settings request's. */
function nullable(
  fields: Readonly<Record<string, Readonly<Record<string, unknown>>>>,
): Record<string, JsonSchema> {
  return Object.fromEntries(
    Object.entries(fields).map(([name, schema]) => [
      name,
      Array.isArray(schema["enum"])
        ? { ...schema, enum: [...schema["enum"], null] }
        : { ...schema, type: [schema["type"], "null"] },
    ]),
  );
}

/** A parameter value: KServe parameters are strings, numbers or booleans. */
const PARAMETER_VALUE: JsonSchema = { type: ["string", "number", "boolean"] };

/** The parameters of a response or of one of its outputs: any, as Triton answers them. */
const RESPONSE_PARAMETERS: JsonSchema = { type: "object", additionalProperties: PARAMETER_VALUE };

const DIMS: JsonSchema = { type: "array", items: { type: "integer" } };
/** A tensor's shape on the wire, as the server reads and answers it (no `-1`). */
const SHAPE: JsonSchema = { type: "array", items: NON_NEGATIVE };
const DATATYPE: JsonSchema = { enum: KSERVE_DATATYPES };

/** The head of every request body: its `id` and request parameters. */
const REQUEST_HEAD: Readonly<Record<string, JsonSchema>> = {
  id: STRING,
  parameters: schemaRef("Parameters"),
};

/** The head of every response body: the model's name (`model`'s, or any), version, and `id`. */
function responseHead(model?: string): Record<string, JsonSchema> {
  return {
    model_name: model === undefined ? STRING : { const: model },
    model_version: STRING,
    id: STRING,
  };
}

/**
 * The schema of one element of a JSON tensor of a datatype; `undefined` for FP16 and BF16, which
 * travel only as binary data.
 *
 * @param dtype The datatype.
 * @returns The element's schema.
 *
 * @example A uint8 element's range; none for float16
 * ```ts
 * import { elementSchema } from "./openapi_schemas.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(elementSchema("uint8"), { type: "integer", minimum: 0, maximum: 255 });
 * assert.equal(elementSchema("float16"), undefined);
 * ```
 */
export function elementSchema(dtype: DType): JsonSchema | undefined {
  switch (dtype) {
    case "bool":
      return BOOLEAN;
    case "bytes":
      return STRING;
    case "float16":
    case "bfloat16":
      return undefined;
    case "float32":
    case "float64":
      return { type: "number" };
    // 64-bit bounds are beyond a JSON number's exact range: the server checks them.
    case "int64":
      return { type: "integer" };
    case "uint64":
      return NON_NEGATIVE;
    default: {
      const bits = Number(dtype.replace(/\D/g, ""));
      return dtype.startsWith("u")
        ? { type: "integer", minimum: 0, maximum: 2 ** bits - 1 }
        : { type: "integer", minimum: -(2 ** (bits - 1)), maximum: 2 ** (bits - 1) - 1 };
    }
  }
}

/** The system shared-memory parameters of an input or an output. */
const SHARED_MEMORY_PARAMETERS: Readonly<Record<string, JsonSchema>> = {
  shared_memory_region: STRING,
  shared_memory_offset: NON_NEGATIVE,
  shared_memory_byte_size: NON_NEGATIVE,
};

const TENSOR_PARAMETERS: JsonSchema = {
  type: "object",
  description:
    "`binary_data_size` (the tensor's bytes follow the JSON, binary data extension), `shared_memory_region`, `shared_memory_offset` and `shared_memory_byte_size` (system shared memory), or any other parameter.",
  properties: {
    binary_data_size: NON_NEGATIVE,
    ...SHARED_MEMORY_PARAMETERS,
  },
  additionalProperties: PARAMETER_VALUE,
};

const OUTPUT_PARAMETERS: JsonSchema = {
  type: "object",
  description:
    "`binary_data` (answer this output as binary data after the JSON), `classification` (the top N classes as BYTES), or the system shared-memory parameters.",
  properties: {
    binary_data: BOOLEAN,
    classification: NON_NEGATIVE,
    ...SHARED_MEMORY_PARAMETERS,
  },
  additionalProperties: PARAMETER_VALUE,
};

/** The log settings, as the server answers them; a request may set each to null too. */
const LOG_SETTINGS = {
  log_file: STRING,
  log_info: BOOLEAN,
  log_warning: BOOLEAN,
  log_error: BOOLEAN,
  log_verbose_level: { type: "integer", minimum: 0, maximum: 2 ** 31 - 1 },
  log_format: { enum: ["default", "ISO8601"] },
} as const;

/** The trace settings, as the server answers them; a request may set each to null too. */
const TRACE_SETTINGS = {
  trace_level: STRINGS,
  trace_rate: STRING,
  trace_count: STRING,
  log_frequency: STRING,
  trace_file: STRING,
  trace_mode: STRING,
} as const;

/** An output a request asks for, and how; `name`: any name, or one of a model's outputs. */
function requestOutput(name: JsonSchema): JsonSchema {
  return {
    type: "object",
    required: ["name"],
    properties: { name, parameters: OUTPUT_PARAMETERS },
  };
}

/** A JSON inference request, any model's or one model's (its `inputs` and `outputs` lists). */
function inferRequest(inputs: JsonSchema, outputs: JsonSchema): JsonSchema {
  return { type: "object", required: ["inputs"], properties: { ...REQUEST_HEAD, inputs, outputs } };
}

/** The schemas every document holds, by name (`#/components/schemas/<name>`). */
export const COMPONENT_SCHEMAS: Readonly<Record<string, JsonSchema>> = {
  Error: {
    type: "object",
    required: ["error"],
    properties: { error: ERROR_MESSAGE },
  },
  Parameters: {
    type: "object",
    description:
      "Request parameters: `priority`, `timeout` (µs), `binary_data_output`, `sequence_id` (an unsigned 64-bit integer or a string), `sequence_start` and `sequence_end` (a model with sequence batching), or any other, which reaches the model.",
    additionalProperties: PARAMETER_VALUE,
  },
  ServerMetadata: {
    type: "object",
    required: ["name", "version", "extensions"],
    properties: { name: STRING, version: STRING, extensions: STRINGS },
  },
  TensorMetadata: {
    type: "object",
    required: ["name", "datatype", "shape"],
    properties: {
      name: STRING,
      datatype: DATATYPE,
      shape: { ...DIMS, description: "-1 for a variable dimension, the batch axis first." },
    },
  },
  ModelMetadata: {
    type: "object",
    required: ["name", "platform", "inputs", "outputs"],
    properties: {
      name: STRING,
      versions: STRINGS,
      platform: STRING,
      inputs: { type: "array", items: schemaRef("TensorMetadata") },
      outputs: { type: "array", items: schemaRef("TensorMetadata") },
    },
  },
  ModelConfig: {
    type: "object",
    description: "Triton's model configuration (`model_config.proto`) as JSON.",
    required: ["name"],
    properties: {
      name: STRING,
      backend: STRING,
      max_batch_size: { type: "integer" },
      input: OBJECTS,
      output: OBJECTS,
    },
  },
  ModelStatistics: {
    type: "object",
    required: ["model_stats"],
    properties: {
      model_stats: {
        type: "array",
        items: {
          type: "object",
          required: ["name", "version"],
          properties: {
            name: STRING,
            version: STRING,
            last_inference: NON_NEGATIVE,
            inference_count: NON_NEGATIVE,
            execution_count: NON_NEGATIVE,
            inference_stats: OBJECT,
            response_stats: OBJECT,
            batch_stats: OBJECTS,
            memory_usage: OBJECTS,
          },
        },
      },
    },
  },
  RepositoryIndexRequest: {
    type: "object",
    properties: { ready: { ...BOOLEAN, description: "List only the models ready to serve." } },
  },
  RepositoryIndex: {
    type: "array",
    items: {
      type: "object",
      required: ["name"],
      properties: {
        name: STRING,
        version: STRING,
        state: STRING,
        reason: STRING,
      },
    },
  },
  RepositoryLoadRequest: {
    type: "object",
    description:
      "A load with a new `config` or files in `parameters` is refused: the repository holds the bound models.",
    properties: { parameters: OBJECT },
  },
  SystemSharedMemoryStatus: {
    type: "array",
    items: {
      type: "object",
      required: ["name", "key", "offset", "byte_size"],
      properties: { name: STRING, key: STRING, offset: NON_NEGATIVE, byte_size: NON_NEGATIVE },
    },
  },
  SystemSharedMemoryRegisterRequest: {
    type: "object",
    required: ["key", "byte_size"],
    properties: {
      key: { ...STRING, description: "The POSIX shared-memory object's name (`shm_open`)." },
      offset: NON_NEGATIVE,
      byte_size: NON_NEGATIVE,
    },
  },
  CudaSharedMemoryStatus: {
    type: "array",
    items: {
      type: "object",
      required: ["name", "device_id", "byte_size"],
      properties: { name: STRING, device_id: NON_NEGATIVE, byte_size: NON_NEGATIVE },
    },
  },
  CudaSharedMemoryRegisterRequest: {
    type: "object",
    required: ["raw_handle", "device_id", "byte_size"],
    properties: {
      raw_handle: {
        type: "object",
        required: ["b64"],
        properties: {
          b64: {
            ...STRING,
            description:
              "The `cudaIpcMemHandle_t` of the client's allocation (`cudaIpcGetMemHandle`), 64 bytes in base64.",
          },
        },
      },
      device_id: { ...NON_NEGATIVE, description: "The CUDA device the allocation is on." },
      byte_size: NON_NEGATIVE,
    },
  },
  LogSettings: {
    type: "object",
    required: Object.keys(LOG_SETTINGS),
    properties: LOG_SETTINGS,
  },
  LogSettingsRequest: {
    type: "object",
    description:
      "The settings to change; a null leaves one as it is. `log_file` cannot be changed over the network (501).",
    properties: nullable(LOG_SETTINGS),
    additionalProperties: false,
  },
  TraceSettings: {
    type: "object",
    required: ["trace_level", "trace_rate", "trace_count", "log_frequency", "trace_file"],
    properties: TRACE_SETTINGS,
  },
  TraceSettingsRequest: {
    type: "object",
    description:
      "The settings to change (the others stay); `null` clears a setting back to the global value (for a model) or the start value. `trace_level`: `OFF`, or `TIMESTAMPS` and/or `TENSORS`; `trace_rate`: 1 or more; `trace_count`: -1 (no limit) or more; `log_frequency`: 0 or more; `trace_file`: a path in an existing directory; `trace_mode` cannot change.",
    properties: nullable(TRACE_SETTINGS),
  },
  RequestInput: {
    type: "object",
    required: ["name", "shape", "datatype"],
    properties: {
      name: STRING,
      shape: SHAPE,
      datatype: DATATYPE,
      parameters: TENSOR_PARAMETERS,
      data: {
        description:
          "The elements, row-major, flat or nested; absent when the tensor is binary data or in shared memory.",
      },
    },
  },
  RequestOutput: requestOutput(STRING),
  InferenceRequest: inferRequest(
    { type: "array", items: schemaRef("RequestInput") },
    { type: "array", items: schemaRef("RequestOutput") },
  ),
  ResponseOutput: {
    type: "object",
    required: ["name", "shape", "datatype"],
    properties: {
      name: STRING,
      shape: SHAPE,
      datatype: DATATYPE,
      parameters: RESPONSE_PARAMETERS,
      data: { type: "array" },
    },
  },
  InferenceResponse: {
    type: "object",
    required: ["model_name", "outputs"],
    properties: {
      ...responseHead(),
      parameters: RESPONSE_PARAMETERS,
      outputs: { type: "array", items: schemaRef("ResponseOutput") },
    },
  },
  GenerateRequest: {
    type: "object",
    description:
      "`id`, `parameters`, and one key per input (a scalar or a flat list of its elements); any other key is a request parameter.",
    properties: REQUEST_HEAD,
  },
  GenerateResponse: {
    type: "object",
    description: "`model_name`, `model_version`, `id`, and one key per output or parameter.",
    required: ["model_name", "model_version"],
    properties: responseHead(),
  },
};

/** The binary data extension's body: the JSON, then the tensors' bytes. */
export const BINARY_BODY: JsonSchema = {
  type: "string",
  format: "binary",
  description:
    "The JSON request (its length in `Inference-Header-Content-Length`), then each binary tensor's bytes; with `Inference-Header-Content-Length: 0`, the whole body is the model's only input.",
};

/** The full shape of a tensor on the wire: the batch axis first when the model batches. */
function wireShape(model: ModelHandle, spec: ResolvedTensorSpec): JsonSchema {
  const dims: JsonSchema[] = spec.shape.map((dim) =>
    dim === -1 ? NON_NEGATIVE : { type: "integer", const: dim }
  );
  if (model.maxBatchSize > 0) {
    dims.unshift({ type: "integer", minimum: 1, maximum: model.maxBatchSize });
  }
  return {
    type: "array",
    prefixItems: dims,
    items: false,
    minItems: dims.length,
    maxItems: dims.length,
  };
}

function exampleShape(model: ModelHandle, spec: ResolvedTensorSpec): number[] {
  const dims = spec.shape.map((dim) => (dim === -1 ? 1 : dim));
  return model.maxBatchSize > 0 ? [1, ...dims] : dims;
}

/** The inputs an example sends (the required ones), or `undefined` when one cannot be JSON. */
function exampleInputs(model: ModelHandle): ResolvedTensorSpec[] | undefined {
  const inputs = model.inputs.filter((spec) => !spec.optional);
  return inputs.some((spec) => elementSchema(spec.dtype) === undefined) ? undefined : inputs;
}

function exampleElement(dtype: DType): unknown {
  if (dtype === "bool") return false;
  if (dtype === "bytes") return "";
  return 0;
}

function inputSchema(model: ModelHandle, spec: ResolvedTensorSpec): JsonSchema {
  const element = elementSchema(spec.dtype);
  const datatype = kserveName(spec.dtype);
  return {
    type: "object",
    title: spec.name,
    required: ["name", "datatype", "shape"],
    properties: {
      name: { const: spec.name },
      datatype: { const: datatype },
      shape: wireShape(model, spec),
      ...(element === undefined ? {} : {
        data: {
          type: "array",
          items: element,
          description: "The elements, row-major (nested arrays are accepted too).",
        },
      }),
      parameters: TENSOR_PARAMETERS,
    },
    ...(element === undefined
      ? { description: `${datatype} travels only as binary data (\`binary_data_size\`).` }
      : {}),
  };
}

function outputSchema(spec: ResolvedTensorSpec): JsonSchema {
  const element = elementSchema(spec.dtype);
  return {
    type: "object",
    title: spec.name,
    required: ["name", "datatype", "shape"],
    properties: {
      name: { const: spec.name },
      // A classification output answers BYTES ("score:index[:label]") instead.
      datatype: { enum: [...new Set([kserveName(spec.dtype), "BYTES"])] },
      shape: SHAPE,
      data: { type: "array", items: element === undefined ? STRING : { anyOf: [element, STRING] } },
      parameters: RESPONSE_PARAMETERS,
    },
  };
}

/**
 * The JSON inference request one model takes: its inputs by name, datatype and shape (the batch
 * axis up to its `maxBatchSize`), each at most once.
 *
 * @param model The model.
 * @returns The schema.
 *
 * @example A batched input's shape schema
 * ```ts
 * import { modelInferRequestSchema } from "./openapi_schemas.ts";
 * import type { ModelHandle } from "../../engine/engine.ts";
 * import assert from "node:assert/strict";
 *
 * const model = {
 *   name: "m", maxBatchSize: 4, decoupled: false, outputs: [],
 *   inputs: [{ name: "x", dtype: "int8", shape: [2], optional: false }],
 * } as unknown as ModelHandle;
 * const schema = modelInferRequestSchema(model) as {
 *   properties: { inputs: { items: { oneOf: { properties: { shape: unknown } }[] } } };
 * };
 * assert.deepEqual(schema.properties.inputs.items.oneOf[0]!.properties.shape, {
 *   type: "array",
 *   prefixItems: [{ type: "integer", minimum: 1, maximum: 4 }, { type: "integer", const: 2 }],
 *   items: false, minItems: 2, maxItems: 2,
 * });
 * ```
 */
export function modelInferRequestSchema(model: ModelHandle): JsonSchema {
  const required = model.inputs.filter((spec) => !spec.optional).length;
  return inferRequest(
    {
      type: "array",
      description: "Each input at most once, in any order; the optional ones may be left out.",
      items: { oneOf: model.inputs.map((spec) => inputSchema(model, spec)) },
      minItems: required,
      maxItems: model.inputs.length,
    },
    {
      type: "array",
      description: "The outputs to answer, and how; all of them when absent.",
      items: requestOutput({ enum: model.outputs.map((spec) => spec.name) }),
    },
  );
}

/**
 * A request a docs page can send to one model as it is: every required input, with zeros.
 *
 * @param model The model.
 * @returns The request, or `undefined` when an input cannot be sent as JSON (FP16, BF16).
 */
export function modelInferExample(model: ModelHandle): unknown {
  const inputs = exampleInputs(model);
  if (inputs === undefined) return undefined;
  return {
    inputs: inputs.map((spec) => {
      const shape = exampleShape(model, spec);
      const count = shape.reduce((product, dim) => product * dim, 1);
      return {
        name: spec.name,
        datatype: kserveName(spec.dtype),
        shape,
        data: new Array(count).fill(exampleElement(spec.dtype)),
      };
    }),
  };
}

/**
 * The JSON inference response of one model.
 *
 * @param model The model.
 * @returns The schema.
 */
export function modelInferResponseSchema(model: ModelHandle): JsonSchema {
  return {
    type: "object",
    required: ["model_name", "model_version", "outputs"],
    properties: {
      ...responseHead(model.name),
      parameters: RESPONSE_PARAMETERS,
      outputs: { type: "array", items: { oneOf: model.outputs.map(outputSchema) } },
    },
  };
}

function generateValue(spec: ResolvedTensorSpec): JsonSchema {
  const element = elementSchema(spec.dtype);
  // FP16 and BF16 cannot travel as JSON: the server refuses them with a 400.
  if (element === undefined) return {};
  return { anyOf: oneOrMany(element) };
}

/**
 * The generate request of one model: one key per input.
 *
 * @param model The model.
 * @returns The schema.
 */
export function modelGenerateRequestSchema(model: ModelHandle): JsonSchema {
  return {
    type: "object",
    description:
      "One key per input (a scalar or a flat list of its elements), `id`, `parameters`; any other key is a request parameter.",
    required: model.inputs.filter((spec) => !spec.optional).map((spec) => spec.name),
    properties: {
      ...REQUEST_HEAD,
      ...Object.fromEntries(model.inputs.map((spec) => [spec.name, generateValue(spec)])),
    },
  };
}

/**
 * A generate request a docs page can send as it is.
 *
 * @param model The model.
 * @returns The request, or `undefined` when an input cannot be sent as JSON.
 */
export function modelGenerateExample(model: ModelHandle): unknown {
  const inputs = exampleInputs(model);
  if (inputs === undefined) return undefined;
  return Object.fromEntries(inputs.map((spec) => {
    // Without the batch axis: a generate request is one row.
    const count = spec.shape.reduce((product, dim) => product * (dim === -1 ? 1 : dim), 1);
    const element = exampleElement(spec.dtype);
    return [spec.name, count === 1 ? element : new Array(count).fill(element)];
  }));
}

/**
 * The generate response of one model: one key per output.
 *
 * @param model The model.
 * @returns The schema.
 */
export function modelGenerateResponseSchema(model: ModelHandle): JsonSchema {
  return {
    type: "object",
    required: ["model_name", "model_version"],
    properties: {
      ...responseHead(model.name),
      ...Object.fromEntries(model.outputs.map((spec) => [spec.name, generateValue(spec)])),
    },
  };
}
