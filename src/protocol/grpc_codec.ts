/**
 * Protobuf encoding and decoding of the KServe v2 gRPC messages (`proto/grpc_service.proto`,
 * `proto/model_config.proto`, `proto/health.proto`), shared by the gRPC front end and client.
 * The schema is parsed once with protobufjs from the embedded proto text; messages are plain
 * objects with the proto field names (snake_case).
 *
 * Decoded 64-bit integers are decimal strings (exact); encoders accept numbers, strings or
 * bigints. Decoded `bytes` fields are views into the received buffer (no copy).
 *
 * Over 500 lines for a reason: the plain-object shape of every message the service uses is
 * declared here beside its codec, and the hand-written raw-contents encoder must sit beside the
 * schema it bypasses.
 *
 * @module
 */

import protobuf from "protobufjs";
import { PROTO_FILES } from "./_proto_text.ts";
import { lengthPrefixSize, writeLengthPrefix } from "./protobuf_wire.ts";

/** A 64-bit integer as the codec accepts it; decoding yields decimal strings. */
export type Int64 = number | string | bigint;

/** Options of {@linkcode MessageCodec.encode}. */
export interface EncodeOptions {
  /**
   * Bytes left free before the message for the caller's framing (the 5-byte gRPC message
   * prefix), so framing needs no second copy of the message.
   *
   * @default {0}
   */
  headroom?: number;
  /**
   * Provides the buffer for a message whose size is known before it is written (messages with
   * raw tensor contents); it must return exactly `bytes` bytes, whose contents are all
   * overwritten.
   *
   * @default {(bytes) => new Uint8Array(bytes)}
   */
  allocate?: (bytes: number) => Uint8Array;
}

/** Encodes and decodes one message type. */
export interface MessageCodec<T> {
  /** The fully qualified message name, e.g. `inference.ModelInferRequest`. */
  readonly name: string;
  /**
   * Encodes a plain object (proto field names; unknown fields are ignored).
   *
   * @param value The message.
   * @param options Room to leave before the message, and where its buffer comes from.
   * @returns The wire bytes, after `options.headroom` unwritten bytes.
   */
  encode(value: T, options?: EncodeOptions): Uint8Array;
  /**
   * Decodes wire bytes to a plain object with every field present (defaults filled in).
   *
   * @param bytes The wire bytes.
   * @returns The message.
   * @throws {Error} When the bytes are not a valid message.
   */
  decode(bytes: Uint8Array): T;
}

// ---- Message shapes (proto field names) ---------------------------------------------------

/** `inference.InferParameter`: exactly one field is set. */
export interface InferParameter {
  /** A bool value. */
  bool_param?: boolean;
  /** A signed 64-bit value. */
  int64_param?: Int64;
  /** A string value. */
  string_param?: string;
  /** A double value. */
  double_param?: number;
  /** An unsigned 64-bit value. */
  uint64_param?: Int64;
  /** The name of the field set, present on decoded messages. */
  parameter_choice?:
    | "bool_param"
    | "int64_param"
    | "string_param"
    | "double_param"
    | "uint64_param";
}

/** `inference.InferTensorContents`: typed tensor elements. */
export interface InferTensorContents {
  /** BOOL elements. */
  bool_contents?: boolean[];
  /** INT8, INT16 and INT32 elements. */
  int_contents?: number[];
  /** INT64 elements. */
  int64_contents?: Int64[];
  /** UINT8, UINT16 and UINT32 elements. */
  uint_contents?: number[];
  /** UINT64 elements. */
  uint64_contents?: Int64[];
  /** FP32 elements. */
  fp32_contents?: number[];
  /** FP64 elements. */
  fp64_contents?: number[];
  /** BYTES elements, without length prefixes. */
  bytes_contents?: Uint8Array[];
}

/** `inference.ModelInferRequest.InferInputTensor`. */
export interface InferInputTensor {
  /** Input name. */
  name: string;
  /** KServe datatype, e.g. `FP32`. */
  datatype: string;
  /** Shape, batch axis included. */
  shape: Int64[];
  /** Input parameters. */
  parameters?: Record<string, InferParameter>;
  /** Typed elements, when `raw_input_contents` is not used. */
  contents?: InferTensorContents | null;
}

