/**
 * The JSON Schemas of the KServe v2 HTTP bodies, as the OpenAPI document's components, and the
 * schemas of one model's inference and generate bodies, built from its inputs and outputs (names,
 * datatypes, shapes, batching). Written as JSON Schema 2020-12 by hand rather than converted from
 * zod: the bodies are Triton's wire format, open where Triton's are (a response may carry keys a
 * newer Triton adds), and a conversion would add bounds and closed objects the wire does not have.
 *
 * Over 500 lines for a reason: it is data, one schema per KServe body (about thirty), and splitting
 * them by route would put the shared pieces (tensors, parameters, errors) in a third file that
 * every part imports.
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

const string = { type: "string" } as const;
const boolean = { type: "boolean" } as const;
const nonNegative = { type: "integer", minimum: 0 } as const;

/** A parameter value: KServe parameters are strings, numbers or booleans. */
const PARAMETER_VALUE: JsonSchema = { type: ["string", "number", "boolean"] };

const DIMS: JsonSchema = { type: "array", items: { type: "integer" } };

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
      return boolean;
    case "bytes":
      return string;
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
      return nonNegative;
    default: {
      const bits = Number(dtype.replace(/\D/g, ""));
      return dtype.startsWith("u")
        ? { type: "integer", minimum: 0, maximum: 2 ** bits - 1 }
        : { type: "integer", minimum: -(2 ** (bits - 1)), maximum: 2 ** (bits - 1) - 1 };
    }
  }
}

const TENSOR_PARAMETERS: JsonSchema = {
  type: "object",
  description:
    "`binary_data_size` (the tensor's bytes follow the JSON, binary data extension), `shared_memory_region`, `shared_memory_offset` and `shared_memory_byte_size` (system shared memory), or any other parameter.",
  properties: {
    binary_data_size: nonNegative,
    shared_memory_region: string,
    shared_memory_offset: nonNegative,
    shared_memory_byte_size: nonNegative,
  },
  additionalProperties: PARAMETER_VALUE,
};

const OUTPUT_PARAMETERS: JsonSchema = {
  type: "object",
  description:
    "`binary_data` (answer this output as binary data after the JSON), `classification` (the top N classes as BYTES), or the system shared-memory parameters.",
  properties: {
    binary_data: boolean,
    classification: nonNegative,
    shared_memory_region: string,
    shared_memory_offset: nonNegative,
    shared_memory_byte_size: nonNegative,
  },
  additionalProperties: PARAMETER_VALUE,
};

