/**
 * Token-based access restriction of the HTTP front end's endpoint groups. A request to a
 * restricted group must carry the token in the `triton-access-token` header: without it the
 * answer is 401, with a different token 403 (Triton itself answers 403 for both; telling the
 * two apart helps clients and still reveals nothing of the token). Tokens are compared in
 * constant time.
 *
 * @module
 */

import { type ResolvedSecurityConfig, tokensEqual } from "../../config/security_config.ts";
import { errorResponse } from "./errors.ts";
import { openAIAccess } from "../openai/access.ts";
import type { EndpointGroup } from "./router.ts";

/**
 * Decides whether a request may use an endpoint group: return a `Response` (e.g. 401/403) to
 * refuse it, or `undefined` to let it through.
 */
export type AccessCheck = (
  request: Request,
  group: EndpointGroup,
) => Response | undefined | Promise<Response | undefined>;

/** The HTTP header that carries the access token. */
export const ACCESS_TOKEN_HEADER = "triton-access-token";

/**
 * Builds the `accessCheck` of the HTTP front end from a resolved security config.
 *
 * @param security The token and the restricted endpoint groups.
 * @returns The check, or `undefined` when nothing is restricted.
 *
 * @example Statistics need the token
 * ```ts
 * import { httpAccessCheck } from "./access.ts";
 * import { resolveSecurityConfig } from "../../config/security_config.ts";
 * import assert from "node:assert/strict";
 *
 * const check = httpAccessCheck(resolveSecurityConfig({ accessToken: "secret" }))!;
 * const url = "http://localhost/v2/models/stats";
 * assert.equal((await check(new Request(url), "statistics"))?.status, 401);
 * const wrong = new Request(url, { headers: { "triton-access-token": "guess" } });
 * assert.equal((await check(wrong, "statistics"))?.status, 403);
 * const right = new Request(url, { headers: { "triton-access-token": "secret" } });
 * assert.equal(await check(right, "statistics"), undefined);
 * assert.equal(await check(new Request(url), "inference"), undefined);
 * ```
 */
export function httpAccessCheck(security: ResolvedSecurityConfig): AccessCheck | undefined {
  const { accessToken, restrictedEndpoints } = security;
  if (restrictedEndpoints.size === 0 || accessToken === undefined) return undefined;
  return (request, group) => {
    if (!restrictedEndpoints.has(group)) return undefined;
    if (group === "openai") return openAIAccess(request, accessToken);
    const given = request.headers.get(ACCESS_TOKEN_HEADER);
    if (given === null) {
      return errorResponse(
        401,
        `This API is restricted, expecting header '${ACCESS_TOKEN_HEADER}'`,
        { "www-authenticate": ACCESS_TOKEN_HEADER },
      );
    }
    if (!tokensEqual(given, accessToken)) {
      return errorResponse(
        403,
        `This API is restricted: the '${ACCESS_TOKEN_HEADER}' header does not hold the access token`,
      );
    }
    return undefined;
  };
}
