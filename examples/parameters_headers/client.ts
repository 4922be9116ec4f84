/**
 * Sends `a = 2, b = 1` with parameter `multiplier = 4` and header `header_divisor: 4`.
 *
 *     deno run -A examples/parameters_headers/client.ts [url]
 *
 * @module
 */

import { ModelClient } from "../../src/client/mod.ts";
import { asDType, ndarray } from "../../mod.ts";

/**
 * Returns `[scaled_add, scaled_sub]`; expected `[3, 1]`.
 *
 * @param url Server URL.
 * @returns The two scaled values.
 */
export async function runClient(url: string): Promise<[number, number]> {
  await using client = new ModelClient(url, "ParamsAndHeaders", { initTimeoutS: 30 });
  const out = await client.inferSample(
    { a: ndarray(new Float32Array([2])), b: ndarray(new Float32Array([1])) },
    { parameters: { multiplier: 4 }, headers: { header_divisor: "4" } },
  );
  const [scaledAdd = NaN] = asDType(out.scaled_add, "float32").data;
  const [scaledSub = NaN] = asDType(out.scaled_sub, "float32").data;
  return [scaledAdd, scaledSub];
}

if (import.meta.main) {
  console.log(await runClient(Deno.args[0] ?? "http://127.0.0.1:8000"));
}
