/**
 * CUDA shared memory (the KServe v2 extension) end to end against the stand-in CUDA driver
 * (tests/_gpu/), on both engines and both protocols: a client in another process
 * (`tests/_gpu/cuda_client.ts`) allocates device memory and registers its CUDA IPC handles; the
 * server opens them (`cuIpcOpenMemHandle` through the one `Deno.dlopen` file), reads inputs from
 * and writes outputs into them, and lists and closes them, with Triton 2.51's answers for bad
 * handles, sizes, offsets and device ids. Each round trip counts its copies twice, in the
 * stand-in driver (every copy the server process made through it) and in DenoTriton's own
 * counters (`deviceCopyCounts`), and the two agree:
 *
 * - a host callable: one device-to-host copy of the input, one host-to-device copy of the output;
 * - a callable pinned to cuda:0 whose specs say `deviceTensor` (built-in engine: the Triton
 *   engine's stand-in run has no KIND_GPU instance, since the core finds no real GPU): it gets
 *   the input as a `DeviceTensor` over the client's region and returns it, and the server makes
 *   one device-to-device copy into the output region and no host copy.
 *
 * On a host with GPUs the same tests run again against the real driver (`libcuda.so.1`, the
 * client allocating real device memory), where only DenoTriton's counters count and the
 * `deviceTensor` model runs on both engines (the core gets a KIND_GPU group); elsewhere they are
 * skipped with one line naming what is missing. The real-GPU run with `tritonclient`'s
 * `cuda_shared_memory` and `perf_analyzer --shared-memory cuda` is `tests/gpu_cuda_shm_check.sh`.
 */

import * as grpc from "@grpc/grpc-js";
import assert from "node:assert/strict";
import {
  type BindOptions,
  deviceCopyCounts,
  DeviceTensor,
  discoverGpus,
  type InferCallable,
  isDeviceTensor,
  ndarray,
  workers,
} from "../mod.ts";
import type { AnyTensors, Tensors } from "../src/callable/types.ts";
import { MainThreadInstances } from "../src/instances/main_thread.ts";
import { codecs, type ModelInferRequest } from "../src/protocol/grpc_codec.ts";
import type { EngineKind } from "../src/engine/engine.ts";
import { ENGINES, startServer, watchdog } from "./_helpers.ts";
import { rejectsWith, TestGrpcClient } from "./grpc_test_client.ts";
import { buildStandInDriver, standInMissing } from "./_gpu/stand_in.ts";

const STAND_IN = await buildStandInDriver();
const HOST = discoverGpus();
const CLIENT = new URL("./_gpu/cuda_client.ts", import.meta.url).pathname;
const WORKER_MODULE = new URL("./_gpu/pass_on_instance.ts", import.meta.url);

/** Copies as the stand-in driver counts them: [H2D calls, bytes, D2H calls, bytes, D2D calls, bytes]. */
type Counts = [number, number, number, number, number, number];

/** A driver to run against: the stand-in (its own counters too) or the host's. */
interface Driver {
  /** The library path or name. */
  readonly path: string;
  /** Whether it is the stand-in, whose copy counters and open mappings tests can read. */
  readonly standIn: boolean;
}

function standInCounts(driver: Driver): Counts | undefined {
  if (!driver.standIn) return undefined;
  const library = Deno.dlopen(driver.path, {
    stand_in_copy_counts: { parameters: ["buffer"], result: "void" },
    stand_in_ipc_open_count: { parameters: [], result: "usize" },
  });
  try {
    const out = new BigUint64Array(6);
    library.symbols.stand_in_copy_counts(out);
    return [...out].map(Number) as Counts;
  } finally {
    library.close();
  }
}

/** Mappings the server holds open: the stand-in's count, or the registry's on a real driver. */
function openMappings(driver: Driver, listed: number): number {
  if (!driver.standIn) return listed;
  const library = Deno.dlopen(driver.path, {
    stand_in_ipc_open_count: { parameters: [], result: "usize" },
  });
  try {
    return Number(library.symbols.stand_in_ipc_open_count());
  } finally {
    library.close();
  }
}

/**
 * Checks a 400 answer: `exact` against the stand-in; against a real driver, whose words and
 * rounding differ, `real`.
 */
function refusal(
  driver: Driver,
  answer: { status: number; body: unknown },
  exact: string,
  real: RegExp,
): void {
  assert.equal(answer.status, 400, JSON.stringify(answer.body));
  const { error } = answer.body as { error: string };
  if (driver.standIn) assert.equal(error, exact);
  else assert.match(error, real);
}