/** `inference.ModelInferRequest.InferRequestedOutputTensor`. */
export interface InferRequestedOutputTensor {
  /** Output name. */
  name: string;
  /** Output parameters. */
  parameters?: Record<string, InferParameter>;
}

/** `inference.ModelInferRequest`. */
export interface ModelInferRequest {
  /** Model name. */
  model_name: string;
  /** Model version; empty for the default. */
  model_version?: string;
  /** Request id, echoed in responses. */
  id?: string;
  /** Request parameters. */
  parameters?: Record<string, InferParameter>;
  /** Input tensors. */
  inputs?: InferInputTensor[];
  /** Requested outputs; empty means all. */
  outputs?: InferRequestedOutputTensor[];
  /** Raw tensor data, one entry per input. */
  raw_input_contents?: Uint8Array[];
}

/** `inference.ModelInferResponse.InferOutputTensor`. */
export interface InferOutputTensor {
  /** Output name. */
  name: string;
  /** KServe datatype. */
  datatype: string;
  /** Shape. */
  shape: Int64[];
  /** Output parameters. */
  parameters?: Record<string, InferParameter>;
  /** Typed elements (unused by Triton's server, which answers raw). */
  contents?: InferTensorContents | null;
}

/** `inference.ModelInferResponse`. */
export interface ModelInferResponse {
  /** Model name. */
  model_name: string;
  /** Model version. */
  model_version: string;
  /** Request id. */
  id?: string;
  /** Response parameters. */
  parameters?: Record<string, InferParameter>;
  /** Output tensors. */
  outputs?: InferOutputTensor[];
  /** Raw tensor data, one entry per output, in `outputs` order. */
  raw_output_contents?: Uint8Array[];
}

/** `inference.ModelStreamInferResponse`. */
export interface ModelStreamInferResponse {
  /** Set when the request failed. */
  error_message?: string;
  /** The response (with only id, model name and version on errors). */
  infer_response?: ModelInferResponse | null;
}

/** A `{name, version}` request (ModelReady, ModelMetadata, ModelConfig, ModelStatistics). */
export interface ModelRef {
  /** Model name. */
  name?: string;
  /** Model version; empty for the default. */
  version?: string;
}

/** An empty message. */
export type Empty = Record<string, never>;

/** `inference.ServerLiveResponse`. */
export interface ServerLiveResponse {
  /** Whether the server is live. */
  live: boolean;
}

/** `inference.ServerReadyResponse` and `inference.ModelReadyResponse`. */
export interface ReadyResponse {
  /** Whether the server or model is ready. */
  ready: boolean;
}

/** `inference.ServerMetadataResponse`. */
export interface ServerMetadataResponse {
  /** Server name. */
  name: string;
  /** Server version. */
  version: string;
  /** Supported extensions. */
  extensions: string[];
}

/** `inference.ModelMetadataResponse.TensorMetadata`. */
export interface TensorMetadataMessage {
  /** Tensor name. */
  name: string;
  /** KServe datatype. */
  datatype: string;
  /** Shape; -1 for dynamic dimensions. */
  shape: readonly Int64[];
}

/** `inference.ModelMetadataResponse`. */
export interface ModelMetadataResponse {
  /** Model name. */
  name: string;
  /** Versions. */
  versions: readonly string[];
  /** Platform. */
  platform: string;
  /** Inputs. */
  inputs: readonly TensorMetadataMessage[];
  /** Outputs. */
  outputs: readonly TensorMetadataMessage[];
}

/** `inference.ModelConfigResponse`; `config` is the `inference.ModelConfig` object tree. */
export interface ModelConfigResponse {
  /** The configuration, proto field names. */
  config: Record<string, unknown> | null;
}

/** `inference.StatisticDuration`. */
export interface StatisticDurationMessage {
  /** Number of events. */
  count: Int64;
  /** Cumulative nanoseconds. */
  ns: Int64;
}

/** `inference.ModelStatisticsResponse`; entries follow `inference.ModelStatistics`. */
export interface ModelStatisticsResponse {
  /** Per model version. */
  model_stats: Record<string, unknown>[];
}

