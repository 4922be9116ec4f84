/**
 * System shared memory (the KServe v2 extension) end to end, on both engines:
 *
 * - `tests/interop/shared_memory_client.py` drives the server with `tritonclient`'s own
 *   `shared_memory` module over HTTP and gRPC: register/status/unregister, inputs and outputs in
 *   regions, a callable that writes into its input (the client sees the write: a view, not a
 *   copy), the bad-input cases with Triton's status and message, and a region the client
 *   truncates after registering it;
 * - a region unregistered while a request uses it stays mapped until that request is answered;
 * - a region whose object the client shrinks (before a request, or while one runs) is refused
 *   with 400 / INVALID_ARGUMENT naming it, over HTTP and gRPC, and the server serves on (a read
 *   or write past the object's end would raise SIGBUS and end the process);
 * - 100 register/unregister cycles leave no mapping and no descriptor behind;
 * - `perf_analyzer --shared-memory system` over HTTP and gRPC, with zero failures.
 */

import * as grpc from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { bindAddSub } from "../examples/add_sub/model.ts";
import { type BindOptions, workers } from "../mod.ts";
import { codecs, type ModelInferRequest } from "../src/protocol/grpc_codec.ts";
import { ENGINES, PEERS_REQUIRED, startServer, watchdog } from "./_helpers.ts";
import { rejectsWith, TestGrpcClient } from "./grpc_test_client.ts";
import { slowModel } from "./_models.ts";
import { findPerfAnalyzer, PYTHON, runPerfAnalyzer } from "./_peers.ts";

const SCRIPT = new URL("./interop/shared_memory_client.py", import.meta.url).pathname;
const PERF_ANALYZER = await findPerfAnalyzer(PYTHON);

const SCRIBBLE = new URL("./_workers/scribble.ts", import.meta.url);

/**
 * `Scribble` (main thread) and `ScribbleWorker` (one Worker): write 42 into `INPUT[0]` and
 * answer the value they replaced, as `OUTPUT` [1] (`tests/_workers/scribble.ts`).
 *
 * @returns The bind options of both.
 */
async function scribbleModels(): Promise<BindOptions[]> {
  const { default: factory } = await import(SCRIBBLE.href);
  const common = {
    inputs: [{ name: "INPUT", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "OUTPUT", dtype: "float32", shape: [1] }],
  } as const;
  return [
    { modelName: "Scribble", inferFunc: factory(), ...common },
    { modelName: "ScribbleWorker", inferFunc: workers(SCRIBBLE, { count: 1 }), ...common },
  ];
}

/** Lines of /proc/self/maps that map the given /dev/shm object. */
function mappingsOf(key: string): number {
  return Deno.readTextFileSync("/proc/self/maps").split("\n").filter((line) =>
    line.includes(`/dev/shm/${key.replace(/^\//, "")}`)
  ).length;
}

function openDescriptors(): number {
  return [...Deno.readDirSync("/proc/self/fd")].length;
}

/** Makes a /dev/shm object of `bytes`, removed by the returned function. */
function shmObject(key: string, bytes: Uint8Array): () => void {
  const path = `/dev/shm/${key.replace(/^\//, "")}`;
  Deno.writeFileSync(path, bytes);
  return () => Deno.removeSync(path);
}

