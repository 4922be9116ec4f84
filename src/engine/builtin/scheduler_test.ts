import assert from "node:assert/strict";
import type { InferContext, InferRequest, InferResult } from "../../callable/types.ts";
import { InferenceError } from "../../errors.ts";
import { BuiltinEngine } from "./engine.ts";
import { define, echo, requestOf, tick, values } from "./_test_utils.ts";

interface Recorder {
  fn: (requests: InferRequest[], context: InferContext) => Promise<InferResult[]>;
  batches: number[][][];
  hold(): void;
  nextStart(): Promise<void>;
  releaseAll(): void;
}

/** A callable that records each batch and can be held until released. */
function recorder(): Recorder {
  const batches: number[][][] = [];
  const gates: PromiseWithResolvers<void>[] = [];
  let holding = false;
  const started: PromiseWithResolvers<void>[] = [Promise.withResolvers<void>()];
  const fn = async (requests: InferRequest[], context: InferContext): Promise<InferResult[]> => {
    batches.push(requests.map((r) => values(r.data.x)));
    void context;
    started[started.length - 1]!.resolve();
    started.push(Promise.withResolvers<void>());
    if (holding) {
      const gate = Promise.withResolvers<void>();
      gates.push(gate);
      await gate.promise;
    }
    return echo(requests);
  };
  return {
    fn,
    batches,
    hold(): void {
      holding = true;
    },
    /** Resolves when the next batch starts. */
    nextStart(): Promise<void> {
      return started[started.length - 1]!.promise;
    },
    releaseAll(): void {
      holding = false;
      for (const gate of gates.splice(0)) gate.resolve();
    },
  };
}

Deno.test("scheduler waits up to the queue delay and sends a full batch at once", async () => {
  const rec = recorder();
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([rec.fn], {
    config: { maxBatchSize: 4, batcher: { maxQueueDelayMicroseconds: 60_000_000 } },
  }));
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < 4; i++) {
    pending.push(engine.infer(requestOf([i])));
    await tick(); // each request arrives in its own macrotask
  }
  const responses = await Promise.all(pending);
  assert.deepEqual(rec.batches, [[[0], [1], [2], [3]]]);
  assert.equal(responses.length, 4);
});

Deno.test("scheduler with no queue delay dispatches a lone request at once", async () => {
  const rec = recorder();
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([rec.fn], { config: { maxBatchSize: 4 } }));
  await engine.infer(requestOf([1]));
  await engine.infer(requestOf([2]));
  assert.deepEqual(rec.batches, [[[1]], [[2]]]);
});

Deno.test("scheduler batches concurrent requests and answers each with its own outputs", async () => {
  const rec = recorder();
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([rec.fn], { config: { maxBatchSize: 8 } }));
  const responses = await Promise.all([
    engine.infer(requestOf([1, 2], [2, 1], { id: "a" })),
    engine.infer(requestOf([3], [1, 1], { id: "b" })),
  ]);
  assert.deepEqual(rec.batches, [[[1, 2], [3]]]);
  assert.equal(responses[0].id, "a");
  assert.deepEqual(values(responses[0].outputs.get("y")), [1, 2]);
  assert.deepEqual(values(responses[1].outputs.get("y")), [3]);
});

Deno.test("scheduler respects maxBatchSize", async () => {
  const rec = recorder();
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([rec.fn], { config: { maxBatchSize: 2 } }));
  await Promise.all([1, 2, 3, 4, 5].map((v) => engine.infer(requestOf([v]))));
  assert.deepEqual(rec.batches, [[[1], [2]], [[3], [4]], [[5]]]);
});

Deno.test("scheduler sends a preferred batch size at once and the rest after the delay", async () => {
  const rec = recorder();
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([rec.fn], {
    config: {
      maxBatchSize: 4,
      batcher: { preferredBatchSize: [2], maxQueueDelayMicroseconds: 20_000 },
    },
  }));
  await Promise.all([1, 2, 3].map((v) => engine.infer(requestOf([v]))));
  assert.deepEqual(rec.batches, [[[1], [2]], [[3]]]);
});