/** `inference.RepositoryIndexRequest`. */
export interface RepositoryIndexRequest {
  /** Repository name; must be empty. */
  repository_name?: string;
  /** Only list ready models. */
  ready?: boolean;
}

/** `inference.RepositoryIndexResponse.ModelIndex`. */
export interface ModelIndexMessage {
  /** Model name. */
  name: string;
  /** Version. */
  version: string;
  /** State, e.g. `READY`. */
  state: string;
  /** Why it is in that state. */
  reason: string;
}

/** `inference.RepositoryIndexResponse`. */
export interface RepositoryIndexResponse {
  /** The models. */
  models: ModelIndexMessage[];
}

/** `inference.ModelRepositoryParameter`: exactly one field is set. */
export interface ModelRepositoryParameter {
  /** A bool value. */
  bool_param?: boolean;
  /** An int64 value. */
  int64_param?: Int64;
  /** A string value. */
  string_param?: string;
  /** A bytes value. */
  bytes_param?: Uint8Array;
}

/** `inference.RepositoryModelLoadRequest` and `inference.RepositoryModelUnloadRequest`. */
export interface RepositoryModelRequest {
  /** Repository name; must be empty. */
  repository_name?: string;
  /** Model name. */
  model_name: string;
  /** Load or unload parameters. */
  parameters?: Record<string, ModelRepositoryParameter>;
}

/** `inference.LogSettingsRequest.SettingValue` (and the response's): exactly one field is set. */
export interface LogSettingValue {
  /** A bool value. */
  bool_param?: boolean;
  /** An unsigned 32-bit value. */
  uint32_param?: number;
  /** A string value. */
  string_param?: string;
  /** The name of the field set, present on decoded messages. */
  parameter_choice?: "bool_param" | "uint32_param" | "string_param";
}

/** `inference.LogSettingsRequest` and `inference.LogSettingsResponse` (one wire form). */
export interface LogSettingsMessage {
  /** Settings by name: the ones to change, or all of them in a response. */
  settings: Record<string, LogSettingValue>;
}

/** `inference.TraceSettingRequest` (the response is its `settings` alone: one wire form). */
export interface TraceSettingMessage {
  /** Settings by name; an empty `value` list clears a setting. */
  settings: Record<string, { value?: string[] }>;
  /** The model whose settings these are; empty for the global ones. */
  model_name?: string;
}

/**
 * `inference.SystemSharedMemoryRegisterRequest`; the status and unregister requests are its
 * `name` alone (field 1), so one codec reads all three.
 */
export interface SystemSharedMemoryRequest {
  /** Region name; empty means all regions (status, unregister). */
  name?: string;
  /** Shared-memory key (register). */
  key?: string;
  /** Offset in the shared-memory object (register). */
  offset?: Int64;
  /** Size in bytes (register). */
  byte_size?: Int64;
}

/** `inference.SystemSharedMemoryStatusResponse`. */
export interface SystemSharedMemoryStatusResponse {
  /** Regions by name. */
  regions: Record<
    string,
    { name: string; key: string; offset: Int64; byte_size: Int64 }
  >;
}

/**
 * `inference.CudaSharedMemoryRegisterRequest`; the status and unregister requests are its `name`
 * alone (field 1), so one codec reads all three.
 */
export interface CudaSharedMemoryRequest {
  /** Region name; empty means all regions (status, unregister). */
  name?: string;
  /** The `cudaIpcMemHandle_t` (register). */
  raw_handle?: Uint8Array;
  /** The device the memory is on (register; int64 in the proto). */
  device_id?: Int64;
  /** Size in bytes (register). */
  byte_size?: Int64;
}

/** `inference.CudaSharedMemoryStatusResponse`. */
export interface CudaSharedMemoryStatusResponse {
  /** Regions by name. */
  regions: Record<string, { name: string; device_id: Int64; byte_size: Int64 }>;
}

/** `grpc.health.v1.HealthCheckRequest`. */
export interface HealthCheckRequest {
  /** Service name; empty for the whole server. */
  service?: string;
}

/** `grpc.health.v1.HealthCheckResponse`. */
export interface HealthCheckResponse {
  /** `UNKNOWN`, `SERVING`, `NOT_SERVING` or `SERVICE_UNKNOWN` (numbers accepted on encode). */
  status: string | number;
}