async function post(url: string, body?: unknown): Promise<Response> {
  return await fetch(url, {
    method: "POST",
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

const unique = `${Deno.pid}_${Date.now().toString(36)}`;

for (const engine of ENGINES) {
  for (const protocol of ["http", "grpc"] as const) {
    const name = `tritonclient shared memory over ${protocol} on the ${engine} engine`;
    Deno.test({
      name: PYTHON ? name : `${name} (skipped: no python3 with tritonclient)`,
      ignore: PYTHON === undefined && !PEERS_REQUIRED,
      async fn(t): Promise<void> {
        assert.ok(PYTHON, "python3 with tritonclient is required but was not found");
        await using triton = await startServer({ engine, models: await scribbleModels() });
        await bindAddSub(triton);
        const url = protocol === "http" ? triton.urls.http : triton.urls.grpc;
        assert.ok(url !== undefined, `The server has no ${protocol} URL`);
        const result = await watchdog(
          new Deno.Command(PYTHON.python, {
            args: [
              SCRIPT,
              "--protocol",
              protocol,
              "--url",
              url.replace(/^\w+:\/\//, ""),
              "--tag",
              `${unique}_${engine}_${protocol}`,
            ],
            stdout: "piped",
            stderr: "piped",
            signal: AbortSignal.timeout(120_000),
          }).output(),
          "the shared memory client script",
          130_000,
        );
        const decoder = new TextDecoder();
        const stdout = decoder.decode(result.stdout);
        const stderr = decoder.decode(result.stderr);
        const scenarios = [...stdout.matchAll(/^(PASS|FAIL) (\w+)(?:: (.*))?$/gm)];
        for (const [, verdict, scenario, detail] of scenarios) {
          await t.step(scenario!, () => {
            assert.equal(verdict, "PASS", `${detail}\n${stdout}`);
          });
        }
        assert.match(
          stdout,
          new RegExp(`^interop shm ${protocol}: 6 passed, 0 failed$`, "m"),
          `${stdout}\n${stderr}`,
        );
        assert.equal(result.code, 0, `${stdout}\n${stderr}`);
        // Every region the script registered is gone (unmapped) once it is done.
        assert.equal(mappingsOf(`dt_${unique}_${engine}_${protocol}`), 0);
      },
    });
  }
}

for (const engine of ENGINES) {
  Deno.test(`Unregistering a region in use unmaps it after the request [${engine}]`, async () => {
    await using triton = await startServer({ engine, models: [slowModel(300)] });
    const http = triton.urls.http!;
    const key = `/dt_${unique}_inuse_${engine}`;
    const values = new Float32Array([1, 2, 3, 4]);
    const remove = shmObject(key, new Uint8Array(values.buffer));
    try {
      const register = await post(`${http}/v2/systemsharedmemory/region/inuse/register`, {
        key,
        offset: 0,
        byte_size: 16,
      });
      assert.equal(register.status, 200, await register.text());
      assert.equal(mappingsOf(key), 1);
      const inflight = post(`${http}/v2/models/Slow/infer`, {
        inputs: [{
          name: "x",
          datatype: "FP32",
          shape: [1, 4],
          parameters: { shared_memory_region: "inuse", shared_memory_byte_size: 16 },
        }],
        outputs: [{ name: "y", parameters: { binary_data: false } }],
      });
      // Let the request reach the model, then unregister under it.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const unregister = await post(`${http}/v2/systemsharedmemory/region/inuse/unregister`);
      assert.equal(unregister.status, 200);
      await unregister.body?.cancel();
      // Gone from the registry at once, still mapped for the request in flight.
      const status = await fetch(`${http}/v2/systemsharedmemory/status`);
      assert.deepEqual(await status.json(), []);
      assert.equal(mappingsOf(key), 1);
      const response = await watchdog(inflight, "the request in flight");
      assert.equal(response.status, 200);
      const body = await response.json();
      assert.deepEqual(body.outputs[0].data, [1, 2, 3, 4]);
      assert.equal(mappingsOf(key), 0);
      // A new request naming it is refused; the server keeps serving.
      const late = await post(`${http}/v2/models/Slow/infer`, {
        inputs: [{
          name: "x",
          datatype: "FP32",
          shape: [1, 4],
          parameters: { shared_memory_region: "inuse", shared_memory_byte_size: 16 },
        }],
      });
      assert.equal(late.status, 404);
      assert.deepEqual(await late.json(), {
        error: "Unable to find shared memory region: 'inuse'",
      });
    } finally {
      remove();
    }
  });

  Deno.test(`100 register/unregister cycles leave nothing mapped or open [${engine}]`, async () => {
    await using triton = await startServer({ engine });
    const http = triton.urls.http!;
    const key = `/dt_${unique}_cycles_${engine}`;
    const remove = shmObject(key, new Uint8Array(1 << 20));
    try {
      // One cycle first, so lazily opened libraries and sockets are in the baseline.
      const cycle = async (): Promise<void> => {
        const register = await post(`${http}/v2/systemsharedmemory/region/cycle/register`, {
          key,
          byte_size: 1 << 20,
        });
        assert.equal(register.status, 200, await register.text());
        const unregister = await post(`${http}/v2/systemsharedmemory/region/cycle/unregister`);
        assert.equal(unregister.status, 200);
        await unregister.body?.cancel();
      };
      await cycle();
      const descriptors = openDescriptors();
      for (let i = 0; i < 100; i++) await cycle();
      assert.equal(mappingsOf(key), 0);
      // Keep-alive sockets may come and go; a leak would add one descriptor per cycle.
      assert.ok(
        openDescriptors() <= descriptors + 2,
        `descriptors: ${descriptors} before, ${openDescriptors()} after`,
      );
    } finally {
      remove();
    }
  });
}

/** What a shrunk region is answered with (`SystemRegion`), over HTTP and gRPC alike. */
function shrunk(name: string, key: string, byteSize: number): string {
  return `Invalid shared memory region: '${name}': '${key}' shrank below offset 0 + byte_size ${byteSize} since it was registered`;
}

/** An inference of `Slow` with `x` in region `region`, or inline, and `y` in `into`, or not. */
function slowRequest(
  x: { region: string } | { data: number[] },
  into?: string,
): Record<string, unknown> {
  return {
    inputs: [{
      name: "x",
      datatype: "FP32",
      shape: [1, 4],
      ...("region" in x
        ? { parameters: { shared_memory_region: x.region, shared_memory_byte_size: 16 } }
        : { data: x.data }),
    }],
    outputs: [{
      name: "y",
      parameters: into === undefined
        ? { binary_data: false }
        : { shared_memory_region: into, shared_memory_byte_size: 16 },
    }],
  };
}

/** The same over gRPC (`ModelInferRequest`). */
function slowGrpcRequest(
  x: { region: string } | { data: number[] },
  into?: string,
): ModelInferRequest {
  const region = (name: string) => ({
    shared_memory_region: { string_param: name },
    shared_memory_byte_size: { int64_param: 16n },
  });
  return {
    model_name: "Slow",
    inputs: [{
      name: "x",
      datatype: "FP32",
      shape: [1, 4],
      ...("region" in x ? { parameters: region(x.region) } : {}),
    }],
    ...("data" in x
      ? { raw_input_contents: [new Uint8Array(new Float32Array(x.data).buffer)] }
      : {}),
    outputs: [{ name: "y", ...(into === undefined ? {} : { parameters: region(into) }) }],
  };
}

function grpcInfer(client: TestGrpcClient, request: ModelInferRequest): Promise<unknown> {
  return client.call("ModelInfer", codecs.ModelInferRequest, codecs.ModelInferResponse, request);
}

for (const engine of ENGINES) {
  Deno.test(`A region whose object shrank is refused over HTTP and gRPC, and the server serves on [${engine}]`, async () => {
    await using triton = await startServer({ engine, models: [slowModel(1)] });
    const http = triton.urls.http!;
    using client = new TestGrpcClient(triton.urls.grpc!);
    const key = `/dt_${unique}_shrink_${engine}`;
    const path = `/dev/shm/${key.slice(1)}`;
    const remove = shmObject(key, new Uint8Array(new Float32Array([1, 2, 3, 4]).buffer));
    try {
      const register = await post(`${http}/v2/systemsharedmemory/region/shrink/register`, {
        key,
        offset: 0,
        byte_size: 16,
      });
      assert.equal(register.status, 200, await register.text());
      const served = await post(`${http}/v2/models/Slow/infer`, slowRequest({ region: "shrink" }));
      assert.equal(served.status, 200);
      assert.deepEqual((await served.json()).outputs[0].data, [1, 2, 3, 4]);

      // The client shrinks its object: reading the region's last page would raise SIGBUS.
      await Deno.truncate(path, 0);
      const refusal = shrunk("shrink", key, 16);
      for (
        const body of [
          slowRequest({ region: "shrink" }),
          slowRequest({ data: [5, 6, 7, 8] }, "shrink"),
        ]
      ) {
        const response = await post(`${http}/v2/models/Slow/infer`, body);
        assert.equal(response.status, 400);
        assert.deepEqual(await response.json(), { error: refusal });
      }
      for (
        const request of [
          slowGrpcRequest({ region: "shrink" }),
          slowGrpcRequest({ data: [5, 6, 7, 8] }, "shrink"),
        ]
      ) {
        await rejectsWith(grpcInfer(client, request), grpc.status.INVALID_ARGUMENT, refusal);
      }
      // The server serves on: a request without the region, and the region once it is whole.
      const plain = await post(`${http}/v2/models/Slow/infer`, slowRequest({ data: [6, 7, 8, 9] }));
      assert.equal(plain.status, 200);
      assert.deepEqual((await plain.json()).outputs[0].data, [6, 7, 8, 9]);
      await Deno.writeFile(path, new Uint8Array(new Float32Array([4, 3, 2, 1]).buffer));
      const again = await post(`${http}/v2/models/Slow/infer`, slowRequest({ region: "shrink" }));
      assert.equal(again.status, 200);
      assert.deepEqual((await again.json()).outputs[0].data, [4, 3, 2, 1]);
    } finally {
      remove();
    }
  });

  Deno.test(`A region whose object shrinks while its request runs is refused, and the server serves on [${engine}]`, async () => {
    await using triton = await startServer({ engine, models: [slowModel(300)] });
    const http = triton.urls.http!;
    using client = new TestGrpcClient(triton.urls.grpc!);
    const key = `/dt_${unique}_running_${engine}`;
    const path = `/dev/shm/${key.slice(1)}`;
    const remove = shmObject(key, new Uint8Array(16));
    try {
      const register = await post(`${http}/v2/systemsharedmemory/region/running/register`, {
        key,
        byte_size: 16,
      });
      assert.equal(register.status, 200, await register.text());
      const refusal = shrunk("running", key, 16);
      // The output goes to the region, written once the model answers (by the front end on the
      // built-in engine, by the core on the Triton engine): by then the object has no pages.
      const shrinkSoon = () => setTimeout(() => Deno.truncateSync(path, 0), 100);
      shrinkSoon();
      const response = await post(
        `${http}/v2/models/Slow/infer`,
        slowRequest({ data: [1, 2, 3, 4] }, "running"),
      );
      assert.equal(response.status, 400);
      assert.deepEqual(await response.json(), { error: refusal });
      await Deno.truncate(path, 16);
      shrinkSoon();
      await rejectsWith(
        grpcInfer(client, slowGrpcRequest({ data: [1, 2, 3, 4] }, "running")),
        grpc.status.INVALID_ARGUMENT,
        refusal,
      );
      const plain = await post(`${http}/v2/models/Slow/infer`, slowRequest({ data: [6, 7, 8, 9] }));
      assert.equal(plain.status, 200);
      assert.deepEqual((await plain.json()).outputs[0].data, [6, 7, 8, 9]);
    } finally {
      remove();
    }
  });
}

const paMissing = "missing" in PERF_ANALYZER ? PERF_ANALYZER.missing : undefined;
for (const engine of ENGINES) {
  for (const protocol of ["http", "grpc"] as const) {
    const name = `perf_analyzer --shared-memory system -i ${protocol} on the ${engine} engine`;
    Deno.test({
      name: paMissing === undefined ? name : `${name} (skipped: ${paMissing})`,
      ignore: paMissing !== undefined && !PEERS_REQUIRED,
      async fn(): Promise<void> {
        if ("missing" in PERF_ANALYZER) assert.fail(`perf_analyzer is required: ${paMissing}`);
        await using triton = await startServer({ engine });
        await bindAddSub(triton);
        const url = protocol === "http" ? triton.urls.http! : triton.urls.grpc!;
        const output = await runPerfAnalyzer(PERF_ANALYZER, [
          "-m",
          "AddSub",
          "-u",
          url.replace(/^\w+:\/\//, ""),
          "-i",
          protocol,
          "--shape",
          "a:1024",
          "--shape",
          "b:1024",
          "--shared-memory",
          "system",
          "--output-shared-memory-size",
          "4096",
        ], {
          maxConcurrency: 2,
          maxTrials: 5,
          // Zero failures is the point here, not stable figures on a shared machine.
          stabilityPercentage: 1000,
        });
        assert.doesNotMatch(output, /Unable to unregister/i, output);
        const stats = await (await fetch(`${triton.urls.http}/v2/models/AddSub/stats`)).json();
        const inference = stats.model_stats[0].inference_stats;
        assert.ok(Number(inference.success.count) >= 100, JSON.stringify(inference));
        assert.equal(Number(inference.fail.count), 0, output);
        // perf_analyzer unregisters its regions when it ends.
        const status = await fetch(`${triton.urls.http}/v2/systemsharedmemory/status`);
        assert.deepEqual(await status.json(), []);
      },
    });
  }
}
