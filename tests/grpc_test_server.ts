// A gRPC front end over an engine of the given kind (made by `createEngine`, as the facade makes
// it) with the models the gRPC tests use. Run directly (`deno run -A tests/grpc_test_server.ts
// [builtin|triton]`) it serves on an ephemeral port and prints it.

import type { InferRequest, InferResult } from "../src/callable/types.ts";
import { resolveModelConfig } from "../src/config/model_config.ts";
import { resolveTensorSpecs, type TensorSpec } from "../src/config/tensor_spec.ts";
import type { Engine, EngineKind, ModelDefinition } from "../src/engine/engine.ts";
import { createEngine } from "../src/engine/select.ts";
import { InferenceError } from "../src/errors.ts";
import { Logger } from "../src/log.ts";
import { GrpcFrontend, type GrpcFrontendOptions } from "../src/frontend/grpc/server.ts";
import { MainThreadInstances } from "../src/instances/main_thread.ts";
import { type NDArray, ndarray } from "../src/tensor/ndarray.ts";
import type { ModelConfig } from "../src/config/model_config.ts";
import type { InferCallable } from "../src/callable/types.ts";

function model(
  name: string,
  inputs: TensorSpec[],
  outputs: TensorSpec[],
  callable: InferCallable,
  config: ModelConfig = {},
): ModelDefinition {
  return {
    name,
    version: 1,
    strict: false,
    inputs: resolveTensorSpecs(inputs, "input"),
    outputs: resolveTensorSpecs(outputs, "output"),
    config: resolveModelConfig(config),
    instances: new MainThreadInstances([callable]),
  };
}

/** Identity over every dtype: input `IN_<dtype>` → output `OUT_<dtype>`. */
const DTYPES = [
  "bool",
  "int8",
  "int16",
  "int32",
  "int64",
  "uint8",
  "uint16",
  "uint32",
  "uint64",
  "float16",
  "float32",
  "float64",
  "bytes",
] as const;

/** A running engine and front end; dispose to stop both. */
export interface TestServer extends AsyncDisposable {
  /** The engine. */
  readonly engine: Engine;
  /** The front end. */
  readonly frontend: GrpcFrontend;
  /** Resolves with the abort reason the next time a `Wait` request is aborted. */
  nextAbort(): Promise<unknown>;
  /** Resolves the next time a `Wait` request starts running. */
  nextWaitStart(): Promise<void>;
}

/**
 * Starts an engine of the given kind with the test models and a gRPC front end on an ephemeral port.
 *
 * Models:
 * - `AddSub` (batching, max 8): FP32 `a`, `b` [-1] → `add`, `sub`.
 * - `Identity` (no batching): every dtype `IN_<d>` [-1] → `OUT_<d>`, all inputs optional.
 * - `Echo` (batching): BYTES `text` [1] → `text` plus `params` BYTES [1] with the JSON of the
 *   request parameters.
 * - `Stream` (decoupled, no batching): INT32 `n` [1] → `i` INT32 [1], n responses.
 * - `Fail` (no batching): FP32 `x` [1] → throws.
 * - `Wait` (no batching): FP32 `x` [1] → never answers until the request is aborted.
 */
export async function startTestServer(
  kind: EngineKind,
  options: GrpcFrontendOptions = {},
): Promise<TestServer> {
  // Quiet (the suites provoke errors on purpose); the front end shares it for LogSettings.
  const logger = new Logger({ file: "/dev/null" });
  const engine = await createEngine(kind, { logFile: "/dev/null", logger });
  await engine.start();
  try {
    return await serveModels(engine, { logger, ...options });
  } catch (error) {
    await engine.stop();
    throw error;
  }
}

