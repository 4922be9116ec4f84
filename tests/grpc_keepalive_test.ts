// gRPC keepalive (grpcKeepaliveTime, grpcKeepaliveTimeout): a raw HTTP/2 connection sees the
// server's PING frames at the configured interval, and the server drops the connection when a
// ping stays unanswered past the timeout.

import assert from "node:assert/strict";
import { ENGINES, startServer } from "./_helpers.ts";

const PREFACE = new TextEncoder().encode("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const SETTINGS = 0x4;
const PING = 0x6;
const ACK = 0x1;

interface Frame {
  type: number;
  flags: number;
  payload: Uint8Array<ArrayBuffer>;
}

function frame(type: number, flags: number, payload = new Uint8Array(0)): Uint8Array {
  const out = new Uint8Array(9 + payload.byteLength);
  out[0] = payload.byteLength >> 16;
  out[1] = payload.byteLength >> 8;
  out[2] = payload.byteLength;
  out[3] = type;
  out[4] = flags;
  out.set(payload, 9);
  return out;
}

/** A bare HTTP/2 client connection that reads frames one by one. */
class RawHttp2 implements Disposable {
  #conn: Deno.TcpConn;
  #buffer: Uint8Array<ArrayBuffer> = new Uint8Array(0);

  private constructor(conn: Deno.TcpConn) {
    this.#conn = conn;
  }

  static async connect(port: number): Promise<RawHttp2> {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    const client = new RawHttp2(conn);
    await client.write(PREFACE);
    await client.write(frame(SETTINGS, 0));
    return client;
  }

  async write(bytes: Uint8Array): Promise<void> {
    let written = 0;
    while (written < bytes.byteLength) written += await this.#conn.write(bytes.subarray(written));
  }

  async #fill(size: number): Promise<boolean> {
    while (this.#buffer.byteLength < size) {
      const chunk = new Uint8Array(16384);
      const read = await this.#conn.read(chunk);
      if (read === null) return false;
      const joined = new Uint8Array(this.#buffer.byteLength + read);
      joined.set(this.#buffer);
      joined.set(chunk.subarray(0, read), this.#buffer.byteLength);
      this.#buffer = joined;
    }
    return true;
  }

  /** The next frame, or `undefined` once the server closed the connection. */
  async next(): Promise<Frame | undefined> {
    if (!await this.#fill(9)) return undefined;
    const length = (this.#buffer[0]! << 16) | (this.#buffer[1]! << 8) | this.#buffer[2]!;
    if (!await this.#fill(9 + length)) return undefined;
    const result = {
      type: this.#buffer[3]!,
      flags: this.#buffer[4]!,
      payload: this.#buffer.slice(9, 9 + length),
    };
    this.#buffer = this.#buffer.slice(9 + length);
    return result;
  }

  [Symbol.dispose](): void {
    try {
      this.#conn.close();
    } catch {
      // Closed by the server already.
    }
  }
}

/** Fails the test instead of hanging when `promise` takes longer than `ms`. */
async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const watchdog = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Watchdog: ${what} took over ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, watchdog]);
  } finally {
    clearTimeout(timer);
  }
}

for (const engine of ENGINES) {
  Deno.test(`gRPC keepalive: the server pings every grpcKeepaliveTime and drops a silent peer after grpcKeepaliveTimeout [${engine}]`, async () => {
    await using triton = await startServer({
      engine,
      config: { allowHttp: false, grpcKeepaliveTime: 200, grpcKeepaliveTimeout: 300 },
    });
    const port = Number(new URL(triton.urls.grpc!.replace(/^grpc:/, "http:")).port);
    using connection = await RawHttp2.connect(port);
    let pings = 0;
    const closed = (async (): Promise<void> => {
      for (;;) {
        const next = await connection.next();
        if (next === undefined) return;
        if (next.type === SETTINGS && (next.flags & ACK) === 0) {
          await connection.write(frame(SETTINGS, ACK));
        } else if (next.type === PING && (next.flags & ACK) === 0) {
          pings++;
          // Answer the first two pings; the third stays unanswered.
          if (pings <= 2) await connection.write(frame(PING, ACK, next.payload));
        }
      }
    })();
    await within(10_000, "the server closing a connection that stopped answering pings", closed);
    // Two answered pings kept the connection; the third, unanswered, ended it.
    assert.equal(pings, 3);
  });
}
