/**
 * Stateful models (sequence batching) on both engines, main thread and Workers: several sequences
 * interleaved through NVIDIA's tritonclient (HTTP and gRPC, blocking and async, one gRPC stream)
 * and perf_analyzer --sequence-length; the errors (unknown sequence, a string ID where integers
 * are declared, a request after the end); the idle timeout freeing a slot for the next sequence;
 * implicit state and typed controls; a Worker that is killed or crashes mid-sequence.
 */

import assert from "node:assert/strict";
import {
  type BindOptions,
  type InferFunc,
  type NDArray,
  ndarray,
  sequenceOf,
  type TensorSpec,
  workers,
} from "../mod.ts";
import { ModelClient } from "../src/client/mod.ts";
import { runClient } from "../examples/accumulator/client.ts";
import {
  accumulate,
  accumulatorBatching,
  bindAccumulator,
  INPUTS,
  OUTPUTS,
} from "../examples/accumulator/model.ts";
import { ENGINES, PEERS_REQUIRED, startServer, watchdog } from "./_helpers.ts";
import { findPerfAnalyzer, PYTHON, runPerfAnalyzer } from "./_peers.ts";

const SCRIPT = new URL("./interop/sequence_client.py", import.meta.url).pathname;
const INSTANCE = new URL("../examples/accumulator/instance.ts", import.meta.url);
const CRASHING = new URL("./_workers/sequence_crash.ts", import.meta.url);
const PERF_ANALYZER = await findPerfAnalyzer(PYTHON);

interface Answer {
  status: number;
  body: { error?: string; outputs?: { name: string; data: number[] }[] };
}

/** One request of a sequence to `model` over HTTP/JSON. */
async function send(
  http: string,
  model: string,
  x: number,
  parameters: Record<string, unknown>,
): Promise<Answer> {
  const response = await fetch(`${http}/v2/models/${model}/infer`, {
    method: "POST",
    body: JSON.stringify({
      inputs: [{ name: "x", datatype: "INT32", shape: [1, 1], data: [x] }],
      parameters,
    }),
  });
  return { status: response.status, body: await response.json() };
}

/** The running total of a successful answer. */
function total(answer: Answer): number {
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return answer.body.outputs!.find((output) => output.name === "total")!.data[0]!;
}

/** The Accumulator with string correlation IDs (its CORRID control is BYTES). */
function stringIdModel(inferFunc: BindOptions["inferFunc"]): BindOptions {
  const batching = accumulatorBatching();
  return {
    modelName: "AccumulatorS",
    inferFunc,
    inputs: INPUTS,
    outputs: OUTPUTS,
    config: {
      maxBatchSize: 4,
      sequenceBatching: {
        ...batching,
        controls: { ...batching.controls, correlationId: { name: "CORRID", dtype: "bytes" } },
      },
    },
    strict: true,
  };
}

async function modelStats(http: string, model: string): Promise<Record<string, unknown>> {
  const response = await fetch(`${http}/v2/models/${model}/stats`);
  assert.equal(response.status, 200);
  return (await response.json()).model_stats[0];
}

