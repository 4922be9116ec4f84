/**
 * Calls AddSubOptional four ways: without optionals, with `t`, with `w`, with both.
 *
 *     deno run -A examples/add_sub_optionals/client.ts [url]
 *
 * @module
 */

import { ModelClient } from "../../src/client/mod.ts";
import { asDType, ndarray } from "../../mod.ts";

/**
 * Runs the four variants with `a = b = 1` (batch of 2) and returns `[add, sub]` of each.
 *
 * @param url Server URL.
 * @returns `[add, sub]` first elements per variant.
 */
export async function runClient(url: string): Promise<[number, number][]> {
  await using client = new ModelClient(url, "AddSubOptional", { initTimeoutS: 30 });
  const ones = ndarray(new Float32Array([1, 1]), [2, 1]);
  const variants = [
    { a: ones, b: ones },
    { a: ones, b: ones, t: ndarray(new Float32Array([4, 4]), [2, 1]) },
    { a: ones, b: ones, w: ndarray(new Float32Array([3, 3]), [2, 1]) },
    {
      a: ones,
      b: ones,
      t: ndarray(new Float32Array([4, 4]), [2, 1]),
      w: ndarray(new Float32Array([3, 3]), [2, 1]),
    },
  ];
  const results: [number, number][] = [];
  for (const inputs of variants) {
    const out = await client.inferBatch(inputs);
    const [add = NaN] = asDType(out.add, "float32").data;
    const [sub = NaN] = asDType(out.sub, "float32").data;
    results.push([add, sub]);
  }
  return results;
}

if (import.meta.main) {
  console.log(await runClient(Deno.args[0] ?? "http://127.0.0.1:8000"));
}
