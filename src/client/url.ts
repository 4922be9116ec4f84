/**
 * Server URLs as the client accepts them: `host`, `host:port`, `http://host:port`,
 * `grpc://host:port`. No scheme means HTTP; no port means 8000 (HTTP) or 8001 (gRPC).
 *
 * @module
 */

import { ClientInvalidUrlError } from "./errors.ts";

/** The protocols the client speaks. */
export type ClientProtocol = "http" | "grpc";

/** A parsed server URL. */
export interface TritonUrl {
  /** The protocol. */
  readonly scheme: ClientProtocol;
  /** The host name or address (IPv6 without brackets). */
  readonly hostname: string;
  /** The port. */
  readonly port: number;
  /** `host:port` (IPv6 in brackets). */
  readonly withoutScheme: string;
  /** `scheme://host:port`. */
  readonly withScheme: string;
}

/** Default ports of each protocol. */
export const DEFAULT_PORTS: Readonly<Record<ClientProtocol, number>> = { http: 8000, grpc: 8001 };

const SCHEME = /^([a-zA-Z][a-zA-Z0-9+.-]*):\/\//;

/**
 * Parses a server URL.
 *
 * @param url `host`, `host:port`, `http://host:port` or `grpc://host:port` (a trailing `/` is
 *   allowed).
 * @returns The parsed URL.
 * @throws {ClientInvalidUrlError} For other schemes, paths, bad ports or an empty host.
 *
 * @example Every form
 * ```ts
 * import { parseTritonUrl } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(parseTritonUrl("localhost").withScheme, "http://localhost:8000");
 * assert.equal(parseTritonUrl("grpc://10.0.0.1").port, 8001);
 * assert.equal(parseTritonUrl("[::1]:9000").hostname, "::1");
 * assert.throws(() => parseTritonUrl("ftp://host"), /scheme/);
 * ```
 */
export function parseTritonUrl(url: string): TritonUrl {
  const invalid = (why: string): ClientInvalidUrlError =>
    new ClientInvalidUrlError(`Invalid server URL ${JSON.stringify(url)}: ${why}`);
  let rest = url.trim();
  let scheme: ClientProtocol = "http";
  const match = SCHEME.exec(rest);
  if (match) {
    const given = match[1]!.toLowerCase();
    if (given !== "http" && given !== "grpc") {
      throw invalid(`scheme must be http or grpc, got ${given}`);
    }
    scheme = given;
    rest = rest.slice(match[0].length);
  }
  if (rest.endsWith("/")) rest = rest.slice(0, -1);
  if (rest.includes("/") || rest.includes("?") || rest.includes("#")) {
    throw invalid("a path, query or fragment is not allowed");
  }
  if (rest.includes("@")) throw invalid("user information is not allowed");
  let hostname: string;
  let portText: string | undefined;
  if (rest.startsWith("[")) {
    const end = rest.indexOf("]");
    if (end < 0) throw invalid("unclosed '[' in an IPv6 address");
    hostname = rest.slice(1, end);
    const after = rest.slice(end + 1);
    if (after !== "" && !after.startsWith(":")) throw invalid("unexpected text after ']'");
    portText = after === "" ? undefined : after.slice(1);
  } else {
    const parts = rest.split(":");
    if (parts.length > 2) throw invalid("IPv6 addresses must be written in brackets");
    hostname = parts[0]!;
    portText = parts[1];
  }
  if (hostname === "") throw invalid("the host is empty");
  let port = DEFAULT_PORTS[scheme];
  if (portText !== undefined) {
    if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) > 65535 || Number(portText) === 0) {
      throw invalid(`the port must be 1-65535, got ${JSON.stringify(portText)}`);
    }
    port = Number(portText);
  }
  const host = hostname.includes(":") ? `[${hostname}]` : hostname;
  const withoutScheme = `${host}:${port}`;
  return { scheme, hostname, port, withoutScheme, withScheme: `${scheme}://${withoutScheme}` };
}
