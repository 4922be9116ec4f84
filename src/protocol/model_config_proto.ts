/**
 * Triton's model-config JSON ↔ the `inference.ModelConfig` protobuf message. The gRPC
 * `ModelConfig` RPC answers the protobuf form of what `GET /v2/models/{m}/config` answers as
 * JSON; both use the proto field names.
 *
 * @module
 */

import protobuf from "protobufjs";
import type { TritonModelConfigJson } from "../config/triton_model_config.ts";
import { protoRoot } from "./grpc_codec.ts";

const INT64_TYPES = new Set(["int64", "uint64", "sint64", "fixed64", "sfixed64"]);

type Direction = "toMessage" | "toJson";

function convertScalar(field: protobuf.Field, value: unknown, direction: Direction): unknown {
  if (field.resolvedType instanceof protobuf.Enum) {
    // Triton parses enum names case-insensitively; protobufjs matches them exactly.
    return direction === "toMessage" && typeof value === "string" ? value.toUpperCase() : value;
  }
  if (field.resolvedType instanceof protobuf.Type) {
    return convertMessage(field.resolvedType, value, direction);
  }
  if (direction === "toJson" && INT64_TYPES.has(field.type) && typeof value === "string") {
    // Triton's JSON writes 64-bit integers as numbers.
    return Number(value);
  }
  return value;
}

function mapKeyOf(field: protobuf.Field, key: string, direction: Direction): string {
  const keyType = (field as unknown as protobuf.MapField).keyType;
  if (direction === "toJson" && INT64_TYPES.has(keyType) && !/^-?[0-9]+$/.test(key)) {
    // protobufjs decodes 64-bit map keys to 8-character hash strings.
    return protobuf.util.longFromHash(key, keyType.startsWith("u")).toString();
  }
  return key;
}

function convertMessage(type: protobuf.Type, value: unknown, direction: Direction): unknown {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return value;
  const source = value as Record<string, unknown>;
  const result: Record<string, unknown> = {};
  for (const [key, fieldValue] of Object.entries(source)) {
    const field = type.fields[key];
    if (field === undefined) {
      // Oneof group names (`scheduling_choice`) are decoding artefacts; fields this schema
      // does not model are dropped.
      continue;
    }
    field.resolve();
    if (fieldValue === null || fieldValue === undefined) continue;
    if (field.map) {
      if (typeof fieldValue !== "object") continue;
      result[key] = Object.fromEntries(
        Object.entries(fieldValue as Record<string, unknown>).map((
          [mapKey, item],
        ) => [mapKeyOf(field, mapKey, direction), convertScalar(field, item, direction)]),
      );
    } else if (field.repeated) {
      if (!Array.isArray(fieldValue)) continue;
      result[key] = fieldValue.map((item) => convertScalar(field, item, direction));
    } else {
      result[key] = convertScalar(field, fieldValue, direction);
    }
  }
  return result;
}

function modelConfigType(): protobuf.Type {
  return protoRoot().lookupType("inference.ModelConfig");
}

/**
 * Prepares Triton's model-config JSON for encoding as `inference.ModelConfig`: enum names are
 * upper-cased (Triton accepts any case), fields the schema does not model are dropped.
 *
 * @param json The model-config JSON, proto field names.
 * @returns An object the `ModelConfigResponse` codec encodes as `config`.
 *
 * @example Encode a small config
 * ```ts
 * import { modelConfigToMessage } from "./model_config_proto.ts";
 * import { codecs } from "./grpc_codec.ts";
 * import assert from "node:assert/strict";
 *
 * const config = modelConfigToMessage({
 *   name: "m", max_batch_size: 4, instance_group: [{ kind: "kind_cpu", count: 1 }],
 * });
 * const back = codecs.ModelConfigResponse.decode(codecs.ModelConfigResponse.encode({ config }));
 * const groups = back.config?.instance_group as { kind: string }[];
 * assert.equal(groups[0]?.kind, "KIND_CPU");
 * ```
 */
export function modelConfigToMessage(json: TritonModelConfigJson): Record<string, unknown> {
  return convertMessage(modelConfigType(), json, "toMessage") as Record<string, unknown>;
}

/**
 * Turns a decoded `inference.ModelConfig` back into Triton's JSON form: 64-bit integers become
 * numbers and oneof group names are dropped.
 *
 * @param message The decoded config (as the codecs return it).
 * @returns The model-config JSON.
 *
 * @example An int64 dimension back to a number
 * ```ts
 * import { modelConfigToJson } from "./model_config_proto.ts";
 * import assert from "node:assert/strict";
 *
 * const json = modelConfigToJson({ name: "m", input: [{ name: "a", dims: ["-1"] }] });
 * assert.deepEqual(json, { name: "m", input: [{ name: "a", dims: [-1] }] });
 * ```
 */
export function modelConfigToJson(message: Record<string, unknown>): TritonModelConfigJson {
  return convertMessage(modelConfigType(), message, "toJson") as TritonModelConfigJson;
}