// ---- Schema ------------------------------------------------------------------------------

let root: protobuf.Root | undefined;

/**
 * The protobufjs root holding every DenoTriton message type, parsed once from the embedded
 * proto text with the proto field names kept.
 *
 * @returns The resolved root.
 *
 * @example Look up a type
 * ```ts
 * import { protoRoot } from "./grpc_codec.ts";
 * import assert from "node:assert/strict";
 *
 * const type = protoRoot().lookupType("inference.ModelInferRequest");
 * assert.equal(type.fields.raw_input_contents?.id, 7);
 * ```
 */
export function protoRoot(): protobuf.Root {
  if (root !== undefined) return root;
  const parsed = new protobuf.Root();
  for (const text of Object.values(PROTO_FILES)) {
    protobuf.parse(text, parsed, { keepCase: true });
  }
  // Resolving applies proto3 defaults such as packed repeated scalars.
  parsed.resolveAll();
  root = parsed;
  return parsed;
}

const DECODE_OPTIONS: protobuf.IConversionOptions = {
  longs: String,
  enums: String,
  defaults: true,
  arrays: true,
  objects: true,
  oneofs: true,
};

/**
 * Builds the codec of one message type.
 *
 * @param name The fully qualified message name.
 * @returns Its codec.
 * @throws {Error} When the schema has no such message.
 *
 * @example Encode a ServerLiveResponse
 * ```ts
 * import { messageCodec, type ServerLiveResponse } from "./grpc_codec.ts";
 * import assert from "node:assert/strict";
 *
 * const codec = messageCodec<ServerLiveResponse>("inference.ServerLiveResponse");
 * assert.deepEqual([...codec.encode({ live: true })], [8, 1]);
 * assert.deepEqual(codec.decode(new Uint8Array([8, 1])), { live: true });
 * ```
 */
export function messageCodec<T>(name: string): MessageCodec<T> {
  const type = protoRoot().lookupType(name);
  return {
    name,
    encode(value: T, options: EncodeOptions = {}): Uint8Array {
      const bytes = type.encode(type.fromObject(value as Record<string, unknown>)).finish();
      const headroom = options.headroom ?? 0;
      return headroom === 0 ? bytes : withHeadroom(bytes, headroom);
    },
    decode(bytes: Uint8Array): T {
      // A plain view, not a Node Buffer: decoded `bytes` fields are then plain Uint8Arrays,
      // whose slice() copies (Buffer's slice() is a view, which breaks alignment fixes).
      const view = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      return type.toObject(type.decode(view), DECODE_OPTIONS) as T;
    },
  };
}

function newBytes(bytes: number): Uint8Array {
  return new Uint8Array(bytes);
}

function withHeadroom(bytes: Uint8Array, headroom: number): Uint8Array {
  const out = new Uint8Array(headroom + bytes.byteLength);
  out.set(bytes, headroom);
  return out;
}

// ---- Raw tensor contents ------------------------------------------------------------------

/** The field number of `ModelInferRequest.raw_input_contents`. */
export const RAW_INPUT_CONTENTS_FIELD = 7;

/** The field number of `ModelInferResponse.raw_output_contents`. */
export const RAW_OUTPUT_CONTENTS_FIELD = 6;

/**
 * A message whose last field is `repeated bytes` raw tensor contents, laid out before writing:
 * the other fields as protobufjs encodes them, then one length-delimited entry per raw tensor.
 */
interface RawLayout {
  readonly head: Uint8Array;
  readonly raw: readonly Uint8Array[];
  readonly field: number;
  readonly size: number;
}

function rawLayout<T>(
  head: MessageCodec<T>,
  value: T,
  rawField: keyof T & string,
  field: number,
): RawLayout {
  const raw = (value[rawField] as readonly Uint8Array[] | undefined) ?? [];
  const headBytes = head.encode(raw.length === 0 ? value : { ...value, [rawField]: undefined });
  let size = headBytes.byteLength;
  for (const bytes of raw) size += lengthPrefixSize(field, bytes.byteLength) + bytes.byteLength;
  return { head: headBytes, raw, field, size };
}

