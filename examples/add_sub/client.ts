/**
 * Calls AddSub with a batch of two samples.
 *
 *     deno run -A examples/add_sub/client.ts [url]
 *
 * @module
 */

import { ModelClient } from "../../src/client/mod.ts";
import { asDType, ndarray, type Tensors } from "../../mod.ts";

/**
 * Sends `a = [[1,1],[2,2]]`, `b = [[1,1],[1,1]]` and returns the outputs.
 *
 * @param url Server URL (`http://...` or `grpc://...`).
 * @returns The `add` and `sub` tensors.
 */
export async function runClient(url: string): Promise<Tensors> {
  await using client = new ModelClient(url, "AddSub", { initTimeoutS: 30 });
  return await client.inferBatch({
    a: ndarray(new Float32Array([1, 1, 2, 2]), [2, 2]),
    b: ndarray(new Float32Array([1, 1, 1, 1]), [2, 2]),
  });
}

if (import.meta.main) {
  const outputs = await runClient(Deno.args[0] ?? "http://127.0.0.1:8000");
  for (const [name, tensor] of Object.entries(outputs)) {
    console.log(name, tensor.shape, Array.from(asDType(tensor, "float32").data));
  }
}