function ourCounts(): Counts {
  const { hostToDevice: h2d, deviceToHost: d2h, deviceToDevice: d2d } = deviceCopyCounts();
  return [h2d.calls, h2d.bytes, d2h.calls, d2h.bytes, d2d.calls, d2d.bytes];
}

/** Runs `work` and answers the copies it made, after checking both counters agree. */
async function copiesOf(driver: Driver, work: () => Promise<void>): Promise<Counts> {
  const [driverBefore, oursBefore] = [standInCounts(driver), ourCounts()];
  await work();
  const ours = ourCounts().map((n, i) => n - oursBefore[i]!) as Counts;
  const after = standInCounts(driver);
  if (after !== undefined) {
    const counted = after.map((n, i) => n - driverBefore![i]!);
    assert.deepEqual(
      ours,
      counted,
      "DenoTriton's copy counters and the stand-in driver's disagree",
    );
  }
  return ours;
}

async function* lines(text: ReadableStream<string>): AsyncGenerator<string> {
  let pending = "";
  for await (const chunk of text) {
    pending += chunk;
    const complete = pending.split("\n");
    pending = complete.pop()!;
    yield* complete;
  }
}

/** The client process: one JSON command per line. */
class CudaClient implements AsyncDisposable {
  #child: Deno.ChildProcess;
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #lines: AsyncIterator<string>;

  constructor(driver: Driver) {
    this.#child = new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-ffi", "--allow-read", CLIENT, driver.path],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    this.#writer = this.#child.stdin.getWriter();
    this.#lines = lines(this.#child.stdout.pipeThrough(new TextDecoderStream()));
  }

  async send(command: Record<string, unknown>): Promise<Record<string, unknown>> {
    await this.#writer.write(new TextEncoder().encode(`${JSON.stringify(command)}\n`));
    const { value, done } = await watchdog(this.#lines.next(), "the CUDA client's answer");
    assert.ok(!done, "the CUDA client ended");
    const answer = JSON.parse(value);
    assert.equal(answer.error, undefined, answer.error);
    return answer;
  }

  /** Device memory of `bytes` holding `values`; its pointer and base64 IPC handle. */
  async alloc(bytes: number, values: number[] = []): Promise<{ pointer: string; handle: string }> {
    return await this.send({ op: "alloc", bytes, values }) as { pointer: string; handle: string };
  }

  async read(pointer: string, floats: number): Promise<number[]> {
    return (await this.send({ op: "read", pointer, floats })).values as number[];
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.#writer.close();
    await this.#child.status;
  }
}

const double: InferCallable = (requests) =>
  requests.map((request) => {
    const x = request.data.x!;
    assert.ok(!isDeviceTensor(x), "the host callable got a device tensor");
    return { y: { ...x, data: (x.data as Float32Array).map((v) => v * 2) } as typeof x };
  });

/** What the device callable saw, for the test to check. */
const seen: string[] = [];
const passOn: InferCallable<AnyTensors, AnyTensors> = (requests) =>
  requests.map((request) => {
    const x = request.data.x!;
    seen.push(isDeviceTensor(x) ? `DeviceTensor ${x.dtype} [${x.shape}] ${x.deviceName}` : "host");
    return { y: x };
  });

/**
 * Device memory of the server process for `Upload`'s outputs: allocated once per driver through
 * the driver itself, with device 0's primary context made current on this (the main) thread.
 */
const scratch = new Map<string, bigint>();
function scratchOf(driver: Driver): bigint {
  let pointer = scratch.get(driver.path);
  if (pointer !== undefined) return pointer;
  const cuda = Deno.dlopen(driver.path, {
    cuInit: { parameters: ["u32"], result: "i32" },
    cuDevicePrimaryCtxRetain: { parameters: ["buffer", "i32"], result: "i32" },
    cuCtxSetCurrent: { parameters: ["pointer"], result: "i32" },
    cuMemAlloc_v2: { parameters: ["buffer", "usize"], result: "i32" },
  }).symbols;
  const slot = new BigUint64Array(1);
  assert.equal(cuda.cuInit(0), 0);
  assert.equal(cuda.cuDevicePrimaryCtxRetain(slot, 0), 0);
  assert.equal(cuda.cuCtxSetCurrent(Deno.UnsafePointer.create(slot[0]!)), 0);
  assert.equal(cuda.cuMemAlloc_v2(slot, 64n), 0);
  pointer = slot[0]!;
  scratch.set(driver.path, pointer);
  return pointer;
}

/**
 * `Upload`'s callable, on a CPU instance: adds 1 on the host and answers the result as a
 * DeviceTensor it copied into its own device memory (one host-to-device copy, counted).
 */
function upload(driver: Driver): InferCallable<Tensors, AnyTensors> {
  return (requests) =>
    requests.map((request) => {
      const x = request.data.x!;
      assert.ok(!isDeviceTensor(x));
      const y = new DeviceTensor({
        dtype: "float32",
        shape: x.shape,
        pointer: scratchOf(driver),
        device: 0,
        driverLibrary: driver.path,
      });
      y.copyFromHost(ndarray((x.data as Float32Array).map((v) => v + 1), x.shape));
      return { y };
    });
}

// MainThreadInstances (internal) takes the untyped callable; the device callables' own types say
// what they take and return.
function models(engine: string, driver: Driver): BindOptions[] {
  const common = { config: { batching: false } } as const;
  const list: BindOptions[] = [{
    modelName: "Upload",
    inferFunc: new MainThreadInstances([upload(driver) as unknown as InferCallable]),
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1], deviceTensor: true }],
    ...common,
  }, {
    modelName: "Double",
    inferFunc: new MainThreadInstances([double]),
    inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
    outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
    ...common,
  }];
  if (deviceModel(engine, driver)) {
    list.push({
      modelName: "OnDeviceWorker",
      inferFunc: workers(WORKER_MODULE, { devices: ["cuda:0"], data: driver.path }),
      inputs: [{ name: "x", dtype: "float32", shape: [-1], deviceTensor: true }],
      outputs: [
        { name: "y", dtype: "float32", shape: [-1], deviceTensor: true },
        { name: "where", dtype: "bytes", shape: [1] },
      ],
      ...common,
    });
    list.push({
      modelName: "OnDevice",
      inferFunc: new MainThreadInstances([passOn as unknown as InferCallable], {
        devices: ["cuda:0"],
      }),
      inputs: [{ name: "x", dtype: "float32", shape: [-1], deviceTensor: true }],
      outputs: [{ name: "y", dtype: "float32", shape: [-1], deviceTensor: true }],
      ...common,
    });
  }
  return list;
}

