/**
 * The schema of {@linkcode TritonConfig}: each field's zod validator, how its environment
 * variables are read and what a valid value is in words (for messages), the defaults, and the
 * validation of one source of values with messages that name the field and the source.
 *
 * @module
 */

import { z } from "zod";
import { TritonValidationError } from "../errors.ts";
import { LOG_FORMATS } from "../log.ts";
import { cacheSettingProblem } from "./cache_config.ts";
import { metricsSettingProblem } from "./metrics_config.ts";
import type { ResolvedTritonConfig, TritonConfig } from "./triton_config_fields.ts";
import type { EnvFieldKind } from "./triton_config_env.ts";

const MIB_64 = 64 * 1024 * 1024;
const SETTING = /^(?:[^,=\s]+,)?[^,=\s]+=.*$/;

interface FieldSpec {
  kind: EnvFieldKind;
  schema: z.ZodType;
  /** What a valid value is, completing "<field> must be ...". */
  description: string;
}

function field(kind: EnvFieldKind, schema: z.ZodType, description: string): FieldSpec {
  return { kind, schema, description };
}

const nonEmptyString = field("string", z.string().min(1), "a non-empty string");
const port = field("integer", z.int().min(0).max(65535), "an integer between 0 and 65535");
const flag = field("boolean", z.boolean(), "a boolean");
const nonNegative = field("integer", z.int().min(0), "an integer >= 0");
const positive = field("integer", z.int().min(1), "an integer >= 1");
const pattern = field(
  "string",
  z.string().superRefine((source, context) => {
    try {
      new RegExp(source);
    } catch (error) {
      context.addIssue({ code: "custom", message: (error as Error).message });
    }
  }),
  "a valid regular expression",
);
const SETTING_DESCRIPTION = `a "<group>,<setting>=<value>" or "<setting>=<value>" string`;
const settings = field("settings", z.array(z.string().regex(SETTING)), "a list of strings");
const metricsSettings = field(
  "settings",
  z.array(
    z.string().regex(SETTING).superRefine((entry, context) => {
      const problem = metricsSettingProblem(entry);
      if (problem !== undefined) context.addIssue({ code: "custom", message: problem });
    }),
  ),
  "a list of strings",
);

// An origin as browsers send it: scheme://host[:port], nothing after.
const origins = field(
  "settings",
  z.array(
    z.string().superRefine((origin, context) => {
      if (origin === "*") return;
      let serialized: string | undefined;
      try {
        serialized = new URL(origin).origin;
      } catch {
        serialized = undefined;
      }
      if (serialized !== origin) {
        context.addIssue({
          code: "custom",
          message:
            `not an origin: expected "*" or scheme://host[:port], without a path or a final slash`,
        });
      }
    }),
  ),
  "a list of origins",
);

const FIELDS = {
  id: nonEmptyString,
  modelRepository: nonEmptyString,
  httpAddress: nonEmptyString,
  httpPort: port,
  grpcAddress: nonEmptyString,
  grpcPort: port,
  metricsAddress: nonEmptyString,
  metricsPort: port,
  allowHttp: flag,
  allowGrpc: flag,
  allowMetrics: flag,
  allowCpuMetrics: flag,
  allowGpuMetrics: flag,
  metricsIntervalMs: positive,
  metricsConfig: metricsSettings,
  logVerbose: nonNegative,
  logFile: nonEmptyString,
  logFormat: field("string", z.enum(LOG_FORMATS), `"default" or "ISO8601"`),
  exitTimeoutSecs: nonNegative,
  exitOnError: flag,
  strictReadiness: flag,
  httpHeaderForwardPattern: pattern,
  grpcHeaderForwardPattern: pattern,
  pinnedMemoryPoolByteSize: nonNegative,
  responseCacheByteSize: nonNegative,
  cacheConfig: field(
    "settings",
    z.array(
      z.string().regex(SETTING).superRefine((entry, context) => {
        const problem = cacheSettingProblem(entry);
        if (problem !== undefined) context.addIssue({ code: "custom", message: problem });
      }),
    ),
    "a list of strings",
  ),
  traceConfig: settings,
  maxRequestBytes: positive,
  httpThreadCount: positive,
  httpCorsOrigins: origins,
  httpCorsAllowCredentials: flag,
  httpCorsMaxAge: nonNegative,
  httpDocs: flag,
  grpcMaxMessageBytes: field(
    "integer",
    z.int().min(1).max(2 ** 31 - 1),
    "an integer between 1 and 2147483647",
  ),
  grpcInferResponseCompressionLevel: field(
    "string",
    z.enum(["none", "low", "medium", "high"]),
    `one of "none", "low", "medium", "high"`,
  ),
  grpcKeepaliveTime: positive,
  grpcKeepaliveTimeout: positive,
  grpcKeepalivePermitWithoutCalls: flag,
  grpcUseSsl: flag,
  grpcUseSslMutual: flag,
  grpcServerCert: nonEmptyString,
  grpcServerKey: nonEmptyString,
  grpcRootCert: nonEmptyString,
} as const satisfies Record<keyof TritonConfig, FieldSpec>;

