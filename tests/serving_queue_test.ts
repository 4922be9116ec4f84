// Queue policies and priorities on both engines, over HTTP and gRPC. A model blocked on a gate
// the test controls holds its one instance busy so requests queue up; the order in which the
// callable receives them proves the scheduling, and the pending-request gauge on /metrics says
// when they are all queued.

import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import type { BindOptions, InferRequest, ModelConfig, Triton } from "../mod.ts";
import type { EngineKind } from "../src/engine/engine.ts";
import { codecs } from "../src/frontend/grpc/codec.ts";
import { ENGINES, startServer } from "./_helpers.ts";
import { TestGrpcClient } from "./grpc_test_client.ts";
import { scrape, valueOf } from "./_prometheus.ts";

/** A model whose calls wait until the test opens the gate; it records each request's value. */
class GatedModel {
  readonly seen: number[] = [];
  #gate = Promise.withResolvers<void>();
  #arrivals: (() => void)[] = [];

  bind(config: ModelConfig): BindOptions {
    return {
      modelName: "Gated",
      inferFunc: async (requests: InferRequest[]) => {
        for (const request of requests) {
          this.seen.push((request.data.x!.data as Float32Array)[0]!);
        }
        this.#arrivals.splice(0).forEach((resolve) => resolve());
        await this.#gate.promise;
        return requests.map((r) => ({ y: r.data.x! }));
      },
      inputs: [{ name: "x", dtype: "float32", shape: [1] }],
      outputs: [{ name: "y", dtype: "float32", shape: [1] }],
      config: { maxBatchSize: 1, ...config },
    };
  }

  /** Resolves once the callable has received `count` requests in all. */
  async received(count: number): Promise<void> {
    while (this.seen.length < count) {
      await new Promise<void>((resolve) => this.#arrivals.push(resolve));
    }
  }

  open(): void {
    this.#gate.resolve();
  }
}

// Triton's core prefixes scheduler errors with the request id; the rest is the same text.
function withoutRequestId(message: string): string {
  return message.replace(/^\[request id: [^\]]*\] /, "");
}

interface Answer {
  ok: boolean;
  status: number | string;
  message?: string;
}

async function httpInfer(
  triton: Triton,
  value: number,
  parameters: Record<string, number> = {},
): Promise<Answer> {
  const response = await fetch(`${triton.urls.http}/v2/models/Gated/infer`, {
    method: "POST",
    body: JSON.stringify({
      parameters,
      inputs: [{ name: "x", datatype: "FP32", shape: [1, 1], data: [value] }],
    }),
  });
  const body = await response.json();
  return response.ok
    ? { ok: true, status: response.status }
    : { ok: false, status: response.status, message: withoutRequestId(body.error) };
}

async function grpcInfer(
  client: TestGrpcClient,
  value: number,
  parameters: Record<string, number> = {},
): Promise<Answer> {
  try {
    await client.raw(
      "ModelInfer",
      codecs.ModelInferRequest.encode({
        model_name: "Gated",
        parameters: Object.fromEntries(
          Object.entries(parameters).map((
            [key, v],
          ) => [key, { int64_param: String(v), parameter_choice: "int64_param" }]),
        ),
        inputs: [{
          name: "x",
          datatype: "FP32",
          shape: [1, 1],
          contents: { fp32_contents: [value] },
        }],
      }),
    );
    return { ok: true, status: "OK" };
  } catch (error) {
    const { code, details } = error as grpc.ServiceError;
    return { ok: false, status: grpc.status[code]!, message: withoutRequestId(details) };
  }
}

const settled = new WeakSet<Promise<Answer>>();

/** Notes when an answer arrives, so waits can count requests that left the queue early. */
function tracked(answer: Promise<Answer>): Promise<Answer> {
  answer.then(() => settled.add(answer), () => settled.add(answer));
  return answer;
}

/**
 * Waits until `count` requests are queued (not executing) or, among `early`, answered already
 * (the built-in engine rejects timed-out requests at once, Triton's core when it next looks).
 */
