/**
 * Cross-origin resource sharing (the Fetch standard's CORS protocol) for the HTTP front end, so
 * that a page served from another origin can call the server from a browser. Off unless origins
 * are configured, and then nothing changes for a request without an `Origin` header.
 *
 * - A preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) to a path the
 *   server serves with that method is answered 204 with the allowed method and headers and
 *   `Access-Control-Max-Age`, when the origin is allowed; 403 when it is not. No access check
 *   runs on a preflight: browsers never send the token on one.
 * - Every other answer to an allowed origin carries `Access-Control-Allow-Origin`, exposes the
 *   binary data extension's `Inference-Header-Content-Length`, and `Vary: Origin` when the answer
 *   depends on it. Credentials (cookies, HTTP authentication) are allowed only when configured,
 *   and never with `*`.
 *
 * @module
 */

import { TritonValidationError } from "../../errors.ts";
import { HEADER_LENGTH_HEADER } from "../../protocol/binary_data.ts";
import { ACCESS_TOKEN_HEADER } from "./access.ts";
import { errorResponse } from "./errors.ts";
import { pathOf } from "./url_path.ts";

/** CORS settings of the HTTP front end (plain data: HTTP threads get a copy). */
export interface CorsSettings {
  /** The origins allowed (`https://app.example:8443`), or `["*"]` for any. */
  readonly origins: readonly string[];
  /**
   * Allow credentialed requests (cookies, HTTP authentication, client certificates).
   *
   * @default {false}
   */
  readonly allowCredentials?: boolean;
  /**
   * How long a browser may keep a preflight's answer, in seconds.
   *
   * @default {600}
   */
  readonly maxAge?: number;
}

/**
 * The request headers a cross-origin call may send beside the CORS-safelisted ones: the body's
 * type and encoding, the binary data extension's length, and the access token (the OpenAI routes
 * take it as `Authorization: Bearer`).
 */
export const CORS_ALLOWED_HEADERS: readonly string[] = [
  "content-type",
  "content-encoding",
  HEADER_LENGTH_HEADER,
  ACCESS_TOKEN_HEADER,
  "authorization",
];

/** The response headers a cross-origin page may read beside the CORS-safelisted ones. */
export const CORS_EXPOSED_HEADERS: readonly string[] = [HEADER_LENGTH_HEADER, "content-encoding"];

const DEFAULT_MAX_AGE = 600;

/**
 * Checks CORS settings.
 *
 * @param settings The settings, or `undefined`.
 * @param source What they came from, for messages (a config field's name).
 * @returns The settings with defaults applied; `undefined` when no origin is allowed.
 * @throws {TritonValidationError} For an entry that is not `*` or an origin, or credentials
 *   with `*`.
 *
 * @example Defaults for an origin, none, and a path refused
 * ```ts
 * import { resolveCorsSettings } from "./cors.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(resolveCorsSettings({ origins: ["http://a.test:3000"] }), {
 *   origins: ["http://a.test:3000"], allowCredentials: false, maxAge: 600,
 * });
 * assert.equal(resolveCorsSettings({ origins: [] }), undefined);
 * assert.throws(() => resolveCorsSettings({ origins: ["http://a.test/app"] }), /not an origin/);
 * ```
 */
export function resolveCorsSettings(
  settings: CorsSettings | undefined,
  source = "CORS origins",
): Required<CorsSettings> | undefined {
  if (settings === undefined || settings.origins.length === 0) return undefined;
  for (const origin of settings.origins) {
    if (origin === "*") continue;
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      parsed = undefined;
    }
    if (parsed === undefined || parsed.origin !== origin) {
      throw new TritonValidationError(
        `Invalid ${source}: ${
          JSON.stringify(origin)
        } is not an origin: expected "*" or scheme://host[:port], without a path or a final slash`,
      );
    }
  }
  const allowCredentials = settings.allowCredentials ?? false;
  if (allowCredentials && settings.origins.includes("*")) {
    throw new TritonValidationError(
      `Invalid ${source}: credentials need exact origins, not "*" (browsers refuse credentialed answers to "*")`,
    );
  }
  const maxAge = settings.maxAge ?? DEFAULT_MAX_AGE;
  if (!Number.isSafeInteger(maxAge) || maxAge < 0) {
    throw new TritonValidationError(
      `Invalid CORS max age: expected an integer >= 0 (seconds), got ${maxAge}`,
    );
  }
  return { origins: [...settings.origins], allowCredentials, maxAge };
}

/** What {@linkcode Cors.preflight} needs to know of the route table. */
export type AllowedMethods = (path: string) => readonly string[];

