/**
 * Sends float64 values and bytes (with an embedded NUL) to Identity and gets them back.
 *
 *     deno run -A examples/identity/client.ts [url]
 *
 * @module
 */

import { ModelClient } from "../../src/client/mod.ts";
import { asDType, ndarray, type Tensors } from "../../mod.ts";

/**
 * Sends one sample and returns the outputs.
 *
 * @param url Server URL.
 * @returns The echoed tensors.
 */
export async function runClient(url: string): Promise<Tensors> {
  await using client = new ModelClient(url, "Identity", { initTimeoutS: 30 });
  return await client.inferSample({
    values: ndarray(new Float64Array([0.5, -1.25, 1e300])),
    texts: ndarray(["hello", "nul\0inside", ""]),
  });
}

if (import.meta.main) {
  const outputs = await runClient(Deno.args[0] ?? "http://127.0.0.1:8000");
  console.log("values", Array.from(asDType(outputs.values, "float64").data));
  const decoder = new TextDecoder();
  console.log("texts", asDType(outputs.texts, "bytes").data.map((b) => decoder.decode(b)));
}
