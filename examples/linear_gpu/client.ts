/**
 * Sends batches of random inputs to LinearGpu and checks the answers against the same layer
 * computed here on the CPU.
 *
 *     deno run -A examples/linear_gpu/client.ts [url]
 *
 * @module
 */

import { ModelClient } from "../../src/client/mod.ts";
import { asDType, ndarray } from "../../mod.ts";
import { IN_FEATURES, linearCpu, linearWeights } from "./linear.ts";

/** What the client saw. */
export interface LinearGpuAnswers {
  /** The largest absolute difference from the CPU reference. */
  maxError: number;
  /** Where the answers were computed (`cuda:0 cuBLAS`, `cuda:0 CPU`), sorted, without repeats. */
  devices: string[];
  /** How many samples were checked. */
  samples: number;
}

/**
 * Sends `batches` concurrent batches of `rows` samples.
 *
 * @param url Server URL (`http://...` or `grpc://...`).
 * @param batches How many batches.
 * @param rows Samples per batch.
 * @returns The error against the CPU reference, and where the answers were computed.
 */
export async function runClient(url: string, batches = 8, rows = 16): Promise<LinearGpuAnswers> {
  const layer = linearWeights();
  const clients = Array.from(
    { length: batches },
    () => new ModelClient(url, "LinearGpu", { initTimeoutS: 30 }),
  );
  try {
    const inputs = clients.map((_, b) =>
      Float32Array.from({ length: rows * IN_FEATURES }, (_, i) => Math.sin(b * 1000 + i))
    );
    const outputs = await Promise.all(
      clients.map((client, b) =>
        client.inferBatch({ x: ndarray(inputs[b]!, [rows, IN_FEATURES]) })
      ),
    );
    let maxError = 0;
    const devices = new Set<string>();
    const decoder = new TextDecoder();
    outputs.forEach((output, b) => {
      const expected = linearCpu(layer, inputs[b]!, rows);
      const y = asDType(output.y, "float32").data;
      if (y.length !== expected.length) {
        throw new Error(`y has ${y.length} values, not ${expected.length}`);
      }
      for (let i = 0; i < y.length; i++) {
        maxError = Math.max(maxError, Math.abs(y[i]! - expected[i]!));
      }
      for (const label of asDType(output.device, "bytes").data) devices.add(decoder.decode(label));
    });
    return { maxError, devices: [...devices].sort(), samples: batches * rows };
  } finally {
    await Promise.all(clients.map((client) => client.close()));
  }
}

if (import.meta.main) {
  const { maxError, devices, samples } = await runClient(Deno.args[0] ?? "http://127.0.0.1:8000");
  console.log(`${samples} samples, computed on: ${devices.join(", ")}`);
  console.log(`largest difference from the CPU reference: ${maxError}`);
}
