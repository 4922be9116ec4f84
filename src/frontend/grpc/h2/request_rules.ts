/**
 * The rules a request's header fields must follow in HTTP/2 (RFC 9113 §8.1 to §8.3). A request
 * that breaks one is malformed: the session resets its stream with PROTOCOL_ERROR (§8.1.1) and
 * never hands it to the application.
 *
 * @module
 */

import type { HeaderField } from "./hpack.ts";

/** What {@linkcode checkRequest} found: a reason the request is malformed, or its length. */
export type RequestCheck =
  | { readonly malformed: string }
  | {
    readonly malformed?: undefined;
    /** The `content-length` the request announced; -1 when it has none. */
    readonly contentLength: number;
  };

// §8.2.2: fields that describe a connection, which HTTP/2 conveys by other means.
const CONNECTION_SPECIFIC = new Set([
  "connection",
  "proxy-connection",
  "keep-alive",
  "transfer-encoding",
  "upgrade",
]);

// §8.3.1: the pseudo-header fields of a request.
const REQUEST_PSEUDO = new Set([":method", ":scheme", ":authority", ":path"]);

// §8.2.1: a name has no character in 0x00-0x20, 'A'-'Z' (0x41-0x5a), 0x7f-0xff, nor a colon
// (pseudo-header fields aside, whose name starts with one).
function validName(name: string, from: number): boolean {
  if (name.length === from) return false;
  for (let i = from; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c <= 0x20 || (c >= 0x41 && c <= 0x5a) || c >= 0x7f || c === 0x3a) return false;
  }
  return true;
}

// §8.2.1: a value has no NUL, CR or LF, and neither starts nor ends with a space or a tab.
const INVALID_VALUE = /[\0\r\n]|^[\t ]|[\t ]$/;

/** The reason a regular field (not a pseudo-header) is malformed, or undefined. */
function fieldProblem(name: string, value: string): string | undefined {
  if (!validName(name, 0)) return `the field name '${name}' is not lower-case token characters`;
  if (INVALID_VALUE.test(value)) return `the value of '${name}' has a forbidden character`;
  if (CONNECTION_SPECIFIC.has(name)) return `the connection-specific field '${name}'`;
  // §8.2.2: TE is the one exception, and only with "trailers".
  if (name === "te" && value !== "trailers") return `te: ${value} (only 'trailers' may be sent)`;
  return undefined;
}

/**
 * Checks a request's header fields (RFC 9113 §8.2, §8.3): lower-case valid names, values
 * without forbidden characters, no connection-specific field, `te` only `trailers`, the
 * request's pseudo-header fields (each at most once, before the regular fields, and
 * `:method`, `:scheme` and a non-empty `:path` present unless the method is CONNECT), and a
 * well-formed `content-length` (§8.1.1), which it returns.
 *
 * @param fields The decoded header fields, in order.
 * @returns Why the request is malformed, or its announced content length.
 *
 * @example A gRPC request, and one with an upper-case name
 * ```ts
 * import { checkRequest } from "./request_rules.ts";
 * import assert from "node:assert/strict";
 *
 * const request: [string, string][] = [
 *   [":method", "POST"],
 *   [":scheme", "http"],
 *   [":path", "/inference.GRPCInferenceService/ServerLive"],
 *   ["content-type", "application/grpc"],
 *   ["te", "trailers"],
 * ];
 * assert.deepEqual(checkRequest(request), { contentLength: -1 });
 * assert.deepEqual(checkRequest([...request, ["X-Id", "1"]]), {
 *   malformed: "the field name 'X-Id' is not lower-case token characters",
 * });
 * ```
 */
export function checkRequest(fields: readonly HeaderField[]): RequestCheck {
  let method: string | undefined;
  let scheme: string | undefined;
  let path: string | undefined;
  let authority: string | undefined;
  let regularSeen = false;
  let contentLength = -1;
  for (const [name, value] of fields) {
    if (name.charCodeAt(0) === 0x3a) {
      // §8.3: pseudo-header fields come first, once each, and only those of requests.
      if (regularSeen) return { malformed: `the pseudo-header field ${name} after a regular one` };
      if (!REQUEST_PSEUDO.has(name)) return { malformed: `the pseudo-header field ${name}` };
      if (name === ":method") {
        if (method !== undefined) return { malformed: "two :method fields" };
        method = value;
      } else if (name === ":scheme") {
        if (scheme !== undefined) return { malformed: "two :scheme fields" };
        scheme = value;
      } else if (name === ":path") {
        if (path !== undefined) return { malformed: "two :path fields" };
        path = value;
      } else {
        if (authority !== undefined) return { malformed: "two :authority fields" };
        authority = value;
      }
      continue;
    }
    regularSeen = true;
    const problem = fieldProblem(name, value);
    if (problem !== undefined) return { malformed: problem };
    if (name === "content-length") {
      const length = /^\d{1,15}$/.test(value) ? Number(value) : -1;
      if (length === -1 || (contentLength !== -1 && contentLength !== length)) {
        return { malformed: `content-length: ${value}` };
      }
      contentLength = length;
    }
  }
  if (method === undefined || method === "") return { malformed: "no :method" };
  // §8.5: CONNECT names only an authority.
  if (method === "CONNECT") {
    if (authority === undefined || scheme !== undefined || path !== undefined) {
      return { malformed: "a CONNECT request with :scheme or :path, or without :authority" };
    }
    return { contentLength };
  }
  if (scheme === undefined || scheme === "") return { malformed: "no :scheme" };
  // §8.3.1: an http or https URI's path is never empty ("/" at least).
  if (path === undefined || path === "") return { malformed: "no :path, or an empty one" };
  return { contentLength };
}

/**
 * Checks the fields of a request's trailer section (RFC 9113 §8.1, §8.3): the rules of regular
 * fields, and no pseudo-header field.
 *
 * @param fields The decoded trailer fields.
 * @returns Why the trailers are malformed, or undefined.
 *
 * @example A regular trailer passes, a pseudo-header does not
 * ```ts
 * import { checkTrailers } from "./request_rules.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(checkTrailers([["x-checksum", "1"]]), undefined);
 * assert.equal(checkTrailers([[":method", "POST"]]), "the pseudo-header field :method in trailers");
 * ```
 */
export function checkTrailers(fields: readonly HeaderField[]): string | undefined {
  for (const [name, value] of fields) {
    if (name.charCodeAt(0) === 0x3a) return `the pseudo-header field ${name} in trailers`;
    const problem = fieldProblem(name, value);
    if (problem !== undefined) return problem;
  }
  return undefined;
}
