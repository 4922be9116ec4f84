/**
 * Runs three sequences through the Accumulator at once, interleaved: at each step every sequence
 * sends its next number (all three requests in flight together, so they share batches), and each
 * answer is that sequence's own running total.
 *
 *     deno run -A examples/accumulator/client.ts [url]
 *
 * @module
 */

import { ModelClient } from "../../src/client/mod.ts";
import { ndarray } from "../../mod.ts";

/** The numbers each sequence sends, by correlation ID. */
export const SEQUENCES: Readonly<Record<number, readonly number[]>> = {
  1001: [1, 2, 3, 4],
  1002: [10, 20, 30, 40],
  1003: [100, -100, 7, 0],
};

/**
 * Sends the sequences' numbers interleaved, step by step.
 *
 * @param url Server URL (`http://...` or `grpc://...`).
 * @returns The running totals each sequence got back, by correlation ID.
 */
export async function runClient(url: string): Promise<Record<number, number[]>> {
  await using client = new ModelClient(url, "Accumulator", { initTimeoutS: 30 });
  const totals: Record<number, number[]> = {};
  const ids = Object.keys(SEQUENCES).map(Number);
  const steps = Math.max(...ids.map((id) => SEQUENCES[id]!.length));
  for (let step = 0; step < steps; step++) {
    await Promise.all(ids.map(async (id) => {
      const numbers = SEQUENCES[id]!;
      if (step >= numbers.length) return;
      const outputs = await client.inferSample([ndarray(Int32Array.of(numbers[step]!), [1])], {
        parameters: {
          sequence_id: id,
          sequence_start: step === 0,
          sequence_end: step === numbers.length - 1,
        },
      });
      (totals[id] ??= []).push(outputs.total!.data[0] as number);
    }));
  }
  return totals;
}

if (import.meta.main) {
  for (
    const [id, totals] of Object.entries(await runClient(Deno.args[0] ?? "http://127.0.0.1:8000"))
  ) {
    console.log(`sequence ${id}: ${totals.join(" ")}`);
  }
}
