/**
 * Sends 1 to Multiply2 and Multiply4.
 *
 *     deno run -A examples/multiple_models/client.ts [url]
 *
 * @module
 */

import { ModelClient } from "../../src/client/mod.ts";
import { asDType, ndarray } from "../../mod.ts";

/**
 * Returns the product from each model for the input 1.
 *
 * @param url Server URL.
 * @returns `{ Multiply2, Multiply4 }` results.
 */
export async function runClient(url: string): Promise<Record<string, number>> {
  const results: Record<string, number> = {};
  for (const model of ["Multiply2", "Multiply4"]) {
    await using client = new ModelClient(url, model, { initTimeoutS: 30 });
    const out = await client.inferSample({ x: ndarray(new Float32Array([1])) });
    const [y = NaN] = asDType(out.y, "float32").data;
    results[model] = y;
  }
  return results;
}

if (import.meta.main) {
  console.log(await runClient(Deno.args[0] ?? "http://127.0.0.1:8000"));
}
