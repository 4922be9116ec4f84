/**
 * Token-based access restriction of the gRPC front end's endpoint groups (each RPC's group is
 * in its table, `service.ts`). A call to a restricted RPC must carry the token in the
 * `triton-grpc-protocol-triton-access-token` metadata key: without it the call ends with
 * UNAUTHENTICATED, with a different token PERMISSION_DENIED (Triton answers UNAVAILABLE for both,
 * with a TODO to use UNAUTHENTICATED). Tokens are compared in constant time.
 *
 * @module
 */

import { type ResolvedSecurityConfig, tokensEqual } from "../../config/security_config.ts";
import { type AccessCheck, Status } from "./call.ts";

/** The gRPC metadata key that carries the access token. */
export const GRPC_ACCESS_TOKEN_KEY = "triton-grpc-protocol-triton-access-token";

/**
 * Builds the access check of the gRPC front end from a resolved security config.
 *
 * @param security The token and the restricted endpoint groups.
 * @returns The check, or `undefined` when nothing is restricted.
 *
 * @example Statistics need the token
 * ```ts
 * import { grpcAccessCheck } from "./access.ts";
 * import { Metadata } from "./call.ts";
 * import { resolveSecurityConfig } from "../../config/security_config.ts";
 * import assert from "node:assert/strict";
 *
 * const check = grpcAccessCheck(resolveSecurityConfig({ accessToken: "secret" }))!;
 * const key = "triton-grpc-protocol-triton-access-token";
 * assert.equal(check(new Metadata(), "statistics")?.code, 16); // UNAUTHENTICATED
 * assert.equal(check(new Metadata([[key, "guess"]]), "statistics")?.code, 7); // PERMISSION_DENIED
 * assert.equal(check(new Metadata([[key, "secret"]]), "statistics"), undefined);
 * assert.equal(check(new Metadata(), "inference"), undefined);
 * ```
 */
export function grpcAccessCheck(security: ResolvedSecurityConfig): AccessCheck | undefined {
  const { accessToken, restrictedEndpoints } = security;
  if (accessToken === undefined || restrictedEndpoints.size === 0) return undefined;
  return (metadata, group) => {
    if (!restrictedEndpoints.has(group)) return undefined;
    const given = metadata.get(GRPC_ACCESS_TOKEN_KEY);
    if (given === undefined) {
      return {
        code: Status.UNAUTHENTICATED,
        details: `This protocol is restricted, expecting header '${GRPC_ACCESS_TOKEN_KEY}'`,
      };
    }
    if (!tokensEqual(given, accessToken)) {
      return {
        code: Status.PERMISSION_DENIED,
        details:
          `This protocol is restricted: the '${GRPC_ACCESS_TOKEN_KEY}' header does not hold the access token`,
      };
    }
    return undefined;
  };
}