/** The schemas every document holds, by name (`#/components/schemas/<name>`). */
export const COMPONENT_SCHEMAS: Readonly<Record<string, JsonSchema>> = {
  Error: {
    type: "object",
    required: ["error"],
    properties: { error: { ...string, description: "What was wrong." } },
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
    properties: { name: string, version: string, extensions: { type: "array", items: string } },
  },
  TensorMetadata: {
    type: "object",
    required: ["name", "datatype", "shape"],
    properties: {
      name: string,
      datatype: { enum: KSERVE_DATATYPES },
      shape: { ...DIMS, description: "-1 for a variable dimension, the batch axis first." },
    },
  },
  ModelMetadata: {
    type: "object",
    required: ["name", "platform", "inputs", "outputs"],
    properties: {
      name: string,
      versions: { type: "array", items: string },
      platform: string,
      inputs: { type: "array", items: schemaRef("TensorMetadata") },
      outputs: { type: "array", items: schemaRef("TensorMetadata") },
    },
  },
  ModelConfig: {
    type: "object",
    description: "Triton's model configuration (`model_config.proto`) as JSON.",
    required: ["name"],
    properties: {
      name: string,
      backend: string,
      max_batch_size: { type: "integer" },
      input: { type: "array", items: { type: "object" } },
      output: { type: "array", items: { type: "object" } },
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
            name: string,
            version: string,
            last_inference: nonNegative,
            inference_count: nonNegative,
            execution_count: nonNegative,
            inference_stats: { type: "object" },
            response_stats: { type: "object" },
            batch_stats: { type: "array", items: { type: "object" } },
            memory_usage: { type: "array", items: { type: "object" } },
          },
        },
      },
    },
  },
  RepositoryIndexRequest: {
    type: "object",
    properties: { ready: { ...boolean, description: "List only the models ready to serve." } },
  },
  RepositoryIndex: {
    type: "array",
    items: {
      type: "object",
      required: ["name"],
      properties: {
        name: string,
        version: string,
        state: string,
        reason: string,
      },
    },
  },
  RepositoryLoadRequest: {
    type: "object",
    description:
      "A load with a new `config` or files in `parameters` is refused: the repository holds the bound models.",
    properties: { parameters: { type: "object" } },
  },
  SystemSharedMemoryStatus: {
    type: "array",
    items: {
      type: "object",
      required: ["name", "key", "offset", "byte_size"],
      properties: { name: string, key: string, offset: nonNegative, byte_size: nonNegative },
    },
  },
  SystemSharedMemoryRegisterRequest: {
    type: "object",
    required: ["key", "byte_size"],
    properties: {
      key: { ...string, description: "The POSIX shared-memory object's name (`shm_open`)." },
      offset: nonNegative,
      byte_size: nonNegative,
    },
  },
  CudaSharedMemoryStatus: {
    type: "array",
    items: {
      type: "object",
      required: ["name", "device_id", "byte_size"],
      properties: { name: string, device_id: nonNegative, byte_size: nonNegative },
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
            ...string,
            description:
              "The `cudaIpcMemHandle_t` of the client's allocation (`cudaIpcGetMemHandle`), 64 bytes in base64.",
          },
        },
      },
      device_id: { ...nonNegative, description: "The CUDA device the allocation is on." },
      byte_size: nonNegative,
    },
  },
  LogSettings: {
    type: "object",
    required: [
      "log_file",
      "log_info",
      "log_warning",
      "log_error",
      "log_verbose_level",
      "log_format",
    ],
    properties: {
      log_file: string,
      log_info: boolean,
      log_warning: boolean,
      log_error: boolean,
      log_verbose_level: { type: "integer", minimum: 0, maximum: 2 ** 31 - 1 },
      log_format: { enum: ["default", "ISO8601"] },
    },
  },
  LogSettingsRequest: {
    type: "object",
    description:
      "The settings to change; a null leaves one as it is. `log_file` cannot be changed over the network (501).",
    properties: {
      log_file: { type: ["string", "null"] },
      log_info: { type: ["boolean", "null"] },
      log_warning: { type: ["boolean", "null"] },
      log_error: { type: ["boolean", "null"] },
      log_verbose_level: { type: ["integer", "null"], minimum: 0, maximum: 2 ** 31 - 1 },
      log_format: { enum: ["default", "ISO8601", null] },
    },
    additionalProperties: false,
  },
  TraceSettings: {
    type: "object",
    required: ["trace_level", "trace_rate", "trace_count", "log_frequency", "trace_file"],
    properties: {
      trace_level: { type: "array", items: string },
      trace_rate: string,
      trace_count: string,
      log_frequency: string,
      trace_file: string,
      trace_mode: string,
    },
  },
  TraceSettingsRequest: {
    type: "object",
    description:
      "The settings to change (the others stay); `null` clears a setting back to the global value (for a model) or the start value. `trace_level`: `OFF`, or `TIMESTAMPS` and/or `TENSORS`; `trace_rate`: 1 or more; `trace_count`: -1 (no limit) or more; `log_frequency`: 0 or more; `trace_file`: a path in an existing directory; `trace_mode` cannot change.",
    properties: {
      trace_level: { type: ["array", "null"], items: string },
      trace_rate: { type: ["string", "null"] },
      trace_count: { type: ["string", "null"] },
      log_frequency: { type: ["string", "null"] },
      trace_file: { type: ["string", "null"] },
      trace_mode: { type: ["string", "null"] },
    },
  },
  RequestInput: {
    type: "object",
    required: ["name", "shape", "datatype"],
    properties: {
      name: string,
      shape: { type: "array", items: nonNegative },
      datatype: { enum: KSERVE_DATATYPES },
      parameters: TENSOR_PARAMETERS,
      data: {
        description:
          "The elements, row-major, flat or nested; absent when the tensor is binary data or in shared memory.",
      },
    },
  },
  RequestOutput: {
    type: "object",
    required: ["name"],
    properties: { name: string, parameters: OUTPUT_PARAMETERS },
  },
  InferenceRequest: {
    type: "object",
    required: ["inputs"],
    properties: {
      id: string,
      parameters: schemaRef("Parameters"),
      inputs: { type: "array", items: schemaRef("RequestInput") },
      outputs: { type: "array", items: schemaRef("RequestOutput") },
    },
  },
  ResponseOutput: {
    type: "object",
    required: ["name", "shape", "datatype"],
    properties: {
      name: string,
      shape: { type: "array", items: nonNegative },
      datatype: { enum: KSERVE_DATATYPES },
      parameters: { type: "object", additionalProperties: PARAMETER_VALUE },
      data: { type: "array" },
    },
  },
  InferenceResponse: {
    type: "object",
    required: ["model_name", "outputs"],
    properties: {
      model_name: string,
      model_version: string,
      id: string,
      parameters: { type: "object", additionalProperties: PARAMETER_VALUE },
      outputs: { type: "array", items: schemaRef("ResponseOutput") },
    },
  },
  GenerateRequest: {
    type: "object",
    description:
      "`id`, `parameters`, and one key per input (a scalar or a flat list of its elements); any other key is a request parameter.",
    properties: { id: string, parameters: schemaRef("Parameters") },
  },
  GenerateResponse: {
    type: "object",
    description: "`model_name`, `model_version`, `id`, and one key per output or parameter.",
    required: ["model_name", "model_version"],
    properties: { model_name: string, model_version: string, id: string },
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
    dim === -1 ? nonNegative : { type: "integer", const: dim }
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
      shape: { type: "array", items: nonNegative },
      data: { type: "array", items: element === undefined ? string : { anyOf: [element, string] } },
      parameters: { type: "object", additionalProperties: PARAMETER_VALUE },
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
  return {
    type: "object",
    required: ["inputs"],
    properties: {
      id: string,
      parameters: schemaRef("Parameters"),
      inputs: {
        type: "array",
        description: "Each input at most once, in any order; the optional ones may be left out.",
        items: { oneOf: model.inputs.map((spec) => inputSchema(model, spec)) },
        minItems: required,
        maxItems: model.inputs.length,
      },
      outputs: {
        type: "array",
        description: "The outputs to answer, and how; all of them when absent.",
        items: {
          type: "object",
          required: ["name"],
          properties: {
            name: { enum: model.outputs.map((spec) => spec.name) },
            parameters: OUTPUT_PARAMETERS,
          },
        },
      },
    },
  };
}