async function pending(
  triton: Triton,
  count: number,
  early: readonly Promise<Answer>[] = [],
): Promise<void> {
  while (true) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    count -= early.filter((answer) => settled.has(answer)).length;
    early = early.filter((answer) => !settled.has(answer));
    const value = valueOf(
      await scrape(triton.urls.metrics!),
      "nv_inference_pending_request_count",
      {
        model: "Gated",
      },
    );
    if (value === count) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function serve(
  engine: EngineKind,
  model: GatedModel,
  config: ModelConfig,
): Promise<{ triton: Triton; client: TestGrpcClient } & AsyncDisposable> {
  const triton = await startServer({ engine, models: [model.bind(config)] });
  const client = new TestGrpcClient(triton.urls.grpc!);
  return {
    triton,
    client,
    async [Symbol.asyncDispose](): Promise<void> {
      model.open();
      client[Symbol.dispose]();
      await triton.stop();
    },
  };
}

for (const engine of ENGINES) {
  Deno.test(`serving (${engine}): a full queue answers 503 / UNAVAILABLE`, async () => {
    const model = new GatedModel();
    await using server = await serve(engine, model, {
      batcher: { defaultQueuePolicy: { maxQueueSize: 1 } },
    });
    const { triton, client } = server;
    const first = httpInfer(triton, 0);
    await model.received(1);
    const queued = grpcInfer(client, 1);
    await pending(triton, 1);
    assert.deepEqual(await httpInfer(triton, 2), {
      ok: false,
      status: 503,
      message: "Exceeds maximum queue size",
    });
    assert.deepEqual(await grpcInfer(client, 3), {
      ok: false,
      status: "UNAVAILABLE",
      message: "Exceeds maximum queue size",
    });
    model.open();
    assert.equal((await first).ok, true);
    assert.equal((await queued).ok, true);
    assert.deepEqual(model.seen, [0, 1]);
    // The server keeps serving once the queue drained.
    assert.equal((await httpInfer(triton, 4)).ok, true);
  });

  Deno.test(`serving (${engine}): queue timeout with REJECT`, async () => {
    const model = new GatedModel();
    await using server = await serve(engine, model, {
      batcher: {
        priorityLevels: 2,
        defaultPriorityLevel: 2,
        // A request may only shorten a default timeout, so the default is long.
        defaultQueuePolicy: {
          timeoutAction: "REJECT",
          defaultTimeoutMicroseconds: 60_000_000,
          allowTimeoutOverride: true,
        },
        // Level 1 times out after 1 ms on its own default.
        priorityQueuePolicy: { 1: { timeoutAction: "REJECT", defaultTimeoutMicroseconds: 1000 } },
      },
    });
    const { triton, client } = server;
    const first = httpInfer(triton, 0);
    await model.received(1);
    const timedHttp = tracked(httpInfer(triton, 1, { timeout: 1000 }));
    const timedGrpc = tracked(grpcInfer(client, 2, { timeout: 1000 }));
    const patient = httpInfer(triton, 3);
    const urgent = tracked(httpInfer(triton, 4, { priority: 1 }));
    await pending(triton, 4, [timedHttp, timedGrpc, urgent]);
    // Let the 1 ms timeouts pass for certain while the instance is still busy.
    await new Promise((resolve) => setTimeout(resolve, 50));
    model.open();
    assert.equal((await first).ok, true);
    assert.deepEqual(await timedHttp, {
      ok: false,
      status: 503,
      message: "Request timeout expired",
    });
    assert.deepEqual(await timedGrpc, {
      ok: false,
      status: "UNAVAILABLE",
      message: "Request timeout expired",
    });
    assert.equal((await patient).ok, true);
    assert.deepEqual(await urgent, { ok: false, status: 503, message: "Request timeout expired" });
    assert.deepEqual(model.seen, [0, 3]);
  });

  Deno.test(`serving (${engine}): queue timeout with DELAY runs late requests last`, async () => {
    const model = new GatedModel();
    await using server = await serve(engine, model, {
      batcher: {
        defaultQueuePolicy: {
          timeoutAction: "DELAY",
          defaultTimeoutMicroseconds: 60_000_000,
          allowTimeoutOverride: true,
        },
      },
    });
    const { triton, client } = server;
    const first = httpInfer(triton, 0);
    await model.received(1);
    const late = grpcInfer(client, 1, { timeout: 1000 });
    await pending(triton, 1);
    const patient = [httpInfer(triton, 2)];
    await pending(triton, 2);
    patient.push(httpInfer(triton, 3));
    await pending(triton, 3);
    await new Promise((resolve) => setTimeout(resolve, 50));
    model.open();
    for (const answer of [first, late, ...patient]) assert.equal((await answer).ok, true);
    assert.deepEqual(model.seen, [0, 2, 3, 1]);
  });

  Deno.test(`serving (${engine}): priority levels order the queue`, async () => {
    const model = new GatedModel();
    await using server = await serve(engine, model, {
      batcher: { priorityLevels: 2, defaultPriorityLevel: 2 },
    });
    const { triton, client } = server;
    const first = httpInfer(triton, 0);
    await model.received(1);
    const answers: Promise<Answer>[] = [];
    const queue = async (request: Promise<Answer>, count: number): Promise<void> => {
      answers.push(request);
      await pending(triton, count);
    };
    await queue(httpInfer(triton, 1), 1); // default level 2
    await queue(grpcInfer(client, 2, { priority: 1 }), 2);
    await queue(httpInfer(triton, 3, { priority: 2 }), 3);
    await queue(httpInfer(triton, 4, { priority: 1 }), 4);
    await queue(grpcInfer(client, 5), 5); // default level 2
    model.open();
    for (const answer of [first, ...answers]) assert.equal((await answer).ok, true);
    assert.deepEqual(model.seen, [0, 2, 4, 1, 3, 5]);
  });
}