/** The CORS protocol over resolved settings. */
export class Cors {
  #settings: Required<CorsSettings>;
  #any: boolean;
  #origins: ReadonlySet<string>;
  #forwarded: RegExp | undefined;

  /**
   * @param settings Resolved settings ({@linkcode resolveCorsSettings}).
   * @param headerForwardPattern Headers forwarded as parameters, which a call may send too.
   */
  constructor(settings: Required<CorsSettings>, headerForwardPattern?: RegExp) {
    this.#settings = settings;
    this.#any = settings.origins.includes("*");
    this.#origins = new Set(settings.origins);
    this.#forwarded = headerForwardPattern;
  }

  /**
   * Whether a request is a CORS preflight.
   *
   * @param request The request.
   * @returns Whether to answer it with {@linkcode Cors.preflight}.
   */
  isPreflight(request: Request): boolean {
    return request.method === "OPTIONS" && request.headers.has("origin") &&
      request.headers.has("access-control-request-method");
  }

  #allowed(origin: string): boolean {
    return this.#any || this.#origins.has(origin);
  }

  #allowOrigin(origin: string): string {
    // With credentials the origin must be named; otherwise "*" answers any origin, cacheable.
    return this.#any && !this.#settings.allowCredentials ? "*" : origin;
  }

  /**
   * Answers a preflight.
   *
   * @param request The preflight.
   * @param allowedMethods The methods the route table serves at a path (none: not a route).
   * @returns 204 with the CORS headers; 403 for an origin, method or header not allowed; 404 for
   *   a path the server does not serve.
   */
  preflight(request: Request, allowedMethods: AllowedMethods): Response {
    const origin = request.headers.get("origin")!;
    const vary = { vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers" };
    const methods = allowedMethods(pathOf(request.url));
    if (methods.length === 0) return errorResponse(404, "Not Found", vary);
    if (!this.#allowed(origin)) {
      return errorResponse(403, `CORS: origin '${origin}' is not allowed`, vary);
    }
    const method = request.headers.get("access-control-request-method")!.toUpperCase();
    const served = methods.includes(method) || (method === "HEAD" && methods.includes("GET"));
    if (!served) {
      return errorResponse(403, `CORS: method '${method}' is not allowed on this path`, vary);
    }
    const asked = (request.headers.get("access-control-request-headers") ?? "")
      .split(",").map((name) => name.trim().toLowerCase()).filter((name) => name !== "");
    const refused = asked.filter((name) =>
      !CORS_ALLOWED_HEADERS.includes(name) && this.#forwarded?.test(name) !== true
    );
    if (refused.length > 0) {
      return errorResponse(
        403,
        `CORS: request header${refused.length > 1 ? "s" : ""} '${
          refused.join("', '")
        }' not allowed: expected ${CORS_ALLOWED_HEADERS.join(", ")} or a forwarded header`,
        vary,
      );
    }
    const headers: Record<string, string> = {
      ...vary,
      "access-control-allow-origin": this.#allowOrigin(origin),
      "access-control-allow-methods": method === "HEAD" ? "GET, HEAD" : methods.join(", "),
      "access-control-max-age": String(this.#settings.maxAge),
    };
    if (asked.length > 0) headers["access-control-allow-headers"] = asked.join(", ");
    if (this.#settings.allowCredentials) headers["access-control-allow-credentials"] = "true";
    return new Response(null, { status: 204, headers });
  }

  /**
   * Adds the CORS headers to an answer to a request with an allowed `Origin`.
   *
   * @param request The request.
   * @param response The answer.
   * @returns The answer, with the headers when the origin is allowed.
   */
  decorate(request: Request, response: Response): Response {
    const origin = request.headers.get("origin");
    const dependsOnOrigin = !this.#any || this.#settings.allowCredentials;
    if (origin === null || !this.#allowed(origin)) {
      if (origin !== null && dependsOnOrigin) appendVary(response);
      return response;
    }
    // The front end's answers are its own (`new Response`), so their headers can change.
    const headers = response.headers;
    headers.set("access-control-allow-origin", this.#allowOrigin(origin));
    headers.set("access-control-expose-headers", CORS_EXPOSED_HEADERS.join(", "));
    if (this.#settings.allowCredentials) headers.set("access-control-allow-credentials", "true");
    if (dependsOnOrigin) appendVary(response);
    return response;
  }
}

function appendVary(response: Response): void {
  const vary = response.headers.get("vary");
  if (vary !== null && /(^|,)\s*origin\s*(,|$)/i.test(vary)) return;
  response.headers.set("vary", vary === null ? "Origin" : `${vary}, Origin`);
}
