/**
 * Token-based access restriction of endpoint groups, like PyTriton's `TritonSecurityConfig`.
 * Clients of a restricted group send the token in the `triton-access-token` HTTP header or the
 * `triton-grpc-protocol-triton-access-token` gRPC metadata key.
 *
 * @module
 */

import { z } from "zod";
import { TritonValidationError } from "../errors.ts";

/** Endpoint groups that can be restricted, named as Triton names them. */
export const VALID_ENDPOINTS = [
  "health",
  "metadata",
  "inference",
  "shared-memory",
  "model-config",
  "model-repository",
  "statistics",
  "trace",
  "logging",
  // DenoTriton's own: the OpenAI-compatible routes (/v1/...), whose clients send the token as
  // their API key (`Authorization: Bearer <token>`).
  "openai",
] as const;

/** An endpoint group name. */
export type EndpointGroup = typeof VALID_ENDPOINTS[number];

/** The endpoint groups restricted when the configuration names none. */
export const DEFAULT_RESTRICTED_ENDPOINTS: readonly EndpointGroup[] = Object.freeze([
  "shared-memory",
  "model-repository",
  "statistics",
  "trace",
  "logging",
]);

/** Access restriction settings. */
export interface SecurityConfig {
  /**
   * The token clients must send to reach restricted endpoints; unset generates a random one
   * when any endpoint is restricted.
   *
   * @default {undefined}
   */
  accessToken?: string;
  /**
   * Endpoint groups that need the token; an empty list restricts nothing.
   *
   * @default {["shared-memory", "model-repository", "statistics", "trace", "logging"]}
   */
  restrictedEndpoints?: readonly string[];
}

/** A {@linkcode SecurityConfig} with defaults applied. */
export interface ResolvedSecurityConfig {
  /** The token, or `undefined` when nothing is restricted and none was given. */
  readonly accessToken: string | undefined;
  /** The restricted endpoint groups. */
  readonly restrictedEndpoints: ReadonlySet<string>;
}

const SCHEMA = z.strictObject({
  accessToken: z.string().optional(),
  restrictedEndpoints: z.array(z.string()).optional(),
});

const encoder = new TextEncoder();

// Visible ASCII only: the token travels in an HTTP header and gRPC metadata.
const TOKEN = /^[\x21-\x7e]+$/;

/**
 * Applies the defaults of a {@linkcode SecurityConfig}: no list restricts
 * {@linkcode DEFAULT_RESTRICTED_ENDPOINTS}; an empty list restricts nothing (a given token is
 * kept, none is generated); a missing token is generated (32 random bytes, base64url) when any
 * endpoint is restricted.
 *
 * @param config The security settings.
 * @returns The token and the set of restricted endpoint groups.
 * @throws {TritonValidationError} An endpoint name is unknown, or the token is empty or holds
 * characters other than visible ASCII.
 *
 * @example Defaults
 * ```ts
 * import { DEFAULT_RESTRICTED_ENDPOINTS, resolveSecurityConfig } from "./security_config.ts";
 * import assert from "node:assert/strict";
 *
 * const security = resolveSecurityConfig();
 * assert.deepEqual([...security.restrictedEndpoints], DEFAULT_RESTRICTED_ENDPOINTS);
 * assert.equal(security.accessToken?.length, 43);
 * ```
 *
 * @example No restriction
 * ```ts
 * import { resolveSecurityConfig } from "./security_config.ts";
 * import assert from "node:assert/strict";
 *
 * const security = resolveSecurityConfig({ restrictedEndpoints: [] });
 * assert.equal(security.restrictedEndpoints.size, 0);
 * assert.equal(security.accessToken, undefined);
 * assert.throws(() => resolveSecurityConfig({ restrictedEndpoints: ["shared_memory"] }), {
 *   message: 'Invalid endpoint names: "shared_memory" (valid: health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging, openai)',
 * });
 * ```
 */
export function resolveSecurityConfig(config: SecurityConfig = {}): ResolvedSecurityConfig {
  const parsed = SCHEMA.safeParse(config);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) =>
      issue.code === "unrecognized_keys"
        ? issue.keys.map((key) => `unknown field "${key}"`).join("; ")
        : `${issue.path.join(".")}: ${issue.message}`
    );
    throw new TritonValidationError(`Invalid SecurityConfig: ${problems.join("; ")}`);
  }
  const { accessToken, restrictedEndpoints } = parsed.data;
  const endpoints = restrictedEndpoints ?? DEFAULT_RESTRICTED_ENDPOINTS;
  const valid = new Set<string>(VALID_ENDPOINTS);
  const invalid = endpoints.filter((name) => !valid.has(name));
  if (invalid.length > 0) {
    throw new TritonValidationError(
      `Invalid endpoint names: ${invalid.map((name) => JSON.stringify(name)).join(", ")} (valid: ${
        VALID_ENDPOINTS.join(", ")
      })`,
    );
  }
  if (accessToken !== undefined && !TOKEN.test(accessToken)) {
    throw new TritonValidationError(
      "Invalid SecurityConfig: accessToken must be a non-empty string of visible ASCII characters",
    );
  }
  return Object.freeze({
    accessToken: accessToken ?? (endpoints.length > 0 ? generateToken() : undefined),
    restrictedEndpoints: new Set(endpoints),
  });
}

/**
 * Compares two tokens in time that depends only on their lengths, so a client cannot find the
 * token one character at a time.
 *
 * @param a One token.
 * @param b The other token.
 * @returns Whether they are equal.
 *
 * @example Equal tokens, a changed letter, a longer token
 * ```ts
 * import { tokensEqual } from "./security_config.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(tokensEqual("secret", "secret"), true);
 * assert.equal(tokensEqual("secret", "secreT"), false);
 * assert.equal(tokensEqual("secret", "secret2"), false);
 * ```
 */
export function tokensEqual(a: string, b: string): boolean {
  const left = encoder.encode(a);
  const right = encoder.encode(b);
  const length = Math.max(left.length, right.length);
  // Scan the full length even when the lengths differ, and never exit early.
  let difference = left.length ^ right.length;
  for (let i = 0; i < length; i++) {
    difference |= (left[i] ?? 0) ^ (right[i] ?? 0);
  }
  return difference === 0;
}

function generateToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_")
    .replace(/=+$/, "");
}
