// A slow gRPC client must slow a decoupled model's generator down, not grow the server's memory:
// the server (tests/_flood_server.ts, its own process) streams 100k steps of 1 KiB to a client
// that stalls, then reads slowly, while the test samples the server's resident memory. A
// memory assertion, not a time one; a watchdog fails the test instead of letting it hang.
//
// The client is `fetch` over cleartext HTTP/2: unlike grpc-js on Deno, it stops granting HTTP/2
// flow-control window while its body is not read, so the server really sees a slow reader.

import assert from "node:assert/strict";
import { codecs, type ModelStreamInferResponse } from "../src/protocol/grpc_codec.ts";
import { ENGINES } from "./_helpers.ts";

const STEPS = 100_000;
const STEP_BYTES = 1024;
const WATCHDOG_MS = 60_000;
const STALL_MS = 3_000;

function rssBytes(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kb = Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1]);
  assert.ok(Number.isFinite(kb), "VmRSS is readable");
  return kb * 1024;
}

function mib(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** One `ModelStreamInfer` request for `Flood`, framed for the gRPC wire. */
function floodRequest(steps: number, size: number): Uint8Array<ArrayBuffer> {
  const int32 = (value: number): Uint8Array => new Uint8Array(new Int32Array([value]).buffer);
  const message = codecs.ModelInferRequest.encode({
    model_name: "Flood",
    inputs: [
      { name: "n", datatype: "INT32", shape: [1] },
      { name: "size", datatype: "INT32", shape: [1] },
    ],
    raw_input_contents: [int32(steps), int32(size)],
  });
  const frame = new Uint8Array(5 + message.byteLength);
  new DataView(frame.buffer).setUint32(1, message.byteLength);
  frame.set(message, 5);
  return frame;
}

interface StreamResult {
  messages: number;
  bytes: number;
}

/**
 * Streams `steps` responses of `size` bytes, reading nothing for `stallMs`, then pausing 5 ms
 * after every 256 KiB; checks every response.
 */
async function slowStream(
  url: string,
  client: Deno.HttpClient,
  { steps, size, stallMs }: { steps: number; size: number; stallMs: number },
  signal: AbortSignal,
  onProgress: () => void,
): Promise<StreamResult> {
  const response = await fetch(`${url}/inference.GRPCInferenceService/ModelStreamInfer`, {
    method: "POST",
    headers: { "content-type": "application/grpc", te: "trailers" },
    body: floodRequest(steps, size),
    client,
    signal,
  });
  assert.equal(response.status, 200);
  await sleep(stallMs);
  const reader = response.body!.getReader();
  let buffer = new Uint8Array(0);
  let messages = 0;
  let bytes = 0;
  let sincePause = 0;
  while (true) {
    const { done, value } = await reader.read();
    if (done) break;
    onProgress();
    bytes += value.byteLength;
    sincePause += value.byteLength;
    const joined = new Uint8Array(buffer.byteLength + value.byteLength);
    joined.set(buffer);
    joined.set(value, buffer.byteLength);
    let offset = 0;
    while (joined.byteLength - offset >= 5) {
      const length = new DataView(joined.buffer, offset + 1, 4).getUint32(0);
      if (joined.byteLength - offset - 5 < length) break;
      const message: ModelStreamInferResponse = codecs.ModelStreamInferResponse.decode(
        joined.subarray(offset + 5, offset + 5 + length),
      );
      assert.equal(message.error_message ?? "", "");
      const chunk = message.infer_response?.raw_output_contents?.[0];
      assert.equal(chunk?.byteLength, size);
      assert.equal(chunk[0], messages & 0xff);
      messages++;
      offset += 5 + length;
    }
    buffer = joined.slice(offset);
    if (sincePause >= 256 * 1024) {
      sincePause = 0;
      await sleep(5);
    }
  }
  assert.equal(buffer.byteLength, 0, "no partial message at the end");
  return { messages, bytes };
}

for (const engine of ENGINES) {
  for (const instances of ["main", "workers"] as const) {
    Deno.test({
      name:
        `A slow gRPC stream client slows the generator instead of growing server memory [${engine}, ${instances}]`,
      ignore: Deno.build.os !== "linux",
      async fn(): Promise<void> {
        const server = new Deno.Command(Deno.execPath(), {
          args: [
            "run",
            "-A",
            // A young generation that grows under allocation (to 16 MiB semi-spaces, per
            // isolate) took ~13 MiB at once mid-stream: capped, resident memory shows what the
            // server holds.
            "--v8-flags=--expose-gc,--max-semi-space-size=1",
            new URL("./_flood_server.ts", import.meta.url).pathname,
            engine,
            instances,
          ],
          stdout: "piped",
          stderr: "inherit",
        }).spawn();
        // A hang is no progress for WATCHDOG_MS (no line from the server, no bytes to the client):
        // on a loaded host the whole run takes minutes, and only a stop in progress is a failure.
        const watchdog = new AbortController();
        let lastProgress = performance.now();
        const moved = (): void => {
          lastProgress = performance.now();
        };
        const timer = setInterval(() => {
          if (performance.now() - lastProgress > WATCHDOG_MS) {
            watchdog.abort(new Error(`Watchdog: no progress for ${WATCHDOG_MS / 1000} s`));
          }
        }, 1000);
        const client = Deno.createHttpClient({ http1: false, http2: true });
        const lines = server.stdout.pipeThrough(new TextDecoderStream()).getReader();
        let pending = "";
        let produced = 0;
        const readLine = async (): Promise<string> => {
          while (!pending.includes("\n")) {
            const { done, value } = await lines.read();
            if (done) throw new Error("The flood server exited");
            moved();
            pending += value;
          }
          const line = pending.slice(0, pending.indexOf("\n"));
          pending = pending.slice(line.length + 1);
          return line;
        };
        try {
          const { grpc } = JSON.parse(await readLine()) as { grpc: string };
          const url = grpc.replace(/^grpc:/, "http:");
          // The producer's progress, as the server reports it.
          const progress = (async () => {
            while (true) {
              const line = await readLine().catch(() => "");
              if (line === "") return;
              produced = Number(line.split(" ")[1]);
            }
          })();
          // A first stream at full speed warms up codecs and buffers, and fills the per-response-
          // index statistics (Triton's response_stats, one entry per index, kept for the model's
          // life), so that the baseline holds what any stream of this length needs.
          const warm = await slowStream(
            url,
            client,
            { steps: STEPS, size: 1, stallMs: 0 },
            watchdog.signal,
            moved,
          );
          assert.equal(warm.messages, STEPS);
          await sleep(500);
          const baseline = rssBytes(server.pid);
          let peak = baseline;
          const samples: string[] = [];
          const started = performance.now();
          const sampler = setInterval(() => {
            const rss = rssBytes(server.pid);
            peak = Math.max(peak, rss);
            samples.push(
              `${((performance.now() - started) / 1000).toFixed(1)}s ${mib(rss)} ${produced}`,
            );
          }, 250);
          let result: StreamResult;
          try {
            result = await slowStream(
              url,
              client,
              { steps: STEPS, size: STEP_BYTES, stallMs: STALL_MS },
              watchdog.signal,
              moved,
            );
          } finally {
            clearInterval(sampler);
            console.log(
              `server RSS baseline ${mib(baseline)}, peak ${mib(peak)} (growth ${
                mib(peak - baseline)
              }); samples (time, RSS, steps produced):\n  ${samples.join("\n  ")}`,
            );
          }
          const growth = peak - baseline;
          console.log(`streamed ${mib(result.bytes)} in ${result.messages} messages`);
          assert.equal(result.messages, STEPS);
          assert.ok(result.bytes > STEPS * STEP_BYTES);
          // Without backpressure the server held the whole stream at once: it grew by ~130 MiB
          // for these 104 MiB. With it, a flow-control window, the queue bounds and garbage not yet
          // collected: 5-20 MiB here, on a loaded 2-core machine, once 53.6 MiB (fresh-clone CI,
          // 2026-11-27, before V8's young generation was capped and the Worker collected too), so
          // the bound is half the stream.
          assert.ok(
            growth < result.bytes / 2,
            `Server RSS grew by ${mib(growth)} while streaming ${mib(result.bytes)}`,
          );
          void progress;
        } finally {
          clearInterval(timer);
          client.close();
          // The server holds nothing worth a clean stop, and a flooded one may take long to stop.
          server.kill("SIGKILL");
          await server.status;
          await lines.cancel().catch(() => {});
        }
      },
    });
  }
}