/** host:port, as tritonclient takes a URL. */
function strip(url: string): string {
  return url.replace(/^\w+:\/\//, "");
}

/**
 * Sequence batching with Triton's implicit state: the engine hands each request its sequence's
 * `ACC` (zeros at the start) and keeps the `ACC_NEXT` it returns; START is an fp32 control whose
 * true is 2.5, END a bool control.
 */
const STATE_BATCHING = {
  controls: {
    start: { name: "START", dtype: "float32", falseTrue: [0, 2.5] },
    end: { name: "END", dtype: "bool" },
  },
  states: [{ inputName: "ACC", outputName: "ACC_NEXT", dtype: "int32", shape: [1] }],
} as const;

/**
 * The outputs of `implicitSum`, untyped (`TensorSpec[]`): the callable also returns the state
 * output `ACC_NEXT`, which is no declared output.
 */
const STATE_OUTPUTS: TensorSpec[] = [...OUTPUTS, { name: "flags", dtype: "float32", shape: [2] }];

/** Adds `x` to the implicit state and answers the total and the START and END controls. */
const implicitSum: InferFunc = (requests) =>
  requests.map((request) => {
    const next = (request.data.ACC!.data as Int32Array)[0]! +
      (request.data.x!.data as Int32Array)[0]!;
    const start = (request.data.START!.data as Float32Array)[0]!;
    const end = Number((request.data.END!.data as Uint8Array)[0]!);
    return {
      total: ndarray(Int32Array.of(next), [1, 1]),
      flags: ndarray(Float32Array.of(start, end), [1, 2]),
      ACC_NEXT: ndarray(Int32Array.of(next), [1, 1]),
    };
  });

/** The outputs of `batchView`: the sequence's total, and what the batch held. */
const BATCH_VIEW_OUTPUTS: TensorSpec[] = [...OUTPUTS, {
  name: "batch",
  dtype: "int32",
  shape: [2],
}];

/**
 * Answers each request with its batch's size and how many of its requests are ready, by the
 * READY control where it agrees with `request.sequence.ready` (else -1).
 */
const batchView: InferFunc = (requests) => {
  const flags = requests.map((request) => {
    const control = (request.data.READY!.data as Int32Array)[0]!;
    return control === Number(request.sequence!.ready) ? control : -1;
  });
  const ready = flags.includes(-1) ? -1 : flags.reduce((sum, flag) => sum + flag, 0);
  return requests.map(() => ({
    total: ndarray(Int32Array.of(0), [1, 1]),
    batch: ndarray(Int32Array.of(requests.length, ready), [1, 2]),
  }));
};

const UNKNOWN_4242 =
  "inference request for sequence 4242 to model 'Accumulator' must specify the START flag on the first request of the sequence";

for (const engine of ENGINES) {
  for (const where of ["main thread", "Workers"] as const) {
    // Both strategies on both kinds of instance, in two runs: direct on the main thread,
    // oldest in two Workers.
    const strategy = where === "main thread" ? "direct" : "oldest";
    const name =
      `tritonclient runs interleaved sequences on the ${engine} engine (${where}, ${strategy})`;
    Deno.test({
      name: PYTHON === undefined ? `${name} (skipped: no tritonclient)` : name,
      ignore: PYTHON === undefined && !PEERS_REQUIRED,
      async fn(): Promise<void> {
        assert.ok(PYTHON !== undefined, "python3 with tritonclient is required");
        await using triton = await startServer({ engine });
        const instances = where === "Workers" ? 2 : 0;
        await bindAccumulator(triton, { strategy, workers: instances });
        await triton.bind(
          stringIdModel(
            instances > 0 ? workers(INSTANCE, { count: instances }) : (accumulate as InferFunc),
          ),
        );
        const { code, stdout, stderr } = await new Deno.Command(PYTHON.python, {
          args: [
            "-B",
            SCRIPT,
            "--http",
            strip(triton.urls.http!),
            "--grpc",
            strip(triton.urls.grpc!),
          ],
          stdout: "piped",
          stderr: "piped",
          signal: AbortSignal.timeout(180_000),
        }).output();
        const decoder = new TextDecoder();
        assert.equal(code, 0, `sequence_client.py failed:\n${decoder.decode(stderr)}`);
        const out = JSON.parse(decoder.decode(stdout));
        const integers = {
          "1001": [1, 3, 6, 10],
          "9007199254740992": [10, 30, 60, 100],
          "9007199254740993": [100, 0, 7, 7],
        };
        const strings = { alpha: [5, 10, 15], beta: [-1, -3, -6] };
        for (const client of ["http", "http_sync", "grpc", "grpc_sync", "grpc_stream"]) {
          assert.deepEqual(out[client], integers, client);
          assert.deepEqual(out[`${client}_strings`], strings, `${client} with string IDs`);
        }
        assert.deepEqual(out.http_unknown, ["400", UNKNOWN_4242]);
        assert.deepEqual(out.grpc_unknown, ["StatusCode.INVALID_ARGUMENT", UNKNOWN_4242]);
        // gRPC's ModelConfig, as protobuf's JSON prints it (defaults left out: START is kind 0).
        assert.deepEqual(out.grpc_config, {
          max_sequence_idle_microseconds: "5000000",
          control_input: [
            { name: "START", control: [{ int32_false_true: [0, 1] }] },
            {
              name: "READY",
              control: [{ kind: "CONTROL_SEQUENCE_READY", int32_false_true: [0, 1] }],
            },
            {
              name: "CORRID",
              control: [{ kind: "CONTROL_SEQUENCE_CORRID", data_type: "TYPE_UINT64" }],
            },
          ],
          ...(strategy === "direct"
            ? { direct: {} }
            : { oldest: { preferred_batch_size: [4], max_queue_delay_microseconds: "100" } }),
        });
        // Every request of a client counts once; the direct strategy's padding does not.
        const stats = await modelStats(triton.urls.http!, "Accumulator");
        const inference = stats.inference_stats as Record<string, { count: number }>;
        assert.equal(Number(inference.success!.count), 5 * 12);
        assert.equal(Number(stats.inference_count), 5 * 12);
      },
    });
  }

  Deno.test(`sequence errors on the ${engine} engine, and the server keeps serving`, async () => {
    await using triton = await startServer({ engine });
    await bindAccumulator(triton);
    const http = triton.urls.http!;
    assert.deepEqual(await send(http, "Accumulator", 1, { sequence_id: 4242 }), {
      status: 400,
      body: { error: UNKNOWN_4242 },
    });
    assert.deepEqual(
      await send(http, "Accumulator", 1, { sequence_id: "s1", sequence_start: true }),
      {
        status: 400,
        body: {
          error:
            "sequence batching control 'CORRID' data-type is 'BYTES', but model 'Accumulator' expects 'UINT64'",
        },
      },
    );
    assert.deepEqual(await send(http, "Accumulator", 1, {}), {
      status: 400,
      body: {
        error:
          "inference request to model 'Accumulator' must specify a non-zero or non-empty correlation ID",
      },
    });
    assert.equal(
      total(await send(http, "Accumulator", 3, { sequence_id: 7, sequence_start: true })),
      3,
    );
    assert.equal(
      total(await send(http, "Accumulator", 4, { sequence_id: 7, sequence_end: true })),
      7,
    );
    // After its end, the sequence is unknown.
    assert.deepEqual(await send(http, "Accumulator", 5, { sequence_id: 7 }), {
      status: 400,
      body: {
        error:
          "inference request for sequence 7 to model 'Accumulator' must specify the START flag on the first request of the sequence",
      },
    });
    // A start on a running sequence starts it over.
    assert.equal(
      total(await send(http, "Accumulator", 2, { sequence_id: 8, sequence_start: true })),
      2,
    );
    assert.equal(total(await send(http, "Accumulator", 2, { sequence_id: 8 })), 4);
    assert.equal(
      total(await send(http, "Accumulator", 9, { sequence_id: 8, sequence_start: true })),
      9,
    );
    assert.equal(
      total(await send(http, "Accumulator", 1, { sequence_id: 8, sequence_end: true })),
      10,
    );
    assert.deepEqual(await runClient(http), {
      1001: [1, 3, 6, 10],
      1002: [10, 30, 60, 100],
      1003: [100, 0, 7, 7],
    });
  });

  Deno.test(`an idle sequence is ended and its slot reused on the ${engine} engine`, async () => {
    await using triton = await startServer({ engine });
    // One instance, maxBatchSize 1: one slot, so the second sequence waits for the first to go.
    await bindAccumulator(triton, { maxBatchSize: 1, maxSequenceIdleMicroseconds: 300_000 });
    const http = triton.urls.http!;
    assert.equal(
      total(await send(http, "Accumulator", 1, { sequence_id: 1, sequence_start: true })),
      1,
    );
    // Sequence 2 waits in the backlog until sequence 1 is ended for being idle. It is one request
    // (start and end): a sequence that was idle in the backlog is ended once its waiting requests
    // ran, on both engines (the core's reaper does so on its next round, whenever that is).
    const second = await watchdog(
      send(http, "Accumulator", 10, { sequence_id: 2, sequence_start: true, sequence_end: true }),
      "the second sequence to get the slot",
    );
    assert.equal(total(second), 10);
    assert.deepEqual(await send(http, "Accumulator", 1, { sequence_id: 1 }), {
      status: 400,
      body: {
        error:
          "inference request for sequence 1 to model 'Accumulator' must specify the START flag on the first request of the sequence",
      },
    });
    // The slot serves the next sequence as usual.
    assert.equal(
      total(await send(http, "Accumulator", 2, { sequence_id: 3, sequence_start: true })),
      2,
    );
    assert.equal(
      total(await send(http, "Accumulator", 5, { sequence_id: 3, sequence_end: true })),
      7,
    );
  });

  Deno.test(`a Worker that dies mid-sequence fails its sequences on the ${engine} engine`, async () => {
    const provider = workers(INSTANCE, { count: 1 });
    await using triton = await startServer({ engine });
    await triton.bind({
      modelName: "Accumulator",
      inferFunc: provider,
      inputs: INPUTS,
      outputs: OUTPUTS,
      config: { maxBatchSize: 4, sequenceBatching: accumulatorBatching() },
      strict: true,
    });
    const http = triton.urls.http!;
    assert.equal(
      total(await send(http, "Accumulator", 1, { sequence_id: 1, sequence_start: true })),
      1,
    );
    assert.equal(
      total(await send(http, "Accumulator", 2, { sequence_id: 2, sequence_start: true })),
      2,
    );
    provider.instances[0]!.kill();
    for (const id of [1, 2]) {
      const lost = await watchdog(
        send(http, "Accumulator", 1, { sequence_id: id }),
        "the request of a lost sequence",
      );
      assert.equal(lost.status, 503, JSON.stringify(lost.body));
      assert.match(
        lost.body.error!,
        new RegExp(
          `^Sequence ${id} of model 'Accumulator' was lost: instance 0 \\(cpu\\) .*; start it again \\(sequence_start\\)$`,
        ),
      );
    }
    // New sequences, and the lost ones started again, run on the restarted Worker.
    assert.equal(
      total(await send(http, "Accumulator", 5, { sequence_id: 3, sequence_start: true })),
      5,
    );
    assert.equal(
      total(await send(http, "Accumulator", 7, { sequence_id: 1, sequence_start: true })),
      7,
    );
    assert.equal(
      total(await send(http, "Accumulator", 1, { sequence_id: 3, sequence_end: true })),
      6,
    );
    assert.equal(
      total(await send(http, "Accumulator", 1, { sequence_id: 1, sequence_end: true })),
      8,
    );
  });

  Deno.test(`a Worker that crashes mid-batch fails its sequences on the ${engine} engine`, async () => {
    await using triton = await startServer({ engine });
    await triton.bind({
      modelName: "Accumulator",
      inferFunc: workers(CRASHING, { count: 1 }),
      inputs: INPUTS,
      outputs: OUTPUTS,
      config: { maxBatchSize: 4, sequenceBatching: accumulatorBatching() },
      strict: true,
    });
    const http = triton.urls.http!;
    assert.equal(
      total(await send(http, "Accumulator", 1, { sequence_id: 1, sequence_start: true })),
      1,
    );
    assert.equal(
      total(await send(http, "Accumulator", 2, { sequence_id: 2, sequence_start: true })),
      2,
    );
    const crashed = await watchdog(
      send(http, "Accumulator", -1, { sequence_id: 1 }),
      "the request that crashes the Worker",
    );
    assert.notEqual(crashed.status, 200);
    assert.match(crashed.body.error!, /Instance 0 \(cpu\) of model 'Accumulator' crashed: .*boom/);
    const lost = await watchdog(
      send(http, "Accumulator", 1, { sequence_id: 2 }),
      "the request of the other sequence",
    );
    assert.equal(lost.status, 503, JSON.stringify(lost.body));
    assert.match(
      lost.body.error!,
      /^Sequence 2 of model 'Accumulator' was lost: instance 0 \(cpu\) crashed: .*boom.*; start it again \(sequence_start\)$/,
    );
    assert.equal(
      total(await send(http, "Accumulator", 4, { sequence_id: 2, sequence_start: true })),
      4,
    );
    assert.equal(
      total(await send(http, "Accumulator", 1, { sequence_id: 2, sequence_end: true })),
      5,
    );
  });

  Deno.test(`a decoupled model keeps its sequences' state over gRPC streams on the ${engine} engine`, async () => {
    await using triton = await startServer({ engine });
    await triton.bind({
      modelName: "Steps",
      inputs: INPUTS,
      outputs: OUTPUTS,
      config: { decoupled: true, sequenceBatching: accumulatorBatching() },
      // Two responses per request: the running total, then ten times it (for every request of
      // the batch at once; the direct strategy's padding adds nothing).
      inferFunc: async function* (requests): AsyncGenerator<{ total: NDArray<"int32"> }[]> {
        const totals = requests.map((request) => {
          const sequence = sequenceOf<number>(request);
          const total = sequence.ready ? (sequence.state ?? 0) + request.x.data[0]! : 0;
          sequence.state = total;
          return total;
        });
        for (const factor of [1, 10]) {
          yield totals.map((total) => ({ total: ndarray(Int32Array.of(total * factor), [1, 1]) }));
        }
      },
    });
    await using client = new ModelClient(triton.urls.grpc!, "Steps", { initTimeoutS: 30 });
    const run = async (id: number, values: number[]): Promise<number[]> => {
      const seen: number[] = [];
      for (const [index, x] of values.entries()) {
        const parameters = {
          sequence_id: id,
          sequence_start: index === 0,
          sequence_end: index === values.length - 1,
        };
        const stream = client.inferStream({ x: ndarray(Int32Array.of(x), [1]) }, {
          parameters,
        });
        for await (const { total } of stream) seen.push(Number(total!.data[0]));
      }
      return seen;
    };
    assert.deepEqual(await Promise.all([run(5, [1, 2, 3]), run(6, [10, 20])]), [
      [1, 10, 3, 30, 6, 60],
      [10, 100, 30, 300],
    ]);
  });

  Deno.test(`the direct strategy pads a batch up to its last busy slot on the ${engine} engine`, async () => {
    await using triton = await startServer({ engine });
    for (const strategy of ["direct", "oldest"] as const) {
      await triton.bind({
        modelName: `Slots_${strategy}`,
        inferFunc: batchView,
        inputs: INPUTS,
        outputs: BATCH_VIEW_OUTPUTS,
        config: {
          maxBatchSize: 2,
          sequenceBatching: { strategy, controls: { ready: { name: "READY" } } },
        },
        strict: true,
      });
    }
    const http = triton.urls.http!;
    // One request at a time: sequence 1 takes slot 0, sequence 2 slot 1. With `direct`, a batch
    // holds the slots up to the last one with a request, the others padded with not-ready
    // requests; `oldest` batches only requests.
    const order: [number, Record<string, boolean>][] = [
      [1, { sequence_start: true }],
      [2, { sequence_start: true }],
      [1, {}],
      [2, {}],
      [2, { sequence_end: true }],
      [1, { sequence_end: true }],
    ];
    for (const strategy of ["direct", "oldest"] as const) {
      const seen: number[][] = [];
      for (const [id, flags] of order) {
        const answer = await send(http, `Slots_${strategy}`, id, { sequence_id: id, ...flags });
        assert.equal(answer.status, 200, JSON.stringify(answer.body));
        seen.push(answer.body.outputs!.find((output) => output.name === "batch")!.data);
      }
      // [requests in the batch, of which ready (READY control and sequence.ready agree)].
      assert.deepEqual(
        seen,
        strategy === "direct"
          ? [[1, 1], [2, 1], [1, 1], [2, 1], [2, 1], [1, 1]]
          : [[1, 1], [1, 1], [1, 1], [1, 1], [1, 1], [1, 1]],
        strategy,
      );
      const stats = await modelStats(http, `Slots_${strategy}`);
      // As Triton counts them: each request of a client once (inference_count, successes), each
      // batch once by its size with the padding (batch_stats).
      assert.deepEqual(
        [
          stats.inference_count,
          stats.execution_count,
          Number((stats.inference_stats as Record<string, { count: number }>).success!.count),
          (stats.batch_stats as { batch_size: number; compute_infer: { count: number } }[])
            .map((entry) => [entry.batch_size, Number(entry.compute_infer.count)]),
        ],
        [6, 6, 6, strategy === "direct" ? [[1, 3], [2, 3]] : [[1, 6]]],
      );
      const metrics = await (await fetch(`${triton.urls.metrics}/metrics`)).text();
      for (const name of ["nv_inference_count", "nv_inference_exec_count"]) {
        assert.ok(
          metrics.includes(`${name}{model="Slots_${strategy}",version="1"} 6\n`),
          `${name} of Slots_${strategy}:\n${metrics}`,
        );
      }
    }
  });

  Deno.test(`implicit state and typed controls on the ${engine} engine`, async () => {
    await using triton = await startServer({ engine });
    for (const strategy of ["direct", "oldest"] as const) {
      await triton.bind({
        modelName: `State_${strategy}`,
        inferFunc: implicitSum,
        inputs: INPUTS,
        outputs: STATE_OUTPUTS,
        config: { maxBatchSize: 2, sequenceBatching: { ...STATE_BATCHING, strategy } },
        strict: true,
      });
    }
    const http = triton.urls.http!;
    for (const strategy of ["direct", "oldest"] as const) {
      const model = `State_${strategy}`;
      const step = (values: [number, number], parameters: Record<string, unknown>) =>
        Promise.all(
          [1, 2].map(async (id, index) => {
            const answer = await send(http, model, values[index]!, {
              sequence_id: id,
              ...parameters,
            });
            const flags = answer.body.outputs?.find((output) => output.name === "flags")?.data;
            return [total(answer), ...flags!];
          }),
        );
      // [total, START, END] per sequence: START is 2.5 when true (fp32), END 1 (bool).
      assert.deepEqual(await step([1, 10], { sequence_start: true }), [[1, 2.5, 0], [10, 2.5, 0]]);
      assert.deepEqual(await step([2, 20], {}), [[3, 0, 0], [30, 0, 0]]);
      assert.deepEqual(await step([3, 30], { sequence_end: true }), [[6, 0, 1], [60, 0, 1]]);
      // Started again, a sequence's state starts from zeros.
      assert.deepEqual(await step([4, 40], { sequence_start: true }), [[4, 2.5, 0], [40, 2.5, 0]]);
      const config = await (await fetch(`${http}/v2/models/${model}/config`)).json();
      assert.deepEqual(config.sequence_batching, {
        ...(strategy === "direct"
          ? { direct: { max_queue_delay_microseconds: 0, minimum_slot_utilization: 0 } }
          : {
            oldest: {
              max_candidate_sequences: 0,
              preferred_batch_size: [2],
              max_queue_delay_microseconds: 0,
              preserve_ordering: false,
            },
          }),
        max_sequence_idle_microseconds: 1000000,
        control_input: [
          {
            name: "START",
            control: [{
              kind: "CONTROL_SEQUENCE_START",
              int32_false_true: [],
              fp32_false_true: [0, 2.5],
              bool_false_true: [],
              data_type: "TYPE_INVALID",
            }],
          },
          {
            name: "END",
            control: [{
              kind: "CONTROL_SEQUENCE_END",
              int32_false_true: [],
              fp32_false_true: [],
              bool_false_true: [false, true],
              data_type: "TYPE_INVALID",
            }],
          },
        ],
        state: [{
          input_name: "ACC",
          output_name: "ACC_NEXT",
          data_type: "TYPE_INT32",
          dims: [1],
          initial_state: [{ data_type: "TYPE_INT32", dims: ["1"], name: "zero", zero_data: true }],
          use_same_buffer_for_input_output: false,
          use_growable_memory: false,
        }],
        iterative_sequence: false,
      });
    }
  });

  for (const protocol of ["http", "grpc"] as const) {
    const missing = "missing" in PERF_ANALYZER ? PERF_ANALYZER.missing : undefined;
    const name = `perf_analyzer --sequence-length -i ${protocol} on the ${engine} engine`;
    Deno.test({
      name: missing === undefined ? name : `${name} (skipped: ${missing})`,
      ignore: missing !== undefined && !PEERS_REQUIRED,
      async fn(): Promise<void> {
        if ("missing" in PERF_ANALYZER) assert.fail(`perf_analyzer is required: ${missing}`);
        await using triton = await startServer({ engine });
        await bindAccumulator(triton);
        const url = protocol === "http" ? triton.urls.http! : triton.urls.grpc!;
        await runPerfAnalyzer(PERF_ANALYZER, [
          "-m",
          "Accumulator",
          "-u",
          url.replace(/^\w+:\/\//, ""),
          "-i",
          protocol,
          "--sequence-length",
          "4",
          // Blocking calls: with asynchronous ones, perf_analyzer ends its open sequences when a
          // level stops by sending their end requests while their previous requests may still
          // be on their way (over HTTP, on other connections), and an end that overtakes its
          // sequence's start is refused, as Triton refuses it (seen once in 5 runs on the
          // built-in engine: "Thread [0] had error: inference request for sequence 8163 ...
          // must specify the START flag"). In sync mode each thread ends its sequences itself,
          // after its last answer.
          "--sync",
        ], { maxConcurrency: 2, maxTrials: 20, stabilityPercentage: 100 });
        const stats = await modelStats(triton.urls.http!, "Accumulator");
        const inference = stats.inference_stats as Record<string, { count: number }>;
        assert.ok(Number(inference.success!.count) >= 2 * 50);
        assert.equal(Number(inference.fail!.count), 0);
      },
    });
  }
}
