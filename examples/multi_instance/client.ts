/**
 * Sends eight concurrent requests to Linear and reports which instances answered.
 *
 *     deno run -A examples/multi_instance/client.ts [url]
 *
 * @module
 */

import { ModelClient } from "../../src/client/mod.ts";
import { asDType, ndarray } from "../../mod.ts";

/** What the client saw. */
export interface LinearAnswers {
  /** `y` of each request, in order. */
  ys: number[][];
  /** The instance labels (`device#index`) that answered, sorted, without repeats. */
  devices: string[];
}

/**
 * Sends `x = [i, i, i, i]` for i = 0..7 concurrently.
 *
 * @param url Server URL (`http://...` or `grpc://...`).
 * @returns The outputs and the instances that answered.
 */
export async function runClient(url: string): Promise<LinearAnswers> {
  const clients = Array.from(
    { length: 8 },
    () => new ModelClient(url, "Linear", { initTimeoutS: 30 }),
  );
  try {
    const outputs = await Promise.all(
      clients.map((client, i) =>
        client.inferSample({ x: ndarray(new Float32Array([i, i, i, i])) })
      ),
    );
    const decoder = new TextDecoder();
    return {
      ys: outputs.map((out) => Array.from(asDType(out.y, "float32").data)),
      devices: [
        ...new Set(outputs.map((out) => decoder.decode(asDType(out.device, "bytes").data[0]))),
      ].sort(),
    };
  } finally {
    await Promise.all(clients.map((client) => client.close()));
  }
}

if (import.meta.main) {
  const { ys, devices } = await runClient(Deno.args[0] ?? "http://127.0.0.1:8000");
  console.log("y:", ys);
  console.log("answered by:", devices);
}
