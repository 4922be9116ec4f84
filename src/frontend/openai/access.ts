/**
 * The API key of the OpenAI routes: the access token of the restricted endpoints
 * (`securityConfig`), which OpenAI clients send as `Authorization: Bearer <key>` (the
 * `triton-access-token` header works too). A refusal is OpenAI's 401 with its error body.
 *
 * @module
 */

import { tokensEqual } from "../../config/security_config.ts";
import { openAIErrorResponse } from "./errors.ts";
import { OpenAIError } from "./wire.ts";

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * Checks a request to the `openai` endpoint group against the access token.
 *
 * @param request The request.
 * @param accessToken The token.
 * @returns `undefined` to let it through, or the 401 answer.
 *
 * @example The right key passes, a wrong one gets 401
 * ```ts
 * import { openAIAccess } from "./access.ts";
 * import assert from "node:assert/strict";
 *
 * const url = "http://localhost/v1/models";
 * assert.equal(openAIAccess(new Request(url, { headers: { authorization: "Bearer sk-1" } }), "sk-1"), undefined);
 * const refused = openAIAccess(new Request(url, { headers: { authorization: "Bearer sk-2" } }), "sk-1");
 * assert.equal(refused?.status, 401);
 * assert.equal((await refused!.json()).error.code, "invalid_api_key");
 * ```
 */
export function openAIAccess(request: Request, accessToken: string): Response | undefined {
  const authorization = request.headers.get("authorization");
  const given = authorization === null
    ? request.headers.get("triton-access-token") ?? undefined
    : BEARER.exec(authorization)?.[1];
  if (given === undefined) {
    return openAIErrorResponse(
      new OpenAIError(
        401,
        "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        { headers: { "www-authenticate": "Bearer" } },
      ),
    );
  }
  if (!tokensEqual(given, accessToken)) {
    return openAIErrorResponse(
      new OpenAIError(401, "Incorrect API key provided.", { code: "invalid_api_key" }),
    );
  }
  return undefined;
}
