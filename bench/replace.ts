/**
 * Live model replacement under load: clients loop on a model (HTTP and gRPC, with `ModelClient`)
 * while it is swapped for a new one every `--every-ms`, and the script prints how many requests
 * failed, per protocol, and how many swaps each client saw.
 *
 *     deno run -A bench/replace.ts [--engine builtin|triton] [--mode replace|unbind]
 *       [--swaps 20] [--every-ms 100] [--clients 4] [--delay-ms 0]
 *
 * `--mode replace` swaps with `triton.replace()`; `--mode unbind` with `unbind()` then `bind()`
 * (the only way before `replace()`, and a gap by design: the model is unbound in between).
 * Clients alternate HTTP and gRPC. The server and the clients share this process. With
 * `--delay-ms`, each batch waits that long, so requests are in flight at every swap.
 *
 * @module
 */

import { type BindOptions, ndarray, Triton } from "../mod.ts";
import { ModelClient } from "../src/client/mod.ts";
import { flag } from "./args.ts";

const engine = flag("engine", "builtin") as "builtin" | "triton";
const mode = flag("mode", "replace");
const swaps = Number(flag("swaps", "20"));
const everyMs = Number(flag("every-ms", "100"));
const clients = Number(flag("clients", "4"));
const delayMs = Number(flag("delay-ms", "0"));
if (mode !== "replace" && mode !== "unbind") throw new Error(`--mode: replace or unbind`);

/** `Scale`: y = factor * x, version `version`. */
function scale(factor: number, version: number): BindOptions {
  return {
    modelName: "Scale",
    modelVersion: version,
    inferFunc: async (requests) => {
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      return requests.map(({ data: { x } }) => ({
        y: ndarray((x!.data as Float32Array).map((v) => v * factor), x!.shape),
      }));
    },
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
    config: { maxBatchSize: 8 },
  };
}

await using triton = new Triton({
  engine,
  config: {
    httpAddress: "127.0.0.1",
    httpPort: 0,
    grpcAddress: "127.0.0.1",
    grpcPort: 0,
    allowMetrics: false,
  },
});
await triton.bind(scale(1, 1));
await triton.run();

interface Tally {
  ok: number;
  failed: number;
  errors: Map<string, number>;
  factors: Set<number>;
}

let swapping = true;
async function loop(url: string): Promise<Tally> {
  const tally: Tally = { ok: 0, failed: 0, errors: new Map(), factors: new Set() };
  await using client = new ModelClient(url, "Scale", { initTimeoutS: 30 });
  const x = ndarray(new Float32Array([1]), [1, 1]);
  while (swapping) {
    try {
      const { y } = await client.inferBatch({ x });
      tally.ok++;
      tally.factors.add((y!.data as Float32Array)[0]!);
    } catch (error) {
      tally.failed++;
      const message = error instanceof Error ? error.message : String(error);
      tally.errors.set(message, (tally.errors.get(message) ?? 0) + 1);
    }
  }
  return tally;
}

const urls = Array.from(
  { length: clients },
  (_, i) => i % 2 === 0 ? triton.urls.http! : triton.urls.grpc!,
);
const loops = urls.map(loop);
let version = 1;
for (let swap = 1; swap <= swaps; swap++) {
  await new Promise((resolve) => setTimeout(resolve, everyMs));
  // Every other swap brings a new version; the others replace the version that serves.
  if (swap % 2 === 1) version++;
  const next = scale(swap + 1, version);
  if (mode === "replace") {
    await triton.replace(next);
  } else {
    await triton.unbind("Scale");
    await triton.bind(next);
  }
}
await new Promise((resolve) => setTimeout(resolve, everyMs));
swapping = false;
const tallies = await Promise.all(loops);

const byProtocol = new Map<string, { ok: number; failed: number }>();
const errors = new Map<string, number>();
tallies.forEach((tally, i) => {
  const protocol = urls[i]!.startsWith("http") ? "HTTP" : "gRPC";
  const sum = byProtocol.get(protocol) ?? { ok: 0, failed: 0 };
  sum.ok += tally.ok;
  sum.failed += tally.failed;
  byProtocol.set(protocol, sum);
  for (const [message, count] of tally.errors) {
    errors.set(message, (errors.get(message) ?? 0) + count);
  }
});
console.log(
  `engine=${engine} mode=${mode} swaps=${swaps} every=${everyMs}ms clients=${clients} delay=${delayMs}ms`,
);
for (const [protocol, { ok, failed }] of byProtocol) {
  console.log(`  ${protocol}: ${failed} failed of ${ok + failed}`);
}
console.log(`  factors seen per client: ${tallies.map((t) => t.factors.size).join(", ")}`);
for (const [message, count] of errors) console.log(`  ${count} x ${message}`);
