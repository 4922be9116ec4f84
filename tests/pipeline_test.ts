/**
 * Pipelines on both engines: a callable calling other models of its server (`context.infer`,
 * `context.inferStream`), on the main thread and in a Worker, and ensembles: results, the inner
 * model's statistics and the parent it sees, errors naming the inner model or the failing step,
 * cancellation reaching the inner request, a call cycle refused, independent steps at once, the
 * ensemble's config as Triton shows it, and NVIDIA's Python clients calling an ensemble over HTTP
 * and gRPC (`interop/ensemble_client.py`; skipped without them unless peers are required).
 *
 * @module
 */

import assert from "node:assert/strict";
import { ensemble, ensembleStep, workers } from "../mod.ts";
import { ENGINES, PEERS_REQUIRED, startServer, watchdog } from "./_helpers.ts";
import {
  callerFunc,
  counter,
  double,
  echo,
  left,
  mul,
  plus1,
  right,
  same,
  seen,
  slow,
  VECTOR,
} from "./_pipeline_models.ts";

const SCRIPT = new URL("./interop/ensemble_client.py", import.meta.url).pathname;
const CALLER = new URL("./_workers/caller.ts", import.meta.url);

async function tritonclientAvailable(): Promise<boolean> {
  try {
    const { success } = await new Deno.Command("python3", {
      args: ["-c", "import tritonclient.grpc, tritonclient.http"],
      stdout: "null",
      stderr: "null",
      signal: AbortSignal.timeout(60_000),
    }).output();
    return success;
  } catch {
    return false;
  }
}

const PYTHON = await tritonclientAvailable();

const X = [{ name: "x", dtype: "float32", shape: [-1] }] as const;
const Y = [{ name: "y", dtype: "float32", shape: [-1] }] as const;

/** y = 2x * (x + 1): Double and Plus1 read x, Mul joins them. */
const chain = ensemble({
  modelName: "Chain",
  maxBatchSize: 4,
  inputs: X,
  outputs: Y,
  steps: [
    ensembleStep(double, { inputMap: { v: "x" }, outputMap: { v: "d" } }),
    ensembleStep(plus1, { inputMap: { v: "x" }, outputMap: { v: "p" } }),
    ensembleStep(mul, { inputMap: { a: "d", b: "p" }, outputMap: { v: "y" } }),
  ],
});

/** Two independent steps, which must run at once (each waits for the other to start). */
const both = ensemble({
  modelName: "Both",
  maxBatchSize: 4,
  inputs: X,
  outputs: [{ name: "l", dtype: "float32", shape: [-1] }, {
    name: "r",
    dtype: "float32",
    shape: [-1],
  }],
  steps: [
    ensembleStep(left, { inputMap: { v: "x" }, outputMap: { v: "l" } }),
    ensembleStep(right, { inputMap: { v: "x" }, outputMap: { v: "r" } }),
  ],
});

/** Slow as the one step of an ensemble: cancelling the ensemble's request cancels the step's. */
const slowly = ensemble({
  modelName: "Slowly",
  maxBatchSize: 4,
  inputs: X,
  outputs: Y,
  steps: [ensembleStep(slow, { inputMap: { v: "x" }, outputMap: { v: "y" } })],
});

/** The ensemble's config as the Triton core shows it (both engines answer this). */
const CHAIN_CONFIG = {
  name: "Chain",
  platform: "ensemble",
  backend: "",
  runtime: "",
  version_policy: { specific: { versions: [1] } },
  max_batch_size: 4,
  input: [{
    name: "x",
    data_type: "TYPE_FP32",
    format: "FORMAT_NONE",
    dims: [-1],
    is_shape_tensor: false,
    allow_ragged_batch: false,
    optional: false,
    is_non_linear_format_io: false,
  }],
  output: [{
    name: "y",
    data_type: "TYPE_FP32",
    dims: [-1],
    label_filename: "",
    is_shape_tensor: false,
    is_non_linear_format_io: false,
  }],
  batch_input: [],
  batch_output: [],
  ensemble_scheduling: {
    step: [
      { model_name: "Double", model_version: -1, input_map: { v: "x" }, output_map: { v: "d" } },
      { model_name: "Plus1", model_version: -1, input_map: { v: "x" }, output_map: { v: "p" } },
      {
        model_name: "Mul",
        model_version: -1,
        input_map: { a: "d", b: "p" },
        output_map: { v: "y" },
      },
    ].map((step) => ({ ...step, model_namespace: "" })),
  },
  instance_group: [],
  default_model_filename: "",
  cc_model_filenames: {},
  metric_tags: {},
  parameters: {},
  model_warmup: [],
  model_transaction_policy: { decoupled: false },
};

