/**
 * Sends float64 values and bytes (with an embedded NUL) to Identity and gets them back.
 *
 *     deno run -A examples/identity/client.ts [url]
 *
 * @module
 */

import { ModelClient } from "../../src/client/mod.ts";
import { type NDArray, ndarray } from "../../mod.ts";

/**
 * Sends one sample and returns the outputs.
 *
 * @param url Server URL.
 * @returns The echoed tensors.
 */
export async function runClient(url: string): Promise<Record<string, NDArray>> {
  await using client = new ModelClient(url, "Identity", { initTimeoutS: 30 });
  return await client.inferSample({
    values: ndarray(new Float64Array([0.5, -1.25, 1e300])),
    texts: ndarray(["hello", "nul\0inside", ""]),
  });
}

if (import.meta.main) {
  const outputs = await runClient(Deno.args[0] ?? "http://127.0.0.1:8000");
  console.log("values", Array.from(outputs.values!.data as Float64Array));
  console.log(
    "texts",
    (outputs.texts!.data as Uint8Array[]).map((b) => new TextDecoder().decode(b)),
  );
}
