import assert from "node:assert/strict";
import { TritonValidationError } from "../../errors.ts";
import type { InferContext, InferRequest, InferResult } from "../types.ts";
import { batch } from "./batch.ts";
import { tritonContext } from "./triton_context.ts";
import { column, makeContext, makeRequest, values } from "./_test_util.ts";

const context = makeContext({
  name: "Ctx",
  inputs: [{ name: "x", dtype: "float32", shape: [1] }],
  outputs: [{ name: "y", dtype: "float32", shape: [1] }],
  config: { maxBatchSize: 32, batcher: { preferredBatchSize: [8] } },
});

Deno.test("tritonContext() injects the context into the inputs", () => {
  let seen: InferContext | undefined;
  let names: string[] = [];
  const infer = batch(tritonContext((inputs) => {
    seen = inputs.tritonContext;
    names = Object.keys(inputs);
    return { y: inputs.x! };
  }));
  const results = infer([makeRequest({ x: column([1]) })], context) as InferResult[];
  assert.equal(seen, context);
  assert.equal(seen!.model.config.maxBatchSize, 32);
  assert.deepEqual(seen!.model.config.batcher.preferredBatchSize, [8]);
  assert.deepEqual(names, ["x", "tritonContext"]);
  assert.deepEqual(values(results[0]!.y), [1]);
});

Deno.test("tritonContext() passes a list of requests through", () => {
  const requests = [makeRequest({ x: column([1]) })];
  let seen: InferRequest[] | undefined;
  const infer = tritonContext((given: InferRequest[], ctx: InferContext) => {
    seen = given;
    assert.equal(ctx, context);
    return [];
  });
  infer(requests, context);
  assert.equal(seen, requests);
});

Deno.test("tritonContext() rejects a call without a context", () => {
  const infer = tritonContext((inputs) => ({ y: inputs.x! }));
  assert.throws(
    () => infer({ x: column([1]) }, undefined as unknown as InferContext),
    (error) =>
      error instanceof TritonValidationError &&
      error.message ===
        "Cannot run tritonContext: the callable is not bound to a model (no context was given)",
  );
});
