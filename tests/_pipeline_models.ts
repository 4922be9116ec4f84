/**
 * The models of the pipeline tests (`pipeline_test.ts`): `Double` and the other step models, and
 * the callable that calls another model, which runs on the main thread and, through
 * `_workers/caller.ts`, in a Worker.
 *
 * @module
 */

import {
  type BindOptions,
  type CallParent,
  type InferContext,
  type InferRequest,
  type InferResult,
  type NDArray,
  ndarray,
  zip,
} from "../mod.ts";

/** A float32 vector, batched. */
export const VECTOR = [{ name: "v", dtype: "float32", shape: [-1] }] as const;

/** What the step models saw, for the test's checks (main thread). */
export const seen = {
  /** The parent of each request `Double` ran. */
  parents: [] as (CallParent | undefined)[],
  /** Resolved when `Slow` starts a request. */
  slowStarted: Promise.withResolvers<void>(),
  /** Resolved when `Slow` saw its request cancelled. */
  slowCancelled: Promise.withResolvers<void>(),
  /** `Left` and `Right` started, and whether each saw the other start before it finished. */
  started: 0,
  overlapped: [] as boolean[],
};

function vectorOf(request: InferRequest): NDArray<"float32"> {
  return request.data.v as NDArray<"float32">;
}

/** `Double`: v → 2v; a request whose first value is 99 fails with `Error: boom`. */
export const double = {
  modelName: "Double",
  inferFunc: (requests) =>
    requests.map(({ v, parent }) => {
      seen.parents.push(parent);
      if (v.data[0] === 99) throw new Error("boom");
      return { v: ndarray(v.data.map((x) => x * 2), v.shape) };
    }),
  inputs: VECTOR,
  outputs: VECTOR,
  config: { maxBatchSize: 4 },
} satisfies BindOptions<typeof VECTOR, typeof VECTOR>;

/** `Plus1`: v → v + 1. */
export const plus1 = {
  ...double,
  modelName: "Plus1",
  inferFunc: (requests) =>
    requests.map(({ v }) => ({ v: ndarray(v.data.map((x) => x + 1), v.shape) })),
} satisfies BindOptions<typeof VECTOR, typeof VECTOR>;

const PAIR = [
  { name: "a", dtype: "float32", shape: [-1] },
  { name: "b", dtype: "float32", shape: [-1] },
] as const;

/** `Mul`: a, b → v = a * b. */
export const mul = {
  modelName: "Mul",
  inferFunc: (requests) => requests.map(({ a, b }) => ({ v: zip(a, b, (x, y) => x * y) })),
  inputs: PAIR,
  outputs: VECTOR,
  config: { maxBatchSize: 4 },
} satisfies BindOptions<typeof PAIR, typeof VECTOR>;

/** `Counter` (decoupled): v = [n] → n responses, v = [0], [1], ... */
export const counter = {
  modelName: "Counter",
  inferFunc: async function* (requests): AsyncGenerator<InferResult<{ v: NDArray<"float32"> }>[]> {
    const n = requests[0]!.v.data[0]!;
    for (let i = 0; i < n; i++) yield [{ v: ndarray(new Float32Array([i]), [1]) }];
  },
  inputs: VECTOR,
  outputs: VECTOR,
  config: { batching: false, decoupled: true },
} satisfies BindOptions<typeof VECTOR, typeof VECTOR>;

/** `Slow`: waits until its request is cancelled (or 30 s), then fails. */
export const slow = {
  ...double,
  modelName: "Slow",
  inferFunc: async (requests) => {
    const { signal } = requests[0]!;
    seen.slowStarted.resolve();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 30_000);
      signal.addEventListener("abort", () => {
        clearTimeout(timer);
        seen.slowCancelled.resolve();
        resolve();
      }, { once: true });
    });
    throw new Error("Slow was not cancelled");
  },
} satisfies BindOptions<typeof VECTOR, typeof VECTOR>;

/** A step that waits (up to 10 s) for the other of `Left`/`Right` to start, then echoes v. */
function sideBySide(name: string): BindOptions<typeof VECTOR, typeof VECTOR> {
  return {
    ...double,
    modelName: name,
    inferFunc: async (requests: InferRequest[]) => {
      seen.started++;
      const until = performance.now() + 10_000;
      while (seen.started < 2 && performance.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      seen.overlapped.push(seen.started >= 2);
      return requests.map((request) => ({ v: vectorOf(request) }));
    },
  };
}

/** `Left` and `Right`: independent steps of one ensemble. */
export const left = sideBySide("Left");
/** See {@linkcode left}. */
export const right = sideBySide("Right");

/**
 * The calling callable: calls the model named by the request parameter `target` (else `target`,
 * else `Double`) with the request's `v` and answers what it answered plus `v` (the request's own
 * input, still the callable's after the call); with the parameter `stream`, streams from it and
 * answers the steps' values in a row.
 *
 * @param target The model to call, unless the request names one.
 * @returns The callable.
 */
export function callerFunc(
  target = "Double",
): (requests: InferRequest[], context: InferContext) => Promise<InferResult[]> {
  return (requests, context) =>
    Promise.all(requests.map(async (request) => {
      const model = String(request.parameters.target ?? target);
      const v = vectorOf(request);
      if (request.parameters.stream === true) {
        const values: number[] = [];
        // The decoupled model does not batch: its v has no batch axis.
        const unbatched = ndarray(v.data.slice(), [v.data.length]);
        for await (const step of context.inferStream(model, { v: unbatched }, { request })) {
          values.push(...(step.v!.data as Float32Array));
        }
        return { v: ndarray(new Float32Array(values), [1, values.length]) };
      }
      const out = await context.infer(model, { v }, { request });
      return { v: zip(out.v as NDArray<"float32">, v, (x, y) => x + y) };
    }));
}

/** `Echo`: answers its request's own `v` (the same array). */
export const echo = {
  ...double,
  modelName: "Echo",
  inferFunc: (requests) => requests.map(({ v }) => ({ v })),
} satisfies BindOptions<typeof VECTOR, typeof VECTOR>;

/**
 * `Same` (main thread): calls `Echo` with its `v` and answers whether the output it got back is
 * its own array (1 or 0), then whether it is the same buffer.
 */
export const same = {
  ...double,
  modelName: "Same",
  inferFunc: (requests, context) =>
    Promise.all(requests.map(async (request) => {
      const { v } = await context.infer(echo, { v: request.v }, { request });
      const flags = [v === request.v ? 1 : 0, v.data.buffer === request.v.data.buffer ? 1 : 0];
      return { v: ndarray(new Float32Array(flags), [1, 2]) };
    })),
} satisfies BindOptions<typeof VECTOR, typeof VECTOR>;
