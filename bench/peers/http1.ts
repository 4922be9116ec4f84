/**
 * A lean HTTP/1.1 client connection for the peers' load generator: one keep-alive connection,
 * one request at a time, the request's bytes prepared once. It costs the load generator a few
 * microseconds per request, so that on two shared cores what is measured is the server (a
 * `fetch` per request costs several times more, and every peer would pay for it alike).
 *
 * It reads what the servers compared send: `Content-Length` bodies and chunked ones; it sends no
 * `Accept-Encoding`, so no server compresses its answer.
 *
 * @module
 */

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const CRLF_CRLF = [13, 10, 13, 10] as const;

/** A request prepared once and sent many times. */
export interface PreparedRequest {
  /** The request line and headers, ending with the blank line, and the body when it is small. */
  readonly head: Uint8Array;
  /** The body, when it is large (else it is in `head`, so a request is one write). */
  readonly body: Uint8Array;
}

/** Bodies up to this size go out in one write with their headers. */
const ONE_WRITE_BYTES = 256 * 1024;

/**
 * Prepares a `POST` of a JSON body.
 *
 * @param host The `Host` header's value.
 * @param path The request target.
 * @param body The JSON text.
 * @returns The request.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { jsonPost } from "./http1.ts";
 *
 * const request = jsonPost("127.0.0.1:8000", "/predict", '{"x":[1]}');
 * assert.match(new TextDecoder().decode(request.head), /^POST \/predict HTTP\/1\.1\r\n/);
 * assert.match(new TextDecoder().decode(request.head), /Content-Length: 9\r\n\r\n\{"x":\[1\]\}$/);
 * ```
 */
export function jsonPost(host: string, path: string, body: string): PreparedRequest {
  const bytes = encoder.encode(body);
  const head = encoder.encode(
    `POST ${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${bytes.length}\r\n\r\n`,
  );
  if (bytes.length > ONE_WRITE_BYTES) return { head, body: bytes };
  const whole = new Uint8Array(head.length + bytes.length);
  whole.set(head, 0);
  whole.set(bytes, head.length);
  return { head: whole, body: new Uint8Array(0) };
}

/** A response: its status and whole body. */
export interface Response1 {
  /** The status code. */
  readonly status: number;
  /** The body, de-chunked. */
  readonly body: Uint8Array;
}

function indexOfCrlfCrlf(buffer: Uint8Array, from: number, end: number): number {
  for (let i = Math.max(from, 0); i + 3 < end; i++) {
    if (
      buffer[i] === CRLF_CRLF[0] && buffer[i + 1] === CRLF_CRLF[1] &&
      buffer[i + 2] === CRLF_CRLF[2] && buffer[i + 3] === CRLF_CRLF[3]
    ) return i;
  }
  return -1;
}

/** One keep-alive HTTP/1.1 connection. */
export class Http1Connection implements Disposable {
  #conn: Deno.TcpConn;
  #buffer = new Uint8Array(64 * 1024);
  /** Bytes of `#buffer` read but not yet used: `[#start, #end)`. */
  #start = 0;
  #end = 0;
  #closed = false;

  private constructor(conn: Deno.TcpConn) {
    this.#conn = conn;
  }

  /**
   * Connects to a server on this machine.
   *
   * @param hostname The address.
   * @param port The port.
   * @returns The connection.
   */
  static async open(hostname: string, port: number): Promise<Http1Connection> {
    const conn = await Deno.connect({ hostname, port });
    conn.setNoDelay(true);
    return new Http1Connection(conn);
  }

  /** Whether the server closed the connection (or it failed); it cannot be used again. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Sends a request and reads its whole response.
   *
   * @param request The request.
   * @returns The response.
   * @throws {Error} When the connection fails or the response is not HTTP/1.1 as expected.
   */
  async send(request: PreparedRequest): Promise<Response1> {
    try {
      await this.#writeAll(request.head);
      if (request.body.length > 0) await this.#writeAll(request.body);
      return await this.#readResponse();
    } catch (error) {
      this.close();
      throw error;
    }
  }