async function serveModels(engine: Engine, options: GrpcFrontendOptions): Promise<TestServer> {
  await engine.loadModel(model(
    "AddSub",
    [{ name: "a", dtype: "float32", shape: [-1] }, { name: "b", dtype: "float32", shape: [-1] }],
    [{ name: "add", dtype: "float32", shape: [-1] }, {
      name: "sub",
      dtype: "float32",
      shape: [-1],
    }],
    (requests: InferRequest[]): InferResult[] =>
      requests.map((r) => {
        const a = r.data.a!.data as Float32Array;
        const b = r.data.b!.data as Float32Array;
        return {
          add: ndarray(a.map((v, i) => v + b[i]!), r.data.a!.shape),
          sub: ndarray(a.map((v, i) => v - b[i]!), r.data.a!.shape),
        };
      }),
    { maxBatchSize: 8 },
  ));
  await engine.loadModel(model(
    "Identity",
    DTYPES.map((d) => ({ name: `IN_${d}`, dtype: d, shape: [-1], optional: true })),
    DTYPES.map((d) => ({ name: `OUT_${d}`, dtype: d, shape: [-1] })),
    (requests: InferRequest[]): InferResult[] =>
      requests.map((r) => {
        const result: Record<string, NDArray> = {};
        for (const [name, array] of Object.entries(r.data)) {
          result[name.replace("IN_", "OUT_")] = array;
        }
        return result;
      }),
    { batching: false },
  ));
  await engine.loadModel(model(
    "Echo",
    [{ name: "text", dtype: "bytes", shape: [1] }],
    [{ name: "text", dtype: "bytes", shape: [1] }, { name: "params", dtype: "bytes", shape: [1] }],
    (requests: InferRequest[]): InferResult[] =>
      requests.map((r) => ({
        text: r.data.text!,
        params: ndarray([JSON.stringify(r.parameters)], [1, 1]),
      })),
    { maxBatchSize: 4 },
  ));
  await engine.loadModel(model(
    "Stream",
    [{ name: "n", dtype: "int32", shape: [1] }],
    [{ name: "i", dtype: "int32", shape: [1] }],
    async function* (requests: InferRequest[]): AsyncGenerator<InferResult[]> {
      const n = (requests[0]!.data.n!.data as Int32Array)[0]!;
      if (n < 0) {
        throw new InferenceError("Negative count: n must be >= 0", { code: "INVALID_ARG" });
      }
      for (let i = 0; i < n; i++) {
        await Promise.resolve();
        yield [{ i: ndarray(new Int32Array([i]), [1]) }];
      }
    },
    { batching: false, decoupled: true },
  ));
  await engine.loadModel(model(
    "Fail",
    [{ name: "x", dtype: "float32", shape: [1] }],
    [{ name: "y", dtype: "float32", shape: [1] }],
    (): InferResult[] => {
      throw new Error("Model failed on purpose");
    },
    { batching: false },
  ));
  const aborts: ((reason: unknown) => void)[] = [];
  const starts: (() => void)[] = [];
  await engine.loadModel(model(
    "Wait",
    [{ name: "x", dtype: "float32", shape: [1] }],
    [{ name: "y", dtype: "float32", shape: [1] }],
    (requests: InferRequest[]): Promise<InferResult[]> => {
      const signal = requests[0]!.signal;
      starts.shift()?.();
      return new Promise((_, reject) => {
        signal.addEventListener("abort", () => {
          aborts.shift()?.(signal.reason);
          reject(signal.reason);
        }, { once: true });
      });
    },
    { batching: false },
  ));
  const frontend = await GrpcFrontend.start(engine, {
    address: "127.0.0.1",
    port: 0,
    headerForwardPattern: "^x-forward-",
    ...options,
  });
  return {
    engine,
    frontend,
    nextAbort: () => new Promise((resolve) => aborts.push(resolve)),
    nextWaitStart: () => new Promise((resolve) => starts.push(resolve)),
    async [Symbol.asyncDispose](): Promise<void> {
      await frontend.shutdown();
      await engine.stop();
    },
  };
}

if (import.meta.main) {
  const server = await startTestServer((Deno.args[0] ?? "builtin") as EngineKind);
  console.log(server.frontend.port);
  Deno.addSignalListener("SIGTERM", async () => {
    await server[Symbol.asyncDispose]();
    Deno.exit(0);
  });
}