function httpInfer(model: string, input: string, output: string, offset = 0): unknown {
  return {
    inputs: [{
      name: "x",
      datatype: "FP32",
      shape: [4],
      parameters: {
        shared_memory_region: input,
        shared_memory_byte_size: 16,
        ...(offset ? { shared_memory_offset: offset } : {}),
      },
    }],
    outputs: [{
      name: "y",
      parameters: { shared_memory_region: output, shared_memory_byte_size: 16 },
    }],
    model,
  };
}

function grpcInfer(model: string, input: string, output: string): ModelInferRequest {
  const region = (name: string) => ({
    shared_memory_region: { string_param: name },
    shared_memory_byte_size: { int64_param: 16n },
  });
  return {
    model_name: model,
    inputs: [{ name: "x", datatype: "FP32", shape: [4], parameters: region(input) }],
    outputs: [{ name: "y", parameters: region(output) }],
  };
}

async function post(url: string, body?: unknown): Promise<{ status: number; body: unknown }> {
  const response = await fetch(url, {
    method: "POST",
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text === "" ? undefined : JSON.parse(text) };
}

/**
 * Whether the `deviceTensor` model runs: everywhere on a real GPU; against the stand-in on the
 * built-in engine only (the core refuses a KIND_GPU group without a real GPU).
 */
function deviceModel(engine: string, driver: Driver): boolean {
  return engine === "builtin" || !driver.standIn;
}

const HOST_PATH: Counts = [1, 16, 1, 16, 0, 0];
const DEVICE_PATH: Counts = [0, 0, 0, 0, 1, 16];

function cudaTests(engine: EngineKind, driver: Driver, label: string): void {
  Deno.test(`CUDA shared memory over HTTP against ${label} [${engine}]`, async (t) => {
    await using triton = await startServer({
      engine,
      models: models(engine, driver),
      gpus: driver.standIn ? discoverGpus({ driverLibrary: driver.path }) : HOST,
    });
    await using client = new CudaClient(driver);
    const base = `${triton.urls.http}/v2/cudasharedmemory`;
    const mapped = async () =>
      openMappings(driver, (await (await fetch(`${base}/status`)).json()).length);
    const input = await client.alloc(16, [1, 2, 3, 4]);
    const output = await client.alloc(16);
    const small = await client.alloc(8);

    await t.step("register, status", async () => {
      for (const [name, region] of [["in", input], ["out", output]] as const) {
        const answer = await post(`${base}/region/${name}/register`, {
          raw_handle: { b64: region.handle },
          device_id: 0,
          byte_size: 16,
        });
        assert.deepEqual(answer, { status: 200, body: undefined });
      }
      const status = await fetch(`${base}/status`);
      assert.deepEqual(await status.json(), [
        { name: "in", device_id: 0, byte_size: 16 },
        { name: "out", device_id: 0, byte_size: 16 },
      ]);
      const one = await fetch(`${base}/region/out/status`);
      assert.deepEqual(await one.json(), [{ name: "out", device_id: 0, byte_size: 16 }]);
      assert.equal(await mapped(), 2);
    });

    await t.step("a host callable: one copy in each direction", async () => {
      const copies = await copiesOf(driver, async () => {
        const answer = await post(
          `${triton.urls.http}/v2/models/Double/infer`,
          httpInfer("Double", "in", "out"),
        );
        assert.equal(answer.status, 200, JSON.stringify(answer.body));
        // As Triton answers an output in shared memory: no data, no parameters.
        assert.deepEqual((answer.body as { outputs: unknown }).outputs, [{
          name: "y",
          datatype: "FP32",
          shape: [4],
        }]);
      });
      assert.deepEqual(await client.read(output.pointer, 4), [2, 4, 6, 8]);
      assert.deepEqual(copies, HOST_PATH);
    });

    await t.step("a device output of a CPU instance: into the region, or to the host", async () => {
      const copies = await copiesOf(driver, async () => {
        const answer = await post(
          `${triton.urls.http}/v2/models/Upload/infer`,
          httpInfer("Upload", "in", "out"),
        );
        assert.equal(answer.status, 200, JSON.stringify(answer.body));
      });
      assert.deepEqual(await client.read(output.pointer, 4), [2, 3, 4, 5]);
      // The input to the host, the callable's upload, the output device to device.
      assert.deepEqual(copies, [1, 16, 1, 16, 1, 16]);
      const plain = await copiesOf(driver, async () => {
        const answer = await post(`${triton.urls.http}/v2/models/Upload/infer`, {
          inputs: [{ name: "x", datatype: "FP32", shape: [2], data: [10, 20] }],
        });
        assert.deepEqual(answer, {
          status: 200,
          body: {
            model_name: "Upload",
            model_version: "1",
            outputs: [{ name: "y", datatype: "FP32", shape: [2], data: [11, 21] }],
          },
        });
      });
      // The callable's upload, and the output to the host for the response body.
      assert.deepEqual(plain, [1, 8, 1, 8, 0, 0]);
    });

    if (deviceModel(engine, driver)) {
      await t.step(
        "a device callable: a DeviceTensor in, one device copy, no host copy",
        async () => {
          seen.length = 0;
          const copies = await copiesOf(driver, async () => {
            const answer = await post(
              `${triton.urls.http}/v2/models/OnDevice/infer`,
              httpInfer("OnDevice", "in", "out"),
            );
            assert.equal(answer.status, 200, JSON.stringify(answer.body));
          });
          assert.deepEqual(seen, ["DeviceTensor float32 [4] cuda:0"]);
          assert.deepEqual(await client.read(output.pointer, 4), [1, 2, 3, 4]);
          assert.deepEqual(copies, DEVICE_PATH);
          // The same from a Worker pinned to cuda:0: the tensor crosses as its handle.
          const fromWorker = await copiesOf(driver, async () => {
            const answer = await post(`${triton.urls.http}/v2/models/OnDeviceWorker/infer`, {
              ...httpInfer("OnDeviceWorker", "in", "out") as object,
              outputs: [
                {
                  name: "y",
                  parameters: { shared_memory_region: "out", shared_memory_byte_size: 16 },
                },
                { name: "where", parameters: { binary_data: false } },
              ],
            });
            assert.equal(answer.status, 200, JSON.stringify(answer.body));
            const outputs =
              (answer.body as { outputs: { name: string; data?: unknown }[] }).outputs;
            assert.deepEqual(outputs.find((o) => o.name === "where")?.data, [
              "DeviceTensor float32 [4] cuda:0 on a Worker with cuda:0 current",
            ]);
          });
          assert.deepEqual(await client.read(output.pointer, 4), [1, 2, 3, 4]);
          assert.deepEqual(fromWorker, DEVICE_PATH);
        },
      );
    }

    await t.step("bad handles, sizes, offsets and device ids", async () => {
      const register = (name: string, body: unknown) =>
        post(`${base}/region/${name}/register`, body);
      const zeros = btoa(String.fromCharCode(...new Uint8Array(64)));
      refusal(
        driver,
        await register("bad", { raw_handle: { b64: zeros }, device_id: 0, byte_size: 16 }),
        "failed to register shared memory region: invalid args: region 'bad': the CUDA IPC handle cannot be opened on cuda:0: cuIpcOpenMemHandle failed: CUDA_ERROR_INVALID_VALUE (1)",
        /^failed to register shared memory region: invalid args: region 'bad': the CUDA IPC handle cannot be opened on cuda:0: cuIpcOpenMemHandle failed: CUDA_ERROR_\w+ \(\d+\)$/,
      );
      assert.deepEqual(
        await register("bad", {
          raw_handle: { b64: btoa("short") },
          device_id: 0,
          byte_size: 16,
        }),
        {
          status: 400,
          body: { error: "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t" },
        },
      );
      refusal(
        driver,
        await register("bad", {
          raw_handle: { b64: small.handle },
          device_id: 0,
          byte_size: 1 << 24,
        }),
        "failed to register shared memory region 'bad': invalid args: byte_size 16777216 is beyond the 8 bytes of the allocation the handle maps",
        // A real driver may round the allocation up.
        /^failed to register shared memory region 'bad': invalid args: byte_size 16777216 is beyond the \d+ bytes of the allocation the handle maps$/,
      );
      assert.deepEqual(
        await register("bad", { raw_handle: { b64: small.handle }, device_id: 7, byte_size: 8 }),
        {
          status: 400,
          body: {
            error:
              "failed to register shared memory region: invalid args: region 'bad': device_id 7 is not a GPU of this server: cuDeviceGet failed: CUDA_ERROR_INVALID_DEVICE (101)",
          },
        },
      );
      assert.deepEqual(
        await register("in", { raw_handle: { b64: small.handle }, device_id: 0, byte_size: 8 }),
        { status: 400, body: { error: "shared memory region 'in' already in manager" } },
      );
      // The refused registrations left nothing open.
      assert.equal(await mapped(), 2);
      const beyond = await post(
        `${triton.urls.http}/v2/models/Double/infer`,
        httpInfer("Double", "in", "out", 8),
      );
      assert.deepEqual(beyond, {
        status: 400,
        body: { error: "Invalid offset + byte size for shared memory region: 'in'" },
      });
      const unknown = await fetch(`${base}/region/nope/status`);
      assert.equal(unknown.status, 404);
      assert.deepEqual(await unknown.json(), {
        error: "Unable to find cuda shared memory region: 'nope'",
      });
    });

    await t.step("unregister closes the mappings", async () => {
      assert.deepEqual(await post(`${base}/region/in/unregister`), {
        status: 200,
        body: undefined,
      });
      assert.equal(await mapped(), 1);
      assert.deepEqual(await post(`${base}/unregister`), { status: 200, body: undefined });
      assert.equal(await mapped(), 0);
      assert.deepEqual(await (await fetch(`${base}/status`)).json(), []);
    });
  });

  Deno.test(`CUDA shared memory over gRPC against ${label} [${engine}]`, async () => {
    await using triton = await startServer({
      engine,
      models: models(engine, driver),
      gpus: driver.standIn ? discoverGpus({ driverLibrary: driver.path }) : HOST,
    });
    await using client = new CudaClient(driver);
    using grpcClient = new TestGrpcClient(triton.urls.grpc!.replace(/^\w+:\/\//, ""));
    const input = await client.alloc(16, [5, 6, 7, 8]);
    const output = await client.alloc(16);
    const raw = (handle: string) => Uint8Array.from(atob(handle), (c) => c.charCodeAt(0));
    const register = (name: string, handle: Uint8Array, device: number, bytes: number) =>
      grpcClient.call("CudaSharedMemoryRegister", codecs.CudaSharedMemoryRequest, codecs.Empty, {
        name,
        raw_handle: handle,
        device_id: BigInt(device),
        byte_size: BigInt(bytes),
      });
    await register("in", raw(input.handle), 0, 16);
    await register("out", raw(output.handle), 0, 16);
    const listAll = () =>
      grpcClient.call(
        "CudaSharedMemoryStatus",
        codecs.CudaSharedMemoryRequest,
        codecs.CudaSharedMemoryStatusResponse,
        {},
      );
    const mapped = async () =>
      openMappings(driver, Object.keys((await listAll()).regions ?? {}).length);
    const status = await listAll();
    assert.deepEqual(
      status,
      {
        // 64-bit fields as the codec reads them: decimal strings.
        regions: {
          in: { name: "in", device_id: "0", byte_size: "16" },
          out: { name: "out", device_id: "0", byte_size: "16" },
        },
      },
    );
    const infer = (model: string) =>
      grpcClient.call(
        "ModelInfer",
        codecs.ModelInferRequest,
        codecs.ModelInferResponse,
        grpcInfer(model, "in", "out"),
      );
    const copies = await copiesOf(driver, async () => {
      const response = await infer("Double") as { raw_output_contents?: Uint8Array[] };
      // The output went into the region: its entry in the message is empty.
      assert.deepEqual(response.raw_output_contents?.map((bytes) => bytes.byteLength), [0]);
    });
    assert.deepEqual(await client.read(output.pointer, 4), [10, 12, 14, 16]);
    assert.deepEqual(copies, HOST_PATH);
    if (deviceModel(engine, driver)) {
      seen.length = 0;
      assert.deepEqual(
        await copiesOf(driver, async () => void await infer("OnDevice")),
        DEVICE_PATH,
      );
      assert.deepEqual(seen, ["DeviceTensor float32 [4] cuda:0"]);
      assert.deepEqual(await client.read(output.pointer, 4), [5, 6, 7, 8]);
    }
    await rejectsWith(
      register("bad", new Uint8Array(64), 0, 16),
      grpc.status.INVALID_ARGUMENT,
      driver.standIn
        ? "failed to register shared memory region: invalid args: region 'bad': the CUDA IPC handle cannot be opened on cuda:0: cuIpcOpenMemHandle failed: CUDA_ERROR_INVALID_VALUE (1)"
        : /^failed to register shared memory region: invalid args: region 'bad': the CUDA IPC handle cannot be opened on cuda:0: cuIpcOpenMemHandle failed: CUDA_ERROR_\w+ \(\d+\)$/,
    );
    await rejectsWith(
      register("bad", new Uint8Array(8), 0, 16),
      grpc.status.INVALID_ARGUMENT,
      "'raw_handle' must be a cudaIpcMemHandle_t (64 bytes), got 8 bytes",
    );
    await rejectsWith(
      register("in", raw(input.handle), 0, 16),
      grpc.status.ALREADY_EXISTS,
      "shared memory region 'in' already in manager",
    );
    await rejectsWith(
      grpcClient.call(
        "CudaSharedMemoryStatus",
        codecs.CudaSharedMemoryRequest,
        codecs.CudaSharedMemoryStatusResponse,
        { name: "nope" },
      ),
      grpc.status.NOT_FOUND,
      "Unable to find cuda shared memory region: 'nope'",
    );
    assert.equal(await mapped(), 2);
    await grpcClient.call(
      "CudaSharedMemoryUnregister",
      codecs.CudaSharedMemoryRequest,
      codecs.Empty,
      {},
    );
    assert.equal(await mapped(), 0);
  });
}

for (const engine of ENGINES) {
  if (STAND_IN === undefined) {
    Deno.test({
      name: `CUDA shared memory tests against the stand-in driver are skipped: ${standInMissing}`,
      ignore: true,
      fn(): void {},
    });
  } else cudaTests(engine, { path: STAND_IN, standIn: true }, "the stand-in driver");
  if (HOST.devices.length > 0) {
    cudaTests(
      engine,
      { path: HOST.driverLibrary ?? "libcuda.so.1", standIn: false },
      "this host's GPU",
    );
  } else {
    Deno.test({
      name:
        `CUDA shared memory tests on this host's GPU are skipped: GPU path not verified: this host has no GPUs (${HOST.reason})`,
      ignore: true,
      fn(): void {},
    });
  }
}
