/**
 * `groupByKeys`: calls an inference callable once per group of requests with the same inputs.
 *
 * @module
 */

import { TritonRuntimeError } from "../../errors.ts";
import type {
  CallableResult,
  InferContext,
  InferFunc,
  InferRequest,
  InferResult,
  InferReturn,
} from "../types.ts";
import type { RequestCallable } from "./types.ts";
import { isStream, requireRequests, runSequentially, toFunction } from "./_util.ts";

/**
 * Wraps an inference callable so it is called once per group of requests sharing the same set of
 * input names (PyTriton's `@group_by_keys`); results are put back in the original request order.
 * Put it above `batch` when a model has optional inputs, so every batch is uniform. Groups run
 * one after another, in the order of their sorted input names. Streams (decoupled models) are not
 * supported, since the groups' steps cannot be merged into steps for the whole batch.
 *
 * @param fn The request-level callable, or an object with an `infer` method.
 * @returns An inference callable over requests.
 * @throws {TritonRuntimeError} (at call time) When a group's call returns a stream, or a number
 *   of results different from its number of requests.
 *
 * @example Requests with and without an optional input
 * ```ts
 * import {
 *   groupByKeys,
 *   inferContext,
 *   type InferRequest,
 *   inferRequest,
 *   type InferResult,
 *   ndarray,
 * } from "../../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const seen: string[][] = [];
 * const infer = groupByKeys((requests: InferRequest[]) => {
 *   seen.push(requests.map((r) => Object.keys(r.data).join("+")));
 *   return requests.map((r) => ({ n: ndarray(new Int32Array([Object.keys(r.data).length]), [1, 1]) }));
 * });
 * const x = ndarray(new Float32Array([1]), [1, 1]);
 * const context = inferContext({
 *   modelName: "Opt",
 *   inputs: [
 *     { name: "x", dtype: "float32", shape: [1] },
 *     { name: "y", dtype: "float32", shape: [1], optional: true },
 *   ],
 *   outputs: [{ name: "n", dtype: "int32", shape: [1] }],
 * });
 * const results = infer(
 *   [inferRequest({ x }), inferRequest({ x, y: x }), inferRequest({ x })],
 *   context,
 * ) as InferResult[];
 * assert.deepEqual(seen, [["x", "x"], ["x+y"]]);
 * assert.deepEqual(results.map((r) => r.n?.data[0]), [1, 2, 1]);
 * ```
 */
export function groupByKeys<I, O, R extends CallableResult<O>>(
  fn: RequestCallable<I, O, R>,
): InferFunc<I, O, R>;
export function groupByKeys(fn: RequestCallable): InferFunc {
  const inner = toFunction(fn, "groupByKeys");
  return (requests: InferRequest[], context: InferContext): InferReturn => {
    requireRequests(requests, "groupByKeys");
    const groups = new Map<string, number[]>();
    requests.forEach((request, index) => {
      const key = JSON.stringify(Object.keys(request.data).sort());
      const members = groups.get(key);
      if (members === undefined) groups.set(key, [index]);
      else members.push(index);
    });
    // Groups run in the order PyTriton sorts them: by their tuples of sorted names.
    const ordered = [...groups.entries()]
      .sort(([a], [b]) => compareNameLists(JSON.parse(a), JSON.parse(b)))
      .map(([, members]) => members);
    const results: InferResult[] = new Array(requests.length);
    return runSequentially<InferResult[], InferResult[]>(
      ordered.length,
      {
        call: (index) => {
          const output = inner(ordered[index]!.map((member) => requests[member]!), context);
          if (isStream(output)) {
            throw new TritonRuntimeError(
              "Cannot group requests by keys: the wrapped callable returned a stream; groupByKeys supports coupled models only",
            );
          }
          return output as InferResult[] | Promise<InferResult[]>;
        },
        collect: (index, output) => {
          const members = ordered[index]!;
          if (!Array.isArray(output) || output.length !== members.length) {
            throw new TritonRuntimeError(
              `Cannot group requests by keys: the wrapped callable returned ${
                Array.isArray(output) ? `${output.length} results` : typeof output
              } for ${members.length} requests`,
            );
          }
          members.forEach((member, position) => {
            results[member] = output[position]!;
          });
        },
        finish: () => results,
      },
    );
  };
}

function compareNameLists(a: readonly string[], b: readonly string[]): number {
  const length = Math.min(a.length, b.length);
  for (let index = 0; index < length; index++) {
    if (a[index]! < b[index]!) return -1;
    if (a[index]! > b[index]!) return 1;
  }
  return a.length - b.length;
}
