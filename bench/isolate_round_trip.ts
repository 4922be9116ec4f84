/**
 * What one crossing between two isolates costs (issue 38): the main isolate and a Worker pass a
 * message back and forth, one at a time, so that the receiver is asleep each time one arrives, as
 * the HTTP threads' inference requests and answers find the other side at moderate load. Prints
 * the CPU (this process, all threads, `/proc`) and wall time per round trip for:
 *
 * - `post small`: `postMessage` of `{ type, id }`;
 * - `post infer`: `postMessage` of an add_sub request as the HTTP threads send it (two FP32 [1, 8]
 *   inputs in one moved buffer) and back of its answer (two outputs, copied);
 * - `atomics`: no message, only a wake: a counter in a `SharedArrayBuffer` that each side
 *   `Atomics.notify`s and the other awaits with `Atomics.waitAsync`;
 * - `ring infer`: the same request and answer as records on a pair of rings, as the HTTP threads
 *   now send them (`src/frontend/http/thread_lane.ts` over `src/isolate/ring.ts`).
 *
 * The difference between `post infer` and `atomics` is what the messages themselves cost (the
 * structured clone, the event dispatch); `atomics` is the wake alone, which no message format
 * avoids.
 *
 *     deno run -A bench/isolate_round_trip.ts [--round-trips 20000] [--rounds 3]
 *
 * @module
 */

import { flag } from "./args.ts";
import { cpuSeconds } from "./process.ts";
import { ringBuffer, RingReader, RingWriter } from "../src/isolate/ring.ts";
import { writeInferRequest } from "../src/frontend/http/thread_lane.ts";
import { ndarray } from "../src/tensor/ndarray.ts";

/** What the main isolate asks the Worker to do. */
type Mode = "post small" | "post infer" | "atomics" | "ring infer";

const LANE = new URL("../src/frontend/http/thread_lane.ts", import.meta.url).href;
const RING = new URL("../src/isolate/ring.ts", import.meta.url).href;

const ROUND_TRIPS = Number(flag("round-trips", "20000"));
const ROUNDS = Number(flag("rounds", "3"));

function inferMessage(id: number): { message: unknown; transfer: Transferable[] } {
  const body = new ArrayBuffer(64);
  const tensor = (byteOffset: number) => ({
    dtype: "FP32",
    shape: [1, 8],
    buffer: body,
    byteOffset,
    byteLength: 32,
  });
  return {
    message: {
      type: "infer",
      id,
      model: { modelName: "add_sub" },
      request: { inputs: [["a", tensor(0)], ["b", tensor(32)]], parameters: {} },
    },
    transfer: [body],
  };
}

/** The Worker's side: answers each message, or each notify, until terminated. */
function workerSide(): void {
  // Inside: only this function's source reaches the Worker.
  function answerMessage(id: number): unknown {
    const output = () => ({
      dtype: "FP32",
      shape: [1, 8],
      buffer: new ArrayBuffer(32),
      byteOffset: 0,
      byteLength: 32,
    });
    return {
      type: "inferred",
      id,
      response: {
        modelName: "add_sub",
        modelVersion: "1",
        outputs: [["add", output()], ["sub", output()]],
      },
      batching: true,
    };
  }

  const self = globalThis as unknown as {
    onmessage: (event: MessageEvent) => void;
    postMessage: (message: unknown) => void;
  };
  self.onmessage = (event) => {
    const data = event.data as {
      type: string;
      id?: number;
      flags?: SharedArrayBuffer;
      lanes?: {
        toWorker: SharedArrayBuffer;
        toMain: SharedArrayBuffer;
        lane: string;
        ring: string;
      };
    };
    if (data.type === "ring") {
      const { toWorker, toMain, lane, ring } = data.lanes!;
      void (async () => {
        const lanes = await import(lane);
        const rings = await import(ring);
        const writer = new rings.RingWriter(toMain);
        const output = () => ({ dtype: "float32", shape: [1, 8], data: new Float32Array(8) });
        // Loaded: the measure starts now.
        self.postMessage({ type: "ring" });
        await new rings.RingReader(toWorker).pump((_kind: number, payload: Uint8Array) => {
          const { id } = lanes.readInferRequest(payload, new AbortController().signal);
          lanes.writeInferResponse(writer, id, {
            modelName: "add_sub",
            modelVersion: "1",
            outputs: new Map([["add", output()], ["sub", output()]]),
          }, true);
        }, () => {});
      })();
    } else if (data.type === "atomics") {
      const flags = new Int32Array(data.flags!);
      void (async () => {
        for (let seen = 0;;) {
          const wait = Atomics.waitAsync(flags, 0, seen);
          if (wait.async) await wait.value;
          seen = Atomics.load(flags, 0);
          Atomics.store(flags, 1, seen);
          Atomics.notify(flags, 1);
        }
      })();
    } else if (data.type === "small") {
      self.postMessage({ type: "small", id: data.id });
    } else {
      self.postMessage(answerMessage(data.id!));
    }
  };
}

