import assert from "node:assert/strict";
import { InferenceError, TritonValidationError } from "../errors.ts";
import { ndarray } from "../tensor/ndarray.ts";
import { callInfer, runCoupled, runDecoupled } from "./invoke.ts";
import { inferRequest } from "./request.ts";
import { inferContext } from "./context.ts";
import type { InferCallable, InferContext, InferRequest, InferResult } from "./types.ts";

const context: InferContext = inferContext({ modelName: "m", config: { batching: false } });
const requests: InferRequest[] = [{
  data: { x: ndarray([1]), signal: ndarray([2]) },
  parameters: { p: 1 },
  requestedOutputNames: ["y"],
  signal: new AbortController().signal,
}];

/** Asserts that `seen` are the callable's view of `requests`: same fields, inputs as properties. */
function assertViewOf(seen: readonly InferRequest[], original: readonly InferRequest[]): void {
  assert.equal(seen.length, original.length);
  seen.forEach((request, index) => {
    const source = original[index]!;
    assert.equal(request.data, source.data);
    assert.equal(request.parameters, source.parameters);
    assert.equal(request.requestedOutputNames, source.requestedOutputNames);
    assert.equal(request.signal, source.signal);
    assert.equal((request as unknown as Record<string, unknown>).x, source.data.x);
  });
}
const step = (value: number): InferResult[] => [{ y: ndarray([value]) }];

async function collect(callable: InferCallable): Promise<unknown[]> {
  const steps: unknown[] = [];
  for await (const s of runDecoupled(callable, requests, context)) steps.push(s);
  return steps;
}

Deno.test("runCoupled() accepts sync, async and one-step generator callables", async () => {
  const forms: InferCallable[] = [
    () => step(1),
    async () => {
      await Promise.resolve();
      return step(1);
    },
    function* (): Generator<InferResult[]> {
      yield step(1);
    },
    async function* (): AsyncGenerator<InferResult[]> {
      yield step(1);
    },
  ];
  for (const form of forms) assert.deepEqual(await runCoupled(form, requests, context), step(1));
});

Deno.test("runCoupled() calls an object's infer method bound to the object", async () => {
  class Model {
    #value = 5;
    infer(batch: InferRequest[], ctx: InferContext): InferResult[] {
      assertViewOf(batch, requests);
      assert.equal(ctx, context);
      return step(this.#value);
    }
  }
  assert.deepEqual(await runCoupled(new Model(), requests, context), step(5));
});

Deno.test("runCoupled() passes the requests and the context", async () => {
  let seen: [InferRequest[], InferContext] | undefined;
  await runCoupled(
    (batch, ctx) => {
      seen = [batch, ctx];
      return [];
    },
    requests,
    context,
  );
  assertViewOf(seen![0], requests);
  assert.equal(seen![1], context);
});

Deno.test("callInfer() hands over each input as a property too, except those named like a field", () => {
  let seen: InferRequest[] = [];
  callInfer(
    (batch) => {
      seen = batch;
      return [];
    },
    requests,
    context,
  );
  const [view] = seen;
  assert.ok(view !== undefined);
  const properties = view as unknown as Record<string, unknown>;
  assert.equal(properties.x, requests[0]!.data.x);
  // The input named "signal" stays only in data: the field keeps its meaning.
  assert.equal(view.signal, requests[0]!.signal);
  assert.equal(view.data.signal, requests[0]!.data.signal);
  // The engine's requests are not changed.
  assert.equal((requests[0] as unknown as Record<string, unknown>).x, undefined);
  assert.deepEqual(Object.keys(inferRequest({ a: ndarray([1]) })).sort(), [
    "a",
    "data",
    "parameters",
    "requestedOutputNames",
    "sequence",
    "signal",
  ]);
});

Deno.test("runCoupled() refuses generators that do not produce exactly one step", async () => {
  let finished = false;
  const two = function* (): Generator<InferResult[]> {
    try {
      yield step(1);
      yield step(2);
      yield step(3);
    } finally {
      finished = true;
    }
  };
  await assert.rejects(runCoupled(two, requests, context), (error: unknown) => {
    assert.ok(error instanceof InferenceError);
    assert.match(error.message, /model 'm'.*exactly one result.*more than one step/);
    return true;
  });
  assert.ok(finished, "the generator was closed");
  // deno-lint-ignore require-yield
  const none = async function* (): AsyncGenerator<InferResult[]> {
    return;
  };
  await assert.rejects(runCoupled(none, requests, context), /yielded nothing/);
});

Deno.test("runCoupled() lets the callable's own errors through", async () => {
  await assert.rejects(
    runCoupled(
      () => {
        throw new RangeError("division by zero");
      },
      requests,
      context,
    ),
    RangeError,
  );
  await assert.rejects(
    runCoupled(
      async () => {
        await Promise.resolve();
        throw new TypeError("late");
      },
      requests,
      context,
    ),
    TypeError,
  );
});

Deno.test("runDecoupled() yields every step of sync and async generators", async () => {
  assert.deepEqual(
    await collect(function* (): Generator<InferResult[]> {
      yield step(1);
      yield step(2);
    }),
    [step(1), step(2)],
  );
  assert.deepEqual(
    await collect(async function* (): AsyncGenerator<InferResult[]> {
      yield step(1);
      yield step(2);
      yield step(3);
    }),
    [step(1), step(2), step(3)],
  );
});

Deno.test("runDecoupled() treats a plain or async return as one step", async () => {
  assert.deepEqual(await collect(() => step(1)), [step(1)]);
  assert.deepEqual(await collect(() => Promise.resolve(step(2))), [step(2)]);
  assert.deepEqual(await collect({ infer: () => step(3) }), [step(3)]);
});

Deno.test("callInfer() refuses values that are not callables", () => {
  for (const bad of [null, 3, {}, { infer: 1 }]) {
    assert.throws(
      () => callInfer(bad as unknown as InferCallable, requests, context),
      (error: unknown) => {
        assert.ok(error instanceof TritonValidationError);
        assert.match(
          error.message,
          /^Invalid inference callable: expected a function or an object with an infer method/,
        );
        return true;
      },
    );
  }
});