function writeLayout(out: Uint8Array, at: number, layout: RawLayout): number {
  out.set(layout.head, at);
  at += layout.head.byteLength;
  for (const bytes of layout.raw) {
    at = writeLengthPrefix(out, at, { field: layout.field, length: bytes.byteLength });
    out.set(bytes, at);
    at += bytes.byteLength;
  }
  return at;
}

/**
 * The codec of a message whose last field is `repeated bytes` raw tensor contents
 * (`raw_input_contents`, `raw_output_contents`): protobufjs encodes the other fields, and each
 * raw entry is written after them as a length-delimited field around the caller's bytes, all
 * into one buffer sized up front, so the tensor data is copied once, into the wire buffer (the
 * bytes protobufjs would produce: fields in number order). Decoding is protobufjs's, whose
 * `bytes` are views of the input.
 */
function rawContentsCodec<T>(
  name: string,
  rawField: keyof T & string,
  fieldNumber: number,
): MessageCodec<T> & { layout(value: T): RawLayout } {
  const head = messageCodec<T>(name);
  const layout = (value: T): RawLayout => rawLayout(head, value, rawField, fieldNumber);
  return {
    name,
    layout,
    encode(value: T, options: EncodeOptions = {}): Uint8Array {
      const planned = layout(value);
      const { headroom = 0, allocate = newBytes } = options;
      // Without raw contents the layout's head is the whole message: not encoded a second time.
      if (planned.raw.length === 0) {
        return headroom === 0 ? planned.head : withHeadroom(planned.head, headroom);
      }
      const out = allocate(headroom + planned.size);
      writeLayout(out, headroom, planned);
      return out;
    },
    decode: head.decode,
  };
}

function streamResponseCodec(): MessageCodec<ModelStreamInferResponse> {
  const name = "inference.ModelStreamInferResponse";
  const head = messageCodec<ModelStreamInferResponse>(name);
  const inner = rawContentsCodec<ModelInferResponse>(
    "inference.ModelInferResponse",
    "raw_output_contents",
    RAW_OUTPUT_CONTENTS_FIELD,
  );
  return {
    name,
    encode(value: ModelStreamInferResponse, options: EncodeOptions = {}): Uint8Array {
      const response = value.infer_response;
      if (response === undefined || response === null) return head.encode(value, options);
      const { headroom = 0, allocate = newBytes } = options;
      const outer = head.encode({ ...value, infer_response: null });
      const nested = inner.layout(response);
      const out = allocate(
        headroom + outer.byteLength + lengthPrefixSize(2, nested.size) + nested.size,
      );
      out.set(outer, headroom);
      const at = writeLengthPrefix(out, headroom + outer.byteLength, {
        field: 2,
        length: nested.size,
      });
      writeLayout(out, at, nested);
      return out;
    },
    decode: head.decode,
  };
}