async function measure(mode: Mode): Promise<{ cpuUs: number; wallUs: number }> {
  const source = `(${workerSide.toString()})();`;
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  const worker = new Worker(url, { type: "module" });
  try {
    // A first exchange starts the Worker before anything is measured.
    await new Promise<void>((resolve) => {
      worker.onmessage = () => resolve();
      worker.postMessage({ type: "small", id: 0 });
    });
    let ring: { writer: RingWriter; reader: RingReader } | undefined;
    if (mode === "ring infer") {
      const toWorker = ringBuffer(256 * 1024);
      const toMain = ringBuffer(256 * 1024);
      // The Worker's modules load before anything is measured.
      await new Promise<void>((resolve) => {
        worker.onmessage = () => resolve();
        worker.postMessage({ type: "ring", lanes: { toWorker, toMain, lane: LANE, ring: RING } });
      });
      const writer = new RingWriter(toWorker);
      const reader = new RingReader(toMain);
      ring = { writer, reader };
    }
    const cpuBefore = cpuSeconds("/proc/self/stat");
    const start = performance.now();
    if (ring !== undefined) {
      const { writer, reader } = ring;
      const inputs = new Map([
        ["a", ndarray(new Float32Array(8), [1, 8])],
        ["b", ndarray(new Float32Array(8), [1, 8])],
      ]);
      let id = 0;
      const send = (): void => {
        id++;
        writeInferRequest(writer, id, { modelName: "add_sub" }, {
          modelName: "add_sub",
          parameters: {},
          inputs,
        });
      };
      await new Promise<void>((resolve) => {
        void reader.pump(() => {
          if (id === ROUND_TRIPS) {
            reader.close();
            resolve();
          } else send();
        }, () => {});
        send();
      });
    } else if (mode === "atomics") {
      const flags = new Int32Array(new SharedArrayBuffer(8));
      worker.postMessage({ type: "atomics", flags: flags.buffer });
      for (let i = 1; i <= ROUND_TRIPS; i++) {
        Atomics.store(flags, 0, i);
        Atomics.notify(flags, 0);
        const wait = Atomics.waitAsync(flags, 1, i - 1);
        if (wait.async) await wait.value;
      }
    } else {
      await new Promise<void>((resolve) => {
        let id = 0;
        const send = (): void => {
          id++;
          if (mode === "post small") worker.postMessage({ type: "small", id });
          else {
            const { message, transfer } = inferMessage(id);
            worker.postMessage(message, transfer);
          }
        };
        worker.onmessage = () => id === ROUND_TRIPS ? resolve() : send();
        send();
      });
    }
    const wallUs = (performance.now() - start) * 1000 / ROUND_TRIPS;
    const cpuUs = (cpuSeconds("/proc/self/stat") - cpuBefore) * 1e6 / ROUND_TRIPS;
    return { cpuUs, wallUs };
  } finally {
    worker.terminate();
    URL.revokeObjectURL(url);
  }
}

if (import.meta.main) {
  const modes: Mode[] = ["post small", "post infer", "atomics", "ring infer"];
  console.log(
    `Round trips between the main isolate and a Worker (Deno ${Deno.version.deno}, ` +
      `${navigator.hardwareConcurrency} CPUs; ${ROUND_TRIPS} round trips, ${ROUNDS} rounds, ` +
      "median by CPU):",
  );
  for (const mode of modes) {
    const results = [];
    for (let round = 0; round < ROUNDS; round++) results.push(await measure(mode));
    results.sort((a, b) => a.cpuUs - b.cpuUs);
    const median = results[Math.floor(results.length / 2)]!;
    console.log(
      `  ${mode.padEnd(10)} ${median.cpuUs.toFixed(1)} µs CPU, ${
        median.wallUs.toFixed(1)
      } µs wall per round trip (CPU of the rounds: ${
        results.map((r) => r.cpuUs.toFixed(1)).join(", ")
      })`,
    );
  }
}
