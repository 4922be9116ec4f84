/**
 * Triton's generate extension on the HTTP front end: `POST /v2/models/{m}[/versions/{v}]/generate`
 * answers one JSON object, `/generate_stream` answers Server-Sent Events, one per response. The
 * wire rules (the request and response objects, tensor values and their shapes, the events) are
 * `protocol/generate.ts`'s, which the client follows too. What only the server does, with Triton
 * 2.51's `http_server.cc` as the reference:
 *
 * - A request key that names no input becomes a request parameter (`priority` and `timeout` set
 *   the request's fields, as on `/infer`); forwarded headers are added as string parameters.
 * - A response's keys are in code-unit order, like Triton's `std::map`.
 * - `/generate` needs exactly one response (a second one ends the request with 400 at once);
 *   `/generate_stream` also serves decoupled models.
 * - A failure before the first response answers a JSON error with its status; a failure after
 *   responses were streamed is one last event `data: {"error": "..."}`.
 * - A client that disconnects aborts the request's signal (the callable sees `request.signal`
 *   aborted) and the engine stops pulling responses.
 *
 * @module
 */

import { isNonNegativeInteger, isObject } from "../../json_values.ts";
import type { ParameterValue } from "../../callable/types.ts";
import type {
  Engine,
  InferenceRequest,
  InferenceResponse,
  ModelHandle,
  ModelMetadata,
  StreamResponse,
} from "../../engine/engine.ts";
import { InferenceError, toInferenceError } from "../../errors.ts";
import { fromKServe } from "../../tensor/dtype.ts";
import type { NDArray } from "../../tensor/ndarray.ts";
import {
  generateElements,
  generateErrorJson,
  generateShape,
  generateValue,
  sseEvent,
} from "../../protocol/generate.ts";
import { jsonToNDArray, ndarrayToJson, parseJsonBytes } from "../../protocol/json_tensor.ts";
import { forwardedHeaders } from "../../protocol/request_parameters.ts";
import { readRequestBody } from "./compression.ts";
import { hostTensors } from "../../tensor/device_tensor.ts";

/** Options of {@linkcode decodeGenerateRequest}. */
export interface DecodeGenerateOptions {
  /**
   * The model version from the URL.
   *
   * @default {undefined}
   */
  modelVersion?: number;
  /**
   * The HTTP headers, for forwarding.
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
   * Aborts the request.
   *
   * @default {undefined}
   */
  signal?: AbortSignal;
}

/** The message of `/generate` when a model does not answer exactly one response. */
export const ONE_RESPONSE_MESSAGE =
  "generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses";

