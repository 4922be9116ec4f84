/**
 * A closed loop over workers (clients, or runtimes called directly): each takes the next of
 * `requests` indices as soon as it is free, so the rate is what they sustain together. The OCR
 * benchmarks measure every form (served, pipelined, direct) with it, so they differ only in what
 * one call does.
 *
 * @module
 */

/**
 * Runs `requests` calls spread over `workers` and returns calls per second.
 *
 * @param workers What runs the calls, each one call at a time.
 * @param requests How many calls in all.
 * @param call One call: `index` picks its input and its expected answer.
 * @returns Calls per second over the loop (warm-up not included).
 */
export async function closedLoopRate<W>(
  workers: readonly W[],
  requests: number,
  call: (worker: W, index: number) => Promise<void>,
): Promise<number> {
  let next = 0;
  const start = performance.now();
  await Promise.all(workers.map(async (worker) => {
    for (let index = next++; index < requests; index = next++) await call(worker, index);
  }));
  return requests / ((performance.now() - start) / 1000);
}
