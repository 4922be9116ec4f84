/**
 * The request-parameter rules of the KServe v2 protocol, one set for the HTTP and gRPC front
 * ends, as Triton 2.51 applies them (`http_server.cc` `ParseJsonTritonParams`,
 * `grpc/infer_handler.cc` `SetInferenceRequestMetadata`, header forwarding in both):
 *
 * - `priority` and `timeout` (microseconds) are non-negative integers and set the request's
 *   fields; they are not passed to the model.
 * - `sequence_id` (an unsigned 64-bit integer or a string), `sequence_start` and `sequence_end`
 *   (booleans) become the request's `sequence` ({@linkcode SequenceRequest}); they are not passed
 *   to the model as parameters. Engines apply them to models with sequence batching and ignore
 *   them for the others, as Triton does.
 * - HTTP only: `binary_data_output` (a boolean) chooses the default output format. gRPC only:
 *   `triton_enable_empty_final_response` (a boolean) asks for a flags-only final response on
 *   the stream. On the other wire each is what Triton makes of it there: a custom parameter,
 *   or a reserved `triton_` name.
 * - Any other name starting with `triton_` is refused; every other parameter (`headers`
 *   included) goes to the model when it is a string, number or boolean.
 * - Headers (HTTP) or metadata keys (gRPC) matching the forward pattern become string
 *   parameters after the request's own, so a forwarded header wins over a body parameter of
 *   the same name; their names are not checked, and they never set a request field. The
 *   pattern matches case-insensitively (Triton prefixes it with `(?i)`); an empty one forwards
 *   nothing.
 *
 * @module
 */

import { isNonNegativeInteger } from "../json_values.ts";
import type { ParameterValue, SequenceRequest } from "../callable/types.ts";
import type { SequenceId } from "../config/sequence_batching.ts";
import { InferenceError, TritonBadParameterError } from "../errors.ts";
import { EMPTY_FINAL_PARAMETER } from "./constants.ts";
import { BINARY_DATA_OUTPUT } from "./binary_data.ts";
import type { InferParameter } from "./grpc_codec.ts";
import { inferParameterChoice, inferParameterValue } from "./infer_parameter.ts";

/** The wire a request came over: each has one reserved parameter the other lacks. */
export type WireProtocol = "http" | "grpc";

/** Headers to forward, and the pattern that picks them. */
export interface HeaderForwarding {
  /**
   * Header names and values (HTTP headers, or gRPC metadata with string values).
   *
   * @default {undefined}
   */
  headers?: Iterable<readonly [string, string]>;
  /**
   * Names matching it are forwarded; see {@linkcode compileHeaderForwardPattern}.
   *
   * @default {undefined}
   */
  headerForwardPattern?: RegExp;
}

/** What the request parameters of one request decode to. */
export interface RequestParameters {
  /** The parameters the model sees, forwarded headers included. */
  readonly parameters: Record<string, ParameterValue>;
  /** The `priority` level, when given. */
  readonly priority?: number;
  /** The `timeout` in microseconds, when given. */
  readonly timeoutMicroseconds?: number;
  /** HTTP's `binary_data_output` (`false` when absent, and on gRPC). */
  readonly binaryDataOutput: boolean;
  /** gRPC's `triton_enable_empty_final_response` (`false` when absent, and on HTTP). */
  readonly enableEmptyFinalResponse: boolean;
  /**
   * `sequence_id`, `sequence_start` and `sequence_end`, when any was given (an absent ID is `0n`,
   * none, as in Triton).
   */
  readonly sequence?: SequenceRequest;
}

/** One parameter as its wire carries it. */
interface WireParameter {
  /** The value: a JSON value, or the value of the `InferParameter` field set. */
  readonly value: unknown;
  /** Whether the wire marks it integral: a JSON integer, an `int64_param` or `uint64_param`. */
  readonly integer: boolean;
  /** The value as messages show it. */
  readonly shown: string;
  /** An integral value exactly, beyond 2^53 too (correlation IDs are 64-bit). */
  readonly exact?: bigint;
}

function showJson(value: unknown): string {
  if (typeof value === "bigint") return value.toString();
  if (Array.isArray(value)) return "an array";
  if (value === null) return "null";
  if (typeof value === "object") return "an object";
  return JSON.stringify(value);
}

function jsonParameter(value: unknown): WireParameter {
  const integer = typeof value === "bigint" ||
    (typeof value === "number" && Number.isInteger(value));
  return {
    value: typeof value === "bigint" ? Number(value) : value,
    integer,
    shown: showJson(value),
    ...(integer ? { exact: BigInt(value as number | bigint) } : {}),
  };
}

function grpcParameter(parameter: InferParameter): WireParameter {
  const choice = inferParameterChoice(parameter);
  const value = inferParameterValue(parameter);
  const integer = choice === "int64_param" || choice === "uint64_param";
  const digits = integer ? String(parameter[choice]) : "";
  return {
    value,
    integer,
    shown: choice === undefined ? "no value" : `${choice} ${JSON.stringify(value)}`,
    ...(integer && /^-?[0-9]+$/.test(digits) ? { exact: BigInt(digits) } : {}),
  };
}