/**
 * A request a docs page can send to one model as it is: every required input, with zeros.
 *
 * @param model The model.
 * @returns The request, or `undefined` when an input cannot be sent as JSON (FP16, BF16).
 */
export function modelInferExample(model: ModelHandle): unknown {
  const inputs = model.inputs.filter((spec) => !spec.optional);
  if (inputs.some((spec) => elementSchema(spec.dtype) === undefined)) return undefined;
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
      model_name: { const: model.name },
      model_version: string,
      id: string,
      parameters: { type: "object", additionalProperties: PARAMETER_VALUE },
      outputs: { type: "array", items: { oneOf: model.outputs.map(outputSchema) } },
    },
  };
}

function generateValue(spec: ResolvedTensorSpec): JsonSchema {
  const element = elementSchema(spec.dtype);
  // FP16 and BF16 cannot travel as JSON: the server refuses them with a 400.
  if (element === undefined) return {};
  return { anyOf: [element, { type: "array", items: element }] };
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
      id: string,
      parameters: schemaRef("Parameters"),
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
  const inputs = model.inputs.filter((spec) => !spec.optional);
  if (inputs.some((spec) => elementSchema(spec.dtype) === undefined)) return undefined;
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
      model_name: { const: model.name },
      model_version: string,
      id: string,
      ...Object.fromEntries(model.outputs.map((spec) => [spec.name, generateValue(spec)])),
    },
  };
}