async function post(
  url: string,
  model: string,
  body: unknown,
  signal?: AbortSignal,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`${url}/v2/models/${model}/infer`, {
    method: "POST",
    body: JSON.stringify(body),
    ...(signal === undefined ? {} : { signal }),
  });
  return { status: response.status, json: await response.json() };
}

function vectorBody(
  data: number[],
  parameters: Record<string, unknown> = {},
  name = "v",
): Record<string, unknown> {
  return { parameters, inputs: [{ name, datatype: "FP32", shape: [1, data.length], data }] };
}

function outputOf(json: Record<string, unknown>, index = 0): unknown {
  return (json.outputs as { data: unknown }[])[index]!.data;
}

async function inferenceCount(url: string, model: string): Promise<number> {
  const response = await fetch(`${url}/v2/models/${model}/stats`);
  const body = await response.json();
  return body.model_stats[0].inference_count;
}

for (const engine of ENGINES) {
  Deno.test(`pipelines: calls between models and ensembles [${engine}]`, async (t) => {
    seen.parents.length = 0;
    seen.overlapped.length = 0;
    seen.started = 0;
    await using triton = await startServer({
      engine,
      config: { allowMetrics: false, logVerbose: 0 },
      models: [
        double,
        plus1,
        mul,
        counter,
        slow,
        left,
        right,
        echo,
        same,
        { modelName: "CallerMain", inferFunc: callerFunc(), inputs: VECTOR, outputs: VECTOR },
        {
          modelName: "CallerWorker",
          inferFunc: workers(CALLER, { count: 1 }),
          inputs: VECTOR,
          outputs: VECTOR,
        },
        { modelName: "CycleA", inferFunc: callerFunc("CycleB"), inputs: VECTOR, outputs: VECTOR },
        { modelName: "CycleB", inferFunc: callerFunc("CycleA"), inputs: VECTOR, outputs: VECTOR },
        chain,
        both,
        slowly,
      ],
    });
    const url = triton.urls.http!;

    await t.step("a callable calls a model, on the main thread and in a Worker", async () => {
      for (const caller of ["CallerMain", "CallerWorker"]) {
        const { status, json } = await post(url, caller, vectorBody([1, 2]));
        assert.equal(status, 200, JSON.stringify(json));
        // Double's 2v, plus the caller's own v (still its own after the call).
        assert.deepEqual(outputOf(json), [3, 6]);
      }
      // Each call went through Double's scheduler: its statistics count them.
      assert.equal(await inferenceCount(url, "Double"), 2);
      // And Double saw who called.
      assert.deepEqual(
        seen.parents,
        ["CallerMain", "CallerWorker"].map((model) => {
          const frame = { model, version: 1, instance: 0 };
          return { ...frame, ensemble: false, waiting: [frame] };
        }),
      );
    });

    await t.step("a callable streams from a decoupled model", async () => {
      for (const caller of ["CallerMain", "CallerWorker"]) {
        const { status, json } = await post(
          url,
          caller,
          vectorBody([3], { target: "Counter", stream: true }),
        );
        assert.equal(status, 200, JSON.stringify(json));
        assert.deepEqual(outputOf(json), [0, 1, 2]);
      }
    });

    await t.step("an inner error names the inner model", async () => {
      for (const caller of ["CallerMain", "CallerWorker"]) {
        const { status, json } = await post(url, caller, vectorBody([99, 1]));
        assert.equal(status, 500);
        assert.deepEqual(json, { error: "Call to model 'Double' failed: Error: boom" });
      }
    });

    await t.step("cancelling the outer request cancels the inner one", async () => {
      for (const caller of ["CallerMain", "CallerWorker"]) {
        seen.slowStarted = Promise.withResolvers();
        seen.slowCancelled = Promise.withResolvers();
        const client = new AbortController();
        const request = post(url, caller, vectorBody([1], { target: "Slow" }), client.signal);
        await watchdog(seen.slowStarted.promise, `${caller}'s call to Slow`, 20_000);
        client.abort();
        await assert.rejects(request);
        await watchdog(seen.slowCancelled.promise, `Slow's cancellation (${caller})`, 20_000);
      }
    });

    await t.step("cancelling an ensemble's request cancels its running step", async () => {
      seen.slowStarted = Promise.withResolvers();
      seen.slowCancelled = Promise.withResolvers();
      const client = new AbortController();
      const request = post(url, "Slowly", vectorBody([1], {}, "x"), client.signal);
      await watchdog(seen.slowStarted.promise, "the ensemble's step on Slow", 20_000);
      client.abort();
      await assert.rejects(request);
      await watchdog(seen.slowCancelled.promise, "the step's cancellation", 20_000);
    });

    await t.step("a call cycle with no free instance is refused", async () => {
      // Bounded: without the refusal the call would wait forever.
      const { status, json } = await post(
        url,
        "CycleA",
        vectorBody([1]),
        AbortSignal.timeout(20_000),
      ).catch((error) => {
        throw new Error("the cycle was not refused within 20 s: it hangs", { cause: error });
      });
      assert.equal(status, 503);
      assert.deepEqual(json, {
        error:
          "Call to model 'CycleB' failed: Call to model 'CycleA' failed: Cannot call model 'CycleA' from model 'CycleB': its 1 instance waits for this call (CycleA → CycleB → CycleA), so the call would never run",
      });
    });

    await t.step("an ensemble chains its steps, shows as Triton shows one", async () => {
      const { status, json } = await post(url, "Chain", vectorBody([1, 2], {}, "x"));
      assert.equal(status, 200, JSON.stringify(json));
      assert.deepEqual(outputOf(json), [4, 12]);
      const config = await (await fetch(`${url}/v2/models/Chain/config`)).json();
      assert.deepEqual(config, CHAIN_CONFIG);
      const metadata = await (await fetch(`${url}/v2/models/Chain`)).json();
      assert.deepEqual(metadata, {
        name: "Chain",
        versions: ["1"],
        platform: "ensemble",
        inputs: [{ name: "x", datatype: "FP32", shape: [-1, -1] }],
        outputs: [{ name: "y", datatype: "FP32", shape: [-1, -1] }],
      });
    });

    await t.step("a failing step fails the request, naming the step", async () => {
      const { status, json } = await post(url, "Chain", vectorBody([99, 2], {}, "x"));
      assert.equal(status, 500);
      assert.deepEqual(json, { error: "in ensemble 'Chain', model 'Double' failed: Error: boom" });
    });

    await t.step("independent steps run at once", async () => {
      const { status, json } = await post(url, "Both", vectorBody([5], {}, "x"));
      assert.equal(status, 200, JSON.stringify(json));
      assert.deepEqual([outputOf(json, 0), outputOf(json, 1)], [[5], [5]]);
      assert.deepEqual(seen.overlapped, [true, true]);
    });

    await t.step("on the main thread a call's outputs are the callee's arrays", async () => {
      const { status, json } = await post(url, "Same", vectorBody([1, 2]));
      assert.equal(status, 200, JSON.stringify(json));
      // The built-in engine hands the callee's output to the caller as it is; the core's
      // response is read out of the core's memory into arrays of the caller's.
      assert.deepEqual(outputOf(json), engine === "builtin" ? [1, 1] : [0, 0]);
    });

    await t.step("an ensemble that does not fit its steps' models is refused", async () => {
      const x2 = [{ name: "x2", dtype: "float32", shape: [-1] }] as const;
      const cases = [
        [
          "Bad",
          0,
          [{ model: "Missing", inputMap: { v: "x" }, outputMap: { v: "x2" } }],
          "ensemble Bad contains models that are not available or ambiguous: Missing",
        ],
        [
          "Bad",
          0,
          [{ model: "Double", inputMap: { w: "x" }, outputMap: { v: "x2" } }],
          "in ensemble Bad, ensemble tensor x is mapping to non-existing input w in model Double",
        ],
        [
          "Bad",
          0,
          [{ model: "Double", inputMap: { v: "x" }, outputMap: { u: "x2" } }],
          "in ensemble Bad, ensemble tensor x2 is mapped from non-existing output u in model Double",
        ],
        [
          "Big",
          8,
          [{ model: "Double", inputMap: { v: "x" }, outputMap: { v: "x2" } }],
          "ensemble Big allows maximum batch size 8, but it contains model Double which only allows maximum batch size to be 4",
        ],
      ] as const;
      for (const [name, maxBatchSize, steps, why] of cases) {
        await assert.rejects(
          triton.bind(ensemble({ modelName: name, maxBatchSize, inputs: X, outputs: x2, steps })),
          {
            name: "InferenceError",
            message:
              `Failed to load model '${name}' version 1: load failed for model '${name}': ${why}`,
          },
        );
      }
      // A decoupled step: the core would answer with its first response alone.
      await assert.rejects(
        triton.bind(ensemble({
          modelName: "Dec",
          inputs: X,
          outputs: x2,
          steps: [{ model: "Counter", inputMap: { v: "x" }, outputMap: { v: "x2" } }],
        })),
        {
          name: "InferenceError",
          message:
            "Failed to load model 'Dec' version 1: in ensemble Dec, step of model Counter is decoupled, which DenoTriton's ensembles do not run (call it from a callable with context.inferStream)",
        },
      );
      // The server goes on serving the ensemble that loaded.
      const { status, json } = await post(url, "Chain", vectorBody([1, 2], {}, "x"));
      assert.equal(status, 200, JSON.stringify(json));
      assert.deepEqual(outputOf(json), [4, 12]);
    });

    await t.step("the ensemble's statistics count its requests", async () => {
      const counts = async (): Promise<Record<string, unknown>> => {
        const body = await (await fetch(`${url}/v2/models/Chain/stats`)).json();
        const stats = body.model_stats[0];
        return {
          inference: stats.inference_count,
          execution: stats.execution_count,
          success: stats.inference_stats.success.count,
          fail: stats.inference_stats.fail.count,
          batches: stats.batch_stats.map((
            batch: { batch_size: number; compute_infer: { count: number } },
          ) => [batch.batch_size, batch.compute_infer.count]),
        };
      };
      // Two chained requests, and the failing one a failure. The core counts that failure once or
      // twice (seen both ways in runs of this test; probably as Plus1, the step beside the failing
      // Double, answers before or after the failure). The built-in engine counts it once.
      const seenCounts = await counts();
      const fail = seenCounts.fail as number;
      assert.ok(engine === "builtin" ? fail === 1 : fail === 1 || fail === 2, `fail count ${fail}`);
      assert.deepEqual({ ...seenCounts, fail: 0 }, {
        inference: 2,
        execution: 2,
        success: 2,
        fail: 0,
        batches: [[1, 2]],
      });
    });

    await t.step({
      name: "tritonclient calls the ensemble over HTTP and gRPC",
      ignore: !PYTHON && !PEERS_REQUIRED,
      fn: async () => {
        assert.ok(PYTHON, "python3 with tritonclient[http,grpc] is required");
        const { code, stdout, stderr } = await new Deno.Command("python3", {
          args: [
            "-B",
            SCRIPT,
            "--http",
            url.replace("http://", ""),
            "--grpc",
            triton.urls.grpc!.replace("grpc://", ""),
          ],
          stdout: "piped",
          stderr: "piped",
          signal: AbortSignal.timeout(120_000),
        }).output();
        const out = new TextDecoder().decode(stdout);
        assert.equal(
          code,
          0,
          `ensemble_client.py failed:\n${out}\n${new TextDecoder().decode(stderr)}`,
        );
        assert.match(out, /all checks passed/);
      },
    });
  });
}
