/**
 * Decoupled (streaming) test models shared by the streaming, client, PyTriton-client and
 * perf_analyzer suites. The Python peer script `tests/interop/pytriton_clients.py` relies on the
 * names and tensors declared here.
 *
 * @module
 */

import { type BindOptions, type InferRequest, type InferResult, ndarray } from "../mod.ts";

/** The message `FailAfter` throws after its responses. */
export const STREAM_FAILURE_MESSAGE = "Deliberate failure after the partial responses";

function countOf(request: InferRequest): number {
  return Number((request.data.n!.data as Int32Array)[0]);
}

function delayOf(request: InferRequest): number {
  const delay = request.parameters.delay_ms;
  return typeof delay === "number" ? delay : 0;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const id = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    function done(): void {
      clearTimeout(id);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}

/**
 * `Count`: decoupled, unbatched. Input `n` INT32 `[1]`; yields `n` responses with output `i`
 * INT32 `[1]` = 0, 1, ..., n-1, waiting the request parameter `delay_ms` (default 0) before each.
 *
 * @returns The bind options.
 */
export function countModel(): BindOptions {
  return {
    modelName: "Count",
    inferFunc: async function* (requests): AsyncGenerator<InferResult[]> {
      const [request] = requests;
      const n = countOf(request!);
      for (let i = 0; i < n; i++) {
        if (delayOf(request!) > 0) await sleep(delayOf(request!), request!.signal);
        // A cancelled request frees the (single) instance at once.
        if (request!.signal.aborted) return;
        yield [{ i: ndarray([i], [1], { dtype: "int32" }) }];
      }
    },
    inputs: [{ name: "n", dtype: "int32", shape: [1] }],
    outputs: [{ name: "i", dtype: "int32", shape: [1] }],
    config: { decoupled: true, batching: false },
  };
}

/**
 * `CountBatched`: decoupled, batched (max 8). Input `n` INT32 `[1]` per row; each request yields
 * `max(n)` responses, output `i` INT32 `[1]` per row (the step index).
 *
 * @returns The bind options.
 */
export function countBatchedModel(): BindOptions {
  return {
    modelName: "CountBatched",
    inferFunc: async function* (requests): AsyncGenerator<InferResult[]> {
      const steps = Math.max(
        ...requests.map((request) => Math.max(...(request.data.n!.data as Int32Array))),
      );
      for (let i = 0; i < steps; i++) {
        await Promise.resolve();
        yield requests.map((request) => {
          const rows = request.data.n!.shape[0]!;
          return { i: ndarray(new Int32Array(rows).fill(i), [rows, 1]) };
        });
      }
    },
    inputs: [{ name: "n", dtype: "int32", shape: [1] }],
    outputs: [{ name: "i", dtype: "int32", shape: [1] }],
    config: { decoupled: true, maxBatchSize: 8 },
  };
}

/**
 * `FailAfter`: decoupled, unbatched. Input `n` INT32 `[1]`; yields `n` responses like `Count`,
 * then throws {@linkcode STREAM_FAILURE_MESSAGE}.
 *
 * @returns The bind options.
 */
export function failAfterModel(): BindOptions {
  return {
    modelName: "FailAfter",
    inferFunc: async function* (requests): AsyncGenerator<InferResult[]> {
      const n = countOf(requests[0]!);
      for (let i = 0; i < n; i++) {
        await Promise.resolve();
        yield [{ i: ndarray([i], [1], { dtype: "int32" }) }];
      }
      throw new Error(STREAM_FAILURE_MESSAGE);
    },
    inputs: [{ name: "n", dtype: "int32", shape: [1] }],
    outputs: [{ name: "i", dtype: "int32", shape: [1] }],
    config: { decoupled: true, batching: false },
  };
}

/**
 * `Late`: decoupled, unbatched. Input `delay_ms` INT32 `[1]`; waits that long (or until the
 * request is cancelled), then yields one response with output `i` INT32 `[1]` = 0. For clients
 * that cannot send parameters (PyTriton's DecoupledModelClient).
 *
 * @returns The bind options.
 */
export function lateModel(): BindOptions {
  return {
    modelName: "Late",
    inferFunc: async function* (requests): AsyncGenerator<InferResult[]> {
      const request = requests[0]!;
      await sleep(Number((request.data.delay_ms!.data as Int32Array)[0]), request.signal);
      if (request.signal.aborted) return;
      yield [{ i: ndarray([0], [1], { dtype: "int32" }) }];
    },
    inputs: [{ name: "delay_ms", dtype: "int32", shape: [1] }],
    outputs: [{ name: "i", dtype: "int32", shape: [1] }],
    config: { decoupled: true, batching: false },
  };
}

/** What `Endless` observed of its requests' cancellation. */
export interface EndlessLog {
  /** Responses yielded, per request id parameter `tag`. */
  yielded: Map<string, number>;
  /** Tags whose `request.signal` was aborted when their generator finished. */
  cancelled: Set<string>;
  /** Tags whose generator finished (returned, or closed by the engine). */
  closed: Set<string>;
}

/**
 * `Endless`: decoupled, unbatched. Input `n` INT32 `[1]` (ignored); yields output `i` INT32 `[1]`
 * every `delay_ms` (default 10) until `request.signal` aborts, recording what it saw in `log`
 * under the request parameter `tag`.
 *
 * @param log Where the callable records its progress.
 * @returns The bind options.
 */
export function endlessModel(log: EndlessLog): BindOptions {
  return {
    modelName: "Endless",
    inferFunc: async function* (requests): AsyncGenerator<InferResult[]> {
      const request = requests[0]!;
      const tag = String(request.parameters.tag ?? "");
      const delay = delayOf(request) || 10;
      try {
        // Bounded, so a broken cancellation cannot keep the server busy forever.
        for (let i = 0; i < 1000; i++) {
          if (request.signal.aborted) return;
          yield [{ i: ndarray([i], [1], { dtype: "int32" }) }];
          log.yielded.set(tag, (log.yielded.get(tag) ?? 0) + 1);
          await sleep(delay, request.signal);
        }
      } finally {
        // Closed by the engine (not pulled any further) or returned on its own.
        if (request.signal.aborted) log.cancelled.add(tag);
        log.closed.add(tag);
      }
    },
    inputs: [{ name: "n", dtype: "int32", shape: [1] }],
    outputs: [{ name: "i", dtype: "int32", shape: [1] }],
    config: { decoupled: true, batching: false },
  };
}

/**
 * A fresh, empty {@linkcode EndlessLog}.
 *
 * @returns The log.
 */
export function endlessLog(): EndlessLog {
  return { yielded: new Map(), cancelled: new Set(), closed: new Set() };
}

/**
 * Waits until `condition` holds, checking every 10 ms, for at most `limitMs` (a safety net for a
 * broken implementation, not a timing assertion).
 *
 * @param condition What to wait for.
 * @param limitMs The most to wait.
 * @returns Whether it holds.
 */
export async function eventually(condition: () => boolean, limitMs = 10_000): Promise<boolean> {
  const deadline = Date.now() + limitMs;
  while (!condition()) {
    if (Date.now() > deadline) return false;
    await sleep(10);
  }
  return true;
}

/**
 * Every streaming test model (`Count`, `CountBatched`, `FailAfter`, `Late`, `Endless`).
 *
 * @param log The log `Endless` writes to.
 * @returns Their bind options.
 */
export function streamingModels(log: EndlessLog = endlessLog()): BindOptions[] {
  return [countModel(), countBatchedModel(), failAfterModel(), lateModel(), endlessModel(log)];
}