/** A field of {@linkcode TritonConfig}. */
export type FieldName = keyof typeof FIELDS;

/** Every field, in declaration order. */
export const FIELD_NAMES = Object.keys(FIELDS) as FieldName[];

const SCHEMA = z.strictObject(
  Object.fromEntries(FIELD_NAMES.map((name) => [name, FIELDS[name].schema.optional()])),
);

/** How environment variables of each field are read. */
export const ENV_KINDS: Record<string, EnvFieldKind> = Object.fromEntries(
  FIELD_NAMES.map((name) => [name, FIELDS[name].kind]),
);

type Defaults = Omit<ResolvedTritonConfig, "metricsAddress">;

/** The default of every field (`metricsAddress` follows `httpAddress`). */
export const DEFAULTS: Defaults = {
  id: "triton",
  modelRepository: undefined,
  httpAddress: "0.0.0.0",
  httpPort: 8000,
  grpcAddress: "0.0.0.0",
  grpcPort: 8001,
  metricsPort: 8002,
  allowHttp: true,
  allowGrpc: true,
  allowMetrics: true,
  allowCpuMetrics: false,
  allowGpuMetrics: undefined,
  metricsIntervalMs: 2000,
  metricsConfig: [],
  logVerbose: 0,
  logFile: undefined,
  logFormat: "default",
  exitTimeoutSecs: 30,
  exitOnError: true,
  strictReadiness: true,
  httpHeaderForwardPattern: undefined,
  grpcHeaderForwardPattern: undefined,
  pinnedMemoryPoolByteSize: undefined,
  responseCacheByteSize: 0,
  cacheConfig: [],
  traceConfig: [],
  maxRequestBytes: MIB_64,
  httpThreadCount: 1,
  httpCorsOrigins: [],
  httpCorsAllowCredentials: false,
  httpCorsMaxAge: 600,
  httpDocs: true,
  grpcMaxMessageBytes: MIB_64,
  grpcInferResponseCompressionLevel: "none",
  grpcKeepaliveTime: 7_200_000,
  grpcKeepaliveTimeout: 20_000,
  grpcKeepalivePermitWithoutCalls: true,
  grpcUseSsl: false,
  grpcUseSslMutual: false,
  grpcServerCert: undefined,
  grpcServerKey: undefined,
  grpcRootCert: undefined,
};

/** One source of field values, validated on its own. */
export interface Layer {
  /** Higher wins. */
  rank: number;
  /** Whether the values come from environment variables (strings converted by kind). */
  env?: boolean;
  values: Partial<Record<FieldName, unknown>>;
  /** Where a field (or one element of a list field) came from, for messages. */
  sourceOf(field: string, index?: number): string;
}

/**
 * Validates one source's values against the schema.
 *
 * @param layer The source.
 * @returns Its values, as the schema parsed them.
 * @throws {TritonValidationError} Naming each bad field (or element) and where it came from.
 */
export function validate(layer: Layer): Partial<Record<FieldName, unknown>> {
  const result = SCHEMA.safeParse(layer.values);
  if (result.success) return result.data;
  const problems: { source: string; message: string }[] = [];
  for (const issue of result.error.issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        problems.push({ source: layer.sourceOf(key), message: `unknown field "${key}"` });
      }
      continue;
    }
    const name = String(issue.path[0]);
    const spec = FIELDS[name as FieldName];
    const value = layer.values[name as FieldName];
    const index = issue.path[1];
    const detail = issue.code === "custom" ? `: ${issue.message}` : "";
    let message: string;
    if (typeof index === "number" && Array.isArray(value)) {
      const element = show(value[index]);
      message = issue.code === "custom"
        ? `${name}[${index}] ${element}: ${issue.message}`
        : `${name}[${index}] must be ${SETTING_DESCRIPTION}, got ${element}`;
    } else {
      let description = spec.description;
      if (layer.env === true && spec.kind === "boolean") {
        description += " (true, false, 1, 0, yes, no, on or off)";
      }
      message = `${name} must be ${description}, got ${show(value)}${detail}`;
    }
    problems.push({
      source: layer.sourceOf(name, typeof index === "number" ? index : undefined),
      message,
    });
  }
  const sources = new Set(problems.map(({ source }) => source));
  const text = sources.size === 1
    ? `Invalid TritonConfig from ${problems[0]!.source}: ${
      problems.map(({ message }) => message).join("; ")
    }`
    : `Invalid TritonConfig: ${
      problems.map(({ source, message }) => `from ${source}: ${message}`).join("; ")
    }`;
  throw new TritonValidationError(text);
}

/**
 * A value as an error message shows it.
 *
 * @param value The value.
 * @returns JSON where possible.
 */
export function show(value: unknown): string {
  if (typeof value === "number" || typeof value === "bigint" || value === undefined) {
    return String(value);
  }
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