Deno.test("scheduler never batches requests with different non-batch shapes", async () => {
  const rec = recorder();
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([rec.fn], { config: { maxBatchSize: 8 } }));
  await Promise.all([
    engine.infer(requestOf([1, 2], [1, 2])),
    engine.infer(requestOf([3], [1, 1])),
    engine.infer(requestOf([4], [1, 1])),
  ]);
  assert.deepEqual(rec.batches, [[[1, 2]], [[3], [4]]]);
});

Deno.test("scheduler without batching runs one request per execution", async () => {
  const rec = recorder();
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([rec.fn], { config: { batching: false } }));
  await Promise.all([engine.infer(requestOf([1], [1])), engine.infer(requestOf([2], [1]))]);
  assert.deepEqual(rec.batches, [[[1]], [[2]]]);
});

Deno.test("scheduler dispatches to idle instances, one batch each, in parallel", async () => {
  const seen: number[] = [];
  const bothStarted = Promise.withResolvers<void>();
  const release = Promise.withResolvers<void>();
  const make = (index: number) => async (requests: InferRequest[]): Promise<InferResult[]> => {
    seen.push(index);
    if (seen.length === 2) bothStarted.resolve();
    await release.promise;
    return echo(requests);
  };
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([make(0), make(1)], { config: { maxBatchSize: 1 } }));
  const first = engine.infer(requestOf([1]));
  const second = engine.infer(requestOf([2]));
  // Both callables run before either is released: the batches overlap on two instances.
  await bothStarted.promise;
  assert.deepEqual(seen.toSorted(), [0, 1]);
  release.resolve();
  await Promise.all([first, second]);
});

Deno.test("scheduler queues a batch while every instance is busy", async () => {
  const rec = recorder();
  rec.hold();
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([rec.fn], { config: { maxBatchSize: 4 } }));
  const started = rec.nextStart();
  const first = engine.infer(requestOf([1]));
  await started;
  const rest = [engine.infer(requestOf([2])), engine.infer(requestOf([3]))];
  await tick();
  assert.deepEqual(rec.batches, [[[1]]]);
  rec.releaseAll();
  await Promise.all([first, ...rest]);
  assert.deepEqual(rec.batches, [[[1]], [[2], [3]]]);
});

Deno.test("scheduler runs higher priority levels first", async () => {
  const rec = recorder();
  rec.hold();
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([rec.fn], {
    config: { maxBatchSize: 1, batcher: { priorityLevels: 3, defaultPriorityLevel: 2 } },
  }));
  const started = rec.nextStart();
  const blocker = engine.infer(requestOf([0]));
  await started;
  const low = engine.infer(requestOf([3], undefined, { priority: 3 }));
  const normal = engine.infer(requestOf([2], undefined, { priority: 0 }));
  const outOfRange = engine.infer(requestOf([9], undefined, { priority: 7 }));
  const high = engine.infer(requestOf([1], undefined, { priority: 1 }));
  await tick();
  rec.releaseAll();
  await Promise.all([blocker, low, normal, outOfRange, high]);
  assert.deepEqual(rec.batches.map((b) => b[0]![0]), [0, 1, 2, 9, 3]);
});

Deno.test("scheduler rejects requests beyond maxQueueSize", async () => {
  const rec = recorder();
  rec.hold();
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([rec.fn], {
    config: { maxBatchSize: 1, batcher: { defaultQueuePolicy: { maxQueueSize: 1 } } },
  }));
  const started = rec.nextStart();
  const running = engine.infer(requestOf([0]));
  await started;
  const queued = engine.infer(requestOf([1]));
  await assert.rejects(engine.infer(requestOf([2])), (error: unknown) => {
    assert.ok(error instanceof InferenceError);
    assert.equal(error.code, "UNAVAILABLE");
    assert.equal(error.message, "Exceeds maximum queue size");
    return true;
  });
  rec.releaseAll();
  await Promise.all([running, queued]);
  const { model_stats } = await engine.modelStatistics("m");
  assert.equal(model_stats[0]!.inference_stats.success.count, 2);
});