  async #writeAll(bytes: Uint8Array): Promise<void> {
    for (let written = 0; written < bytes.length;) {
      written += await this.#conn.write(bytes.subarray(written));
    }
  }

  /** Reads more bytes into the buffer, growing or compacting it; false at the end. */
  async #fill(): Promise<boolean> {
    if (this.#end === this.#buffer.length) {
      const used = this.#end - this.#start;
      if (this.#start > 0 && used * 2 <= this.#buffer.length) {
        this.#buffer.copyWithin(0, this.#start, this.#end);
      } else {
        const next = new Uint8Array(this.#buffer.length * 2);
        next.set(this.#buffer.subarray(this.#start, this.#end), 0);
        this.#buffer = next;
      }
      this.#start = 0;
      this.#end = used;
    }
    const n = await this.#conn.read(this.#buffer.subarray(this.#end));
    if (n === null) return false;
    this.#end += n;
    return true;
  }

  /** Takes `length` bytes from the buffer, reading until they are there. */
  async #take(length: number): Promise<Uint8Array> {
    if (length > this.#buffer.length) {
      // A large body: read straight into a buffer of its own.
      const out = new Uint8Array(length);
      const have = this.#end - this.#start;
      out.set(this.#buffer.subarray(this.#start, this.#end), 0);
      this.#start = this.#end = 0;
      for (let at = have; at < length;) {
        const n = await this.#conn.read(out.subarray(at));
        if (n === null) throw new Error("The server closed the connection inside a body");
        at += n;
      }
      return out;
    }
    while (this.#end - this.#start < length) {
      if (!await this.#fill()) throw new Error("The server closed the connection inside a body");
    }
    const out = this.#buffer.slice(this.#start, this.#start + length);
    this.#start += length;
    return out;
  }

  /** Reads up to and including the next CRLF; returns the line without it. */
  async #line(): Promise<string> {
    for (let from = this.#start;;) {
      for (let i = from; i + 1 < this.#end; i++) {
        if (this.#buffer[i] === 13 && this.#buffer[i + 1] === 10) {
          const line = decoder.decode(this.#buffer.subarray(this.#start, i));
          this.#start = i + 2;
          return line;
        }
      }
      from = Math.max(this.#start, this.#end - 1);
      const offset = this.#start;
      if (!await this.#fill()) throw new Error("The server closed the connection inside a chunk");
      from -= offset - this.#start;
    }
  }

  async #readResponse(): Promise<Response1> {
    let headEnd = indexOfCrlfCrlf(this.#buffer, this.#start, this.#end);
    while (headEnd < 0) {
      let from = Math.max(this.#start, this.#end - 3);
      const before = this.#start;
      if (!await this.#fill()) throw new Error("The server closed the connection");
      from -= before - this.#start;
      headEnd = indexOfCrlfCrlf(this.#buffer, from, this.#end);
    }
    const head = decoder.decode(this.#buffer.subarray(this.#start, headEnd));
    this.#start = headEnd + 4;
    const lines = head.split("\r\n");
    const status = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "");
    if (status === null) throw new Error(`Not an HTTP/1.1 status line: ${lines[0]}`);
    let length: number | undefined;
    let chunked = false;
    let close = false;
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim().toLowerCase();
      if (name === "content-length") length = Number(value);
      else if (name === "transfer-encoding") chunked = value.includes("chunked");
      else if (name === "connection") close = value.includes("close");
    }
    let body: Uint8Array;
    if (chunked) {
      const parts: Uint8Array[] = [];
      for (;;) {
        const size = parseInt((await this.#line()).split(";")[0]!, 16);
        if (Number.isNaN(size)) throw new Error("Bad chunk size");
        if (size === 0) {
          while ((await this.#line()) !== ""); // trailers
          break;
        }
        parts.push(await this.#take(size));
        await this.#take(2);
      }
      body = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
      let at = 0;
      for (const part of parts) {
        body.set(part, at);
        at += part.length;
      }
    } else if (length !== undefined) {
      body = await this.#take(length);
    } else {
      throw new Error("A response with neither Content-Length nor chunked encoding");
    }
    if (this.#start === this.#end) this.#start = this.#end = 0;
    if (close) this.close();
    return { status: Number(status[1]), body };
  }

  /** Closes the connection. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#conn.close();
    } catch {
      // Closed already.
    }
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