function invalid(name: string, expected: string, parameter: WireParameter): InferenceError {
  return InferenceError.invalidArg(
    `Invalid request parameter '${name}': expected ${expected}, got ${parameter.shown}`,
  );
}

function nonNegativeInteger(name: string, parameter: WireParameter): number {
  const { value } = parameter;
  if (parameter.integer && isNonNegativeInteger(value)) {
    return value;
  }
  throw invalid(name, "a non-negative integer", parameter);
}

const MAX_UINT64 = 2n ** 64n - 1n;

/** `sequence_id`: an unsigned 64-bit integer or a string (Triton's two kinds of correlation ID). */
function sequenceId(parameter: WireParameter): SequenceId {
  const { value, exact } = parameter;
  if (typeof value === "string") return value;
  if (exact !== undefined && exact >= 0n && exact <= MAX_UINT64) return exact;
  throw invalid("sequence_id", "an unsigned 64-bit integer or a string", parameter);
}

function boolean(name: string, parameter: WireParameter): boolean {
  if (typeof parameter.value === "boolean") return parameter.value;
  throw invalid(name, "a boolean", parameter);
}

function decode(
  entries: Iterable<readonly [string, WireParameter]>,
  protocol: WireProtocol,
  forwarding: HeaderForwarding,
): RequestParameters {
  const parameters: Record<string, ParameterValue> = {};
  let priority: number | undefined;
  let timeoutMicroseconds: number | undefined;
  let binaryDataOutput = false;
  let enableEmptyFinalResponse = false;
  let sequence: { id: SequenceId; start: boolean; end: boolean } | undefined;
  for (const [name, parameter] of entries) {
    if (name === "priority") {
      priority = nonNegativeInteger(name, parameter);
    } else if (name === "timeout") {
      timeoutMicroseconds = nonNegativeInteger(name, parameter);
    } else if (name === "sequence_id") {
      sequence ??= { id: 0n, start: false, end: false };
      sequence.id = sequenceId(parameter);
    } else if (name === "sequence_start") {
      sequence ??= { id: 0n, start: false, end: false };
      sequence.start = boolean(name, parameter);
    } else if (name === "sequence_end") {
      sequence ??= { id: 0n, start: false, end: false };
      sequence.end = boolean(name, parameter);
    } else if (name === BINARY_DATA_OUTPUT && protocol === "http") {
      binaryDataOutput = boolean(name, parameter);
    } else if (name === EMPTY_FINAL_PARAMETER && protocol === "grpc") {
      enableEmptyFinalResponse = boolean(name, parameter);
    } else if (name.startsWith("triton_")) {
      throw InferenceError.invalidArg(
        `Invalid request parameter '${name}': names starting with 'triton_' are reserved`,
      );
    } else {
      const { value } = parameter;
      if (typeof value !== "string" && typeof value !== "number" && typeof value !== "boolean") {
        throw invalid(name, "a string, number or boolean", parameter);
      }
      parameters[name] = value;
    }
  }
  for (const [name, value] of forwardedHeaders(forwarding)) parameters[name] = value;
  return {
    parameters,
    ...(priority !== undefined ? { priority } : {}),
    ...(timeoutMicroseconds !== undefined ? { timeoutMicroseconds } : {}),
    binaryDataOutput,
    enableEmptyFinalResponse,
    ...(sequence === undefined ? {} : { sequence }),
  };
}

/**
 * Decodes the `parameters` object of an HTTP (JSON) inference request, then forwards headers.
 *
 * @param raw The `parameters` member, as parsed (`undefined` when absent).
 * @param forwarding The request headers and the forward pattern.
 * @returns The parameters, request fields and flags.
 * @throws {InferenceError} (INVALID_ARG) For a `parameters` that is not an object, or a
 *   parameter the rules refuse.
 *
 * @example Priority, a custom parameter and a forwarded header
 * ```ts
 * import { httpRequestParameters } from "./request_parameters.ts";
 * import assert from "node:assert/strict";
 *
 * const decoded = httpRequestParameters(
 *   { priority: 1, sequence_id: 7, sequence_start: true, mode: "fast", "x-user": "body" },
 *   { headers: new Headers({ "X-User": "alice" }), headerForwardPattern: /^x-/i },
 * );
 * assert.equal(decoded.priority, 1);
 * assert.deepEqual(decoded.sequence, { id: 7n, start: true, end: false });
 * assert.deepEqual(decoded.parameters, { mode: "fast", "x-user": "alice" });
 * assert.throws(() => httpRequestParameters({ priority: -1 }), {
 *   message: "Invalid request parameter 'priority': expected a non-negative integer, got -1",
 * });
 * ```
 */