Deno.test("scheduler rejects a request whose queue timeout expired", async () => {
  const rec = recorder();
  rec.hold();
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([rec.fn], {
    config: {
      maxBatchSize: 1,
      batcher: { defaultQueuePolicy: { defaultTimeoutMicroseconds: 1000 } },
    },
  }));
  const started = rec.nextStart();
  const running = engine.infer(requestOf([0]));
  await started;
  await assert.rejects(engine.infer(requestOf([1])), (error: unknown) => {
    assert.ok(error instanceof InferenceError);
    assert.equal(error.code, "UNAVAILABLE");
    assert.equal(error.message, "Request timeout expired");
    return true;
  });
  rec.releaseAll();
  await running;
  assert.deepEqual(rec.batches, [[[0]]]);
});

Deno.test("scheduler lets a request shorten the timeout only when allowed", async () => {
  const rec = recorder();
  rec.hold();
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([rec.fn], {
    config: {
      maxBatchSize: 1,
      batcher: {
        defaultQueuePolicy: { defaultTimeoutMicroseconds: 60_000_000, allowTimeoutOverride: true },
      },
    },
  }));
  const started = rec.nextStart();
  const running = engine.infer(requestOf([0]));
  await started;
  const kept = engine.infer(requestOf([1]));
  await assert.rejects(
    engine.infer(requestOf([2], undefined, { timeoutMicroseconds: 1000 })),
    /Request timeout expired/,
  );
  rec.releaseAll();
  await Promise.all([running, kept]);
  assert.deepEqual(rec.batches, [[[0]], [[1]]]);
});

Deno.test("scheduler keeps a DELAY request but runs it after the others", async () => {
  const rec = recorder();
  rec.hold();
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([rec.fn], {
    config: {
      maxBatchSize: 1,
      batcher: {
        defaultQueuePolicy: {
          timeoutAction: "DELAY",
          defaultTimeoutMicroseconds: 60_000_000,
          allowTimeoutOverride: true,
        },
      },
    },
  }));
  const started = rec.nextStart();
  const running = engine.infer(requestOf([0]));
  await started;
  const delayed = engine.infer(requestOf([1], undefined, { timeoutMicroseconds: 1000 }));
  await tick(30); // its 1 ms timer fires before this one
  const later = engine.infer(requestOf([2]));
  await tick();
  rec.releaseAll();
  await Promise.all([running, delayed, later]);
  assert.deepEqual(rec.batches.map((b) => b[0]![0]), [0, 2, 1]);
});

async function orderOfAnswers(preserveOrdering: boolean): Promise<number[]> {
  const gate = Promise.withResolvers<void>();
  const bothStarted = Promise.withResolvers<void>();
  let calls = 0;
  const fn = async (requests: InferRequest[]): Promise<InferResult[]> => {
    if (++calls === 2) bothStarted.resolve();
    if (values(requests[0]!.data.x)[0] === 1) await gate.promise;
    return echo(requests);
  };
  await using engine = new BuiltinEngine();
  await engine.loadModel(define([fn, fn], {
    config: { maxBatchSize: 1, batcher: { preserveOrdering } },
  }));
  const order: number[] = [];
  const first = engine.infer(requestOf([1])).then(() => order.push(1));
  const second = engine.infer(requestOf([2])).then(() => order.push(2));
  await bothStarted.promise;
  await tick(); // the second request's callable has returned by now
  gate.resolve();
  await Promise.all([first, second]);
  return order;
}

Deno.test("scheduler with preserveOrdering answers in arrival order", async () => {
  assert.deepEqual(await orderOfAnswers(false), [2, 1]);
  assert.deepEqual(await orderOfAnswers(true), [1, 2]);
});