/** The codecs of every message the front end and client exchange. */
export const codecs: {
  readonly Empty: MessageCodec<Empty>;
  readonly ServerLiveResponse: MessageCodec<ServerLiveResponse>;
  readonly ReadyResponse: MessageCodec<ReadyResponse>;
  readonly ModelRef: MessageCodec<ModelRef>;
  readonly ServerMetadataResponse: MessageCodec<ServerMetadataResponse>;
  readonly ModelMetadataResponse: MessageCodec<ModelMetadataResponse>;
  readonly ModelInferRequest: MessageCodec<ModelInferRequest>;
  readonly ModelInferResponse: MessageCodec<ModelInferResponse>;
  readonly ModelStreamInferResponse: MessageCodec<ModelStreamInferResponse>;
  readonly ModelConfigResponse: MessageCodec<ModelConfigResponse>;
  readonly ModelStatisticsResponse: MessageCodec<ModelStatisticsResponse>;
  readonly RepositoryIndexRequest: MessageCodec<RepositoryIndexRequest>;
  readonly RepositoryIndexResponse: MessageCodec<RepositoryIndexResponse>;
  readonly RepositoryModelRequest: MessageCodec<RepositoryModelRequest>;
  readonly LogSettings: MessageCodec<LogSettingsMessage>;
  readonly TraceSetting: MessageCodec<TraceSettingMessage>;
  readonly SystemSharedMemoryRequest: MessageCodec<SystemSharedMemoryRequest>;
  readonly SystemSharedMemoryStatusResponse: MessageCodec<SystemSharedMemoryStatusResponse>;
  readonly CudaSharedMemoryRequest: MessageCodec<CudaSharedMemoryRequest>;
  readonly CudaSharedMemoryStatusResponse: MessageCodec<CudaSharedMemoryStatusResponse>;
  readonly HealthCheckRequest: MessageCodec<HealthCheckRequest>;
  readonly HealthCheckResponse: MessageCodec<HealthCheckResponse>;
} = {
  // Every empty request and response shares one wire form.
  Empty: lazyCodec("inference.ServerLiveRequest"),
  ServerLiveResponse: lazyCodec("inference.ServerLiveResponse"),
  ReadyResponse: lazyCodec("inference.ServerReadyResponse"),
  // ModelReady/ModelMetadata/ModelConfig/ModelStatistics requests share fields 1 and 2.
  ModelRef: lazyCodec("inference.ModelReadyRequest"),
  ServerMetadataResponse: lazyCodec("inference.ServerMetadataResponse"),
  ModelMetadataResponse: lazyCodec("inference.ModelMetadataResponse"),
  // Tensor data is written around, not through protobufjs (one copy, into the wire buffer).
  ModelInferRequest: lazyCodec(
    "inference.ModelInferRequest",
    () =>
      rawContentsCodec<ModelInferRequest>(
        "inference.ModelInferRequest",
        "raw_input_contents",
        RAW_INPUT_CONTENTS_FIELD,
      ),
  ),
  ModelInferResponse: lazyCodec(
    "inference.ModelInferResponse",
    () =>
      rawContentsCodec<ModelInferResponse>(
        "inference.ModelInferResponse",
        "raw_output_contents",
        RAW_OUTPUT_CONTENTS_FIELD,
      ),
  ),
  ModelStreamInferResponse: lazyCodec("inference.ModelStreamInferResponse", streamResponseCodec),
  ModelConfigResponse: lazyCodec("inference.ModelConfigResponse"),
  ModelStatisticsResponse: lazyCodec("inference.ModelStatisticsResponse"),
  RepositoryIndexRequest: lazyCodec("inference.RepositoryIndexRequest"),
  RepositoryIndexResponse: lazyCodec("inference.RepositoryIndexResponse"),
  RepositoryModelRequest: lazyCodec("inference.RepositoryModelLoadRequest"),
  // LogSettingsRequest and LogSettingsResponse have the same fields.
  LogSettings: lazyCodec("inference.LogSettingsRequest"),
  // TraceSettingResponse is TraceSettingRequest's field 1 alone, with the same SettingValue.
  TraceSetting: lazyCodec("inference.TraceSettingRequest"),
  // The status and unregister requests share field 1 (`name`) with the register request.
  SystemSharedMemoryRequest: lazyCodec("inference.SystemSharedMemoryRegisterRequest"),
  SystemSharedMemoryStatusResponse: lazyCodec("inference.SystemSharedMemoryStatusResponse"),
  // Likewise for the CUDA requests.
  CudaSharedMemoryRequest: lazyCodec("inference.CudaSharedMemoryRegisterRequest"),
  CudaSharedMemoryStatusResponse: lazyCodec("inference.CudaSharedMemoryStatusResponse"),
  HealthCheckRequest: lazyCodec("grpc.health.v1.HealthCheckRequest"),
  HealthCheckResponse: lazyCodec("grpc.health.v1.HealthCheckResponse"),
};

// Parsing the schema is deferred to first use so importing the module stays cheap.
function lazyCodec<T>(
  name: string,
  make: () => MessageCodec<T> = () => messageCodec<T>(name),
): MessageCodec<T> {
  let codec: MessageCodec<T> | undefined;
  const get = (): MessageCodec<T> => codec ??= make();
  return {
    name,
    encode: (value: T, options?: EncodeOptions): Uint8Array => get().encode(value, options),
    decode: (bytes: Uint8Array): T => get().decode(bytes),
  };
}