export function httpRequestParameters(
  raw: unknown,
  forwarding: HeaderForwarding = {},
): RequestParameters {
  if (raw !== undefined && (typeof raw !== "object" || raw === null || Array.isArray(raw))) {
    throw InferenceError.invalidArg("Unable to parse 'parameters': expected a JSON object");
  }
  const entries = Object.entries(raw ?? {}).map(([name, value]) =>
    [name, jsonParameter(value)] as const
  );
  return decode(entries, "http", forwarding);
}

/**
 * Decodes the `parameters` map of a gRPC `ModelInferRequest`, then forwards metadata.
 *
 * @param raw The map, as decoded.
 * @param forwarding The call's metadata (string values) and the forward pattern.
 * @returns The parameters, request fields and flags.
 * @throws {InferenceError} (INVALID_ARG) For a parameter the rules refuse.
 *
 * @example The stream flag and a refused name
 * ```ts
 * import { grpcRequestParameters } from "./request_parameters.ts";
 * import assert from "node:assert/strict";
 *
 * const decoded = grpcRequestParameters({
 *   triton_enable_empty_final_response: { bool_param: true, parameter_choice: "bool_param" },
 *   timeout: { int64_param: "1000", parameter_choice: "int64_param" },
 * });
 * assert.equal(decoded.enableEmptyFinalResponse, true);
 * assert.equal(decoded.timeoutMicroseconds, 1000);
 * assert.throws(
 *   () => grpcRequestParameters({ priority: { double_param: 1, parameter_choice: "double_param" } }),
 *   { message: "Invalid request parameter 'priority': expected a non-negative integer, got double_param 1" },
 * );
 * ```
 */
export function grpcRequestParameters(
  raw: Readonly<Record<string, InferParameter>> | undefined,
  forwarding: HeaderForwarding = {},
): RequestParameters {
  const entries = Object.entries(raw ?? {}).map(([name, parameter]) =>
    [name, grpcParameter(parameter)] as const
  );
  return decode(entries, "grpc", forwarding);
}

/**
 * The headers the forward pattern picks, in order, as string parameters.
 *
 * @param forwarding The headers and the pattern.
 * @returns Name and value of each header to forward; none without a pattern.
 *
 * @example Forward only the x- headers
 * ```ts
 * import { forwardedHeaders } from "./request_parameters.ts";
 * import assert from "node:assert/strict";
 *
 * const headers = [["x-a", "1"], ["user-agent", "curl"]] as const;
 * assert.deepEqual(forwardedHeaders({ headers, headerForwardPattern: /^x-/i }), [["x-a", "1"]]);
 * ```
 */
export function forwardedHeaders(forwarding: HeaderForwarding): [string, string][] {
  const { headers, headerForwardPattern: pattern } = forwarding;
  const forwarded: [string, string][] = [];
  if (headers === undefined || pattern === undefined) return forwarded;
  for (const [name, value] of headers) {
    // A caller's pattern may carry the g or y flag, which makes test() stateful.
    pattern.lastIndex = 0;
    if (pattern.test(name)) forwarded.push([name, value]);
  }
  return forwarded;
}

/**
 * Compiles a header forward pattern as Triton does: matching case-insensitively (header names
 * are case-insensitive, and gRPC metadata keys lower-case), anywhere in the name unless
 * anchored; an empty pattern forwards nothing.
 *
 * @param pattern The pattern (a `RegExp` keeps its flags, plus `i`, less `g` and `y`).
 * @param what Names the option in errors, e.g. `"gRPC headerForwardPattern"`.
 * @returns The compiled pattern, or `undefined` for none.
 * @throws {TritonBadParameterError} For a pattern that does not compile.
 *
 * @example Match case-insensitively; empty is none; bad syntax refused
 * ```ts
 * import { compileHeaderForwardPattern } from "./request_parameters.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(compileHeaderForwardPattern("^X-", "HTTP headerForwardPattern")!.test("x-user"), true);
 * assert.equal(compileHeaderForwardPattern("", "HTTP headerForwardPattern"), undefined);
 * assert.throws(
 *   () => compileHeaderForwardPattern("(", "gRPC headerForwardPattern"),
 *   /Invalid gRPC headerForwardPattern: /,
 * );
 * ```
 */
export function compileHeaderForwardPattern(
  pattern: string | RegExp | undefined,
  what: string,
): RegExp | undefined {
  if (pattern === undefined || pattern === "") return undefined;
  const source = typeof pattern === "string" ? pattern : pattern.source;
  const flags = typeof pattern === "string" ? "" : pattern.flags.replace(/[gy]/g, "");
  try {
    return new RegExp(source, flags.includes("i") ? flags : `${flags}i`);
  } catch (error) {
    throw new TritonBadParameterError(
      `Invalid ${what}: ${JSON.stringify(source)} is not a regular expression: ${
        (error as Error).message
      }`,
      { cause: error },
    );
  }
}