function parameterOf(key: string, value: unknown): ParameterValue {
  if (typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number" && Number.isFinite(value)) return value;
  if (typeof value === "bigint") return Number(value);
  throw InferenceError.invalidArg(
    `parameter '${key}' has invalid type. It should be either 'int', 'bool', or 'string'.`,
  );
}

function nonNegativeInteger(key: string, value: ParameterValue): number {
  if (isNonNegativeInteger(value)) return value;
  throw InferenceError.invalidArg(
    `Invalid request parameter '${key}': expected a non-negative integer, got ${
      JSON.stringify(value)
    }`,
  );
}

/**
 * Decodes a generate request body into an inference request.
 *
 * @param body The request body (JSON; empty means `{}`).
 * @param metadata The model metadata (input names, datatypes, shapes).
 * @param options Version, headers, forwarding pattern and signal.
 * @returns The inference request.
 * @throws {InferenceError} (INVALID_ARG) For bad JSON, values or parameters.
 *
 * @example A scalar prompt and a parameter
 * ```ts
 * import { decodeGenerateRequest } from "./generate.ts";
 * import assert from "node:assert/strict";
 *
 * const metadata = {
 *   name: "m", versions: ["1"], platform: "", outputs: [],
 *   inputs: [{ name: "text_input", datatype: "BYTES", shape: [-1, 1] }],
 * };
 * const body = new TextEncoder().encode('{"text_input":"hi","max_tokens":3}');
 * const request = decodeGenerateRequest(body, metadata);
 * assert.deepEqual(request.inputs.get("text_input")?.shape, [1, 1]);
 * assert.deepEqual(request.parameters, { max_tokens: 3 });
 * ```
 */
export function decodeGenerateRequest(
  body: Uint8Array,
  metadata: ModelMetadata,
  options: DecodeGenerateOptions = {},
): InferenceRequest {
  let json: unknown = {};
  if (body.byteLength > 0) {
    try {
      json = parseJsonBytes(body);
    } catch (error) {
      throw InferenceError.invalidArg(
        `Unable to parse the generate request JSON: ${(error as Error).message}`,
      );
    }
  }
  if (!isObject(json)) {
    throw InferenceError.invalidArg(
      "Unable to parse the generate request JSON: expected an object",
    );
  }
  const declared = new Map(metadata.inputs.map((input) => [input.name, input]));
  const inputs = new Map<string, NDArray>();
  const parameters: Record<string, ParameterValue> = {};
  let id: string | undefined;
  const take = (key: string, value: unknown): void => {
    const input = declared.get(key);
    if (input === undefined) {
      parameters[key] = parameterOf(key, value);
      return;
    }
    if (inputs.has(key)) throw InferenceError.invalidArg(`Input '${key}' is given more than once`);
    const dtype = fromKServe(input.datatype);
    if (dtype === undefined) {
      throw InferenceError.invalidArg(`input '${key}' has unsupported datatype ${input.datatype}`);
    }
    const elements = generateElements(value);
    if (elements.some(Array.isArray)) {
      throw InferenceError.invalidArg(
        `Unable to parse input '${key}': expected a scalar or a flat list`,
      );
    }
    const shape = generateShape(input.shape, elements.length);
    if (shape === undefined) {
      throw InferenceError.invalidArg(
        `The schema can not convert input '${key}' to tensor with proper shape`,
      );
    }
    inputs.set(key, jsonToNDArray(key, { dtype, shape }, elements));
  };
  // The two reserved keys (GENERATE_RESERVED_KEYS) are never inputs.
  for (const [key, value] of Object.entries(json)) {
    if (key === "id") {
      if (typeof value !== "string") {
        throw InferenceError.invalidArg("Unable to parse 'id': expected a string");
      }
      id = value;
    } else if (key === "parameters") {
      if (declared.has(key)) {
        throw InferenceError.invalidArg(
          "Keyword 'parameters' for nested schema also given as input tensor name",
        );
      }
      if (!isObject(value)) {
        throw InferenceError.invalidArg("Expected JSON object for keyword: 'parameters'");
      }
      for (const [inner, innerValue] of Object.entries(value)) take(inner, innerValue);
    } else {
      take(key, value);
    }
  }
  let priority: number | undefined;
  let timeout: number | undefined;
  if (parameters["priority"] !== undefined) {
    priority = nonNegativeInteger("priority", parameters["priority"]);
  }
  if (parameters["timeout"] !== undefined) {
    timeout = nonNegativeInteger("timeout", parameters["timeout"]);
  }
  // Forwarded headers are string parameters only, as on /infer: they never set a field.
  for (const [name, value] of forwardedHeaders(options)) parameters[name] = value;
  return {
    modelName: metadata.name,
    ...(options.modelVersion === undefined ? {} : { modelVersion: options.modelVersion }),
    ...(id === undefined ? {} : { id }),
    inputs,
    parameters,
    ...(priority === undefined ? {} : { priority }),
    ...(timeout === undefined ? {} : { timeoutMicroseconds: timeout }),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  };
}

/**
 * Encodes one response as a generate response object: metadata, response parameters and one key
 * per output (the element itself when there is one, else a flat list), keys in code-unit order.
 *
 * @param response The inference response.
 * @returns The JSON text.
 * @throws {InferenceError} (INVALID_ARG) For FP16/BF16 outputs, which JSON cannot carry.
 *
 * @example A text output beside the model's name and version
 * ```ts
 * import { encodeGenerateResponse } from "./generate.ts";
 * import { ndarray } from "../../tensor/ndarray.ts";
 * import assert from "node:assert/strict";
 *
 * const text = encodeGenerateResponse({
 *   modelName: "m", modelVersion: "1",
 *   outputs: new Map([["text_output", ndarray(["hi"], [1, 1], { dtype: "bytes" })]]),
 * });
 * assert.equal(text, '{"model_name":"m","model_version":"1","text_output":"hi"}');
 * ```
 */
export function encodeGenerateResponse(response: InferenceResponse): string {
  const fields = new Map<string, unknown>();
  for (const [key, value] of Object.entries(response.parameters ?? {})) fields.set(key, value);
  for (const [name, array] of hostTensors(response.outputs)) {
    fields.set(name, generateValue(ndarrayToJson(name, array)));
  }
  if (response.id !== undefined && response.id !== "") fields.set("id", response.id);
  fields.set("model_name", response.modelName);
  fields.set("model_version", response.modelVersion);
  const keys = [...fields.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify(Object.fromEntries(keys.map((key) => [key, fields.get(key)])));
}

// A final step without outputs is Triton's flags-only final response: nothing to send.
function isFlagsOnly(step: StreamResponse): boolean {
  return step.final && step.outputs.size === 0;
}

async function* responsesOf(
  engine: Engine,
  request: InferenceRequest,
  model: ModelHandle,
): AsyncGenerator<InferenceResponse, void, undefined> {
  if (!model.decoupled) {
    yield await engine.infer(request, model);
    return;
  }
  for await (const step of engine.inferStream(request, model)) {
    if (!isFlagsOnly(step)) yield step;
    if (step.final) return;
  }
}

/** What {@linkcode handleGenerate} needs. */
export interface GenerateContext {
  /** The HTTP request. */
  readonly request: Request;
  /** Path parameters: `model` and maybe `version`. */
  readonly params: Readonly<Record<string, string>>;
  /** Aborted when the client disconnects while the handler runs. */
  readonly signal: AbortSignal;
}

/** Settings of {@linkcode handleGenerate}. */
export interface GenerateSettings {
  /** Body limit in bytes. */
  readonly maxRequestBytes: number;
  /** Headers to forward as parameters. */
  readonly headerForwardPattern: RegExp | undefined;
}

/** Options of {@linkcode handleGenerate}: the front end's settings, and which endpoint. */
export interface GenerateOptions extends GenerateSettings {
  /**
   * Whether to answer Server-Sent Events (`generate_stream`) rather than one JSON body.
   *
   * @default {false}
   */
  readonly streaming?: boolean;
}

/**
 * Handles `POST .../generate` (`streaming` false) and `POST .../generate_stream` (true).
 *
 * @param engine The engine.
 * @param context The request, path parameters and disconnect signal.
 * @param options Body limit, header forwarding, and whether to answer Server-Sent Events.
 * @returns The response.
 * @throws {InferenceError} Before the first response (the front end answers a JSON error).
 */
export async function handleGenerate(
  engine: Engine,
  context: GenerateContext,
  options: GenerateOptions,
): Promise<Response> {
  const streaming = options.streaming ?? false;
  const modelName = context.params["model"]!;
  const modelVersion = context.params["version"] === undefined
    ? undefined
    : Number(context.params["version"]);
  // The request's one lookup: decoding reads the handle, and the engine takes it as it is.
  const model = engine.model(modelName, modelVersion);
  const body = await readRequestBody(context.request, options.maxRequestBytes);
  // Aborted when the SSE body is cancelled (the client went away after the headers were sent).
  const gone = new AbortController();
  const request = decodeGenerateRequest(body, model.metadata, {
    ...(modelVersion === undefined ? {} : { modelVersion }),
    headers: context.request.headers,
    ...(options.headerForwardPattern === undefined
      ? {}
      : { headerForwardPattern: options.headerForwardPattern }),
    signal: AbortSignal.any([context.signal, gone.signal]),
  });
  const iterator = responsesOf(engine, request, model);

  if (!streaming) {
    const only = await iterator.next();
    if (only.done) throw InferenceError.invalidArg(ONE_RESPONSE_MESSAGE);
    // A second response already answers 400: the model stops there, instead of the front end
    // keeping every response of a model that may stream without end.
    if (!(await iterator.next()).done) {
      gone.abort(
        InferenceError.cancelled(
          `Request for model '${modelName}' was cancelled: generate takes exactly one response`,
        ),
      );
      iterator.return().catch(() => {});
      throw InferenceError.invalidArg(ONE_RESPONSE_MESSAGE);
    }
    return new Response(encodeGenerateResponse(only.value), {
      headers: { "content-type": "application/json" },
    });
  }

  // The status goes out with the first response, so a failure before it is a plain JSON error.
  const first = await iterator.next();
  let done = first.done === true;
  const stream = new ReadableStream<Uint8Array>({
    start(controller): void {
      if (first.done) controller.close();
      else controller.enqueue(sseEvent(encodeGenerateResponse(first.value)));
    },
    async pull(controller): Promise<void> {
      if (done) return;
      try {
        const step = await iterator.next();
        if (step.done) {
          done = true;
          controller.close();
        } else {
          controller.enqueue(sseEvent(encodeGenerateResponse(step.value)));
        }
      } catch (error) {
        done = true;
        if (gone.signal.aborted) return;
        controller.enqueue(sseEvent(generateErrorJson(toInferenceError(error).message)));
        controller.close();
      }
    },
    cancel(): void {
      if (done) return;
      done = true;
      gone.abort(
        InferenceError.cancelled(
          `Request for model '${modelName}' was cancelled: the client disconnected`,
        ),
      );
      // Not awaited: a pending step finishes first, then the engine stops pulling.
      iterator.return().catch(() => {});
    },
  }, { highWaterMark: 0 });
  return new Response(stream, {
    headers: { "content-type": "text/event-stream; charset=utf-8" },
  });
}
