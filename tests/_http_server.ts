/**
 * A KServe v2 HTTP server for the HTTP front-end end-to-end tests: an engine of the given kind
 * (made by `createEngine`, as the facade makes it) with main-thread models behind `HttpFrontend` on
 * an ephemeral loopback port. The front end is started directly so that tests can pass front-end
 * options the facade's config does not expose (an access check, say).
 *
 * @module
 */

import type { InferCallable, InferRequest, InferResult } from "../src/callable/types.ts";
import { type ModelConfig, resolveModelConfig } from "../src/config/model_config.ts";
import { resolveTensorSpecs, type TensorSpec } from "../src/config/tensor_spec.ts";
import type { Engine, EngineKind } from "../src/engine/engine.ts";
import { createEngine } from "../src/engine/select.ts";
import { HttpFrontend, type HttpFrontendOptions } from "../src/frontend/http/server.ts";
import { MainThreadInstances } from "../src/instances/main_thread.ts";
import { Logger } from "../src/log.ts";
import type { DType } from "../src/tensor/dtype.ts";

/** A model to serve. */
export interface TestModel {
  /** Name. */
  name: string;
  /** Version (default 1). */
  version?: number;
  /** The callable. */
  fn: InferCallable;
  /** Inputs. */
  inputs: TensorSpec[];
  /** Outputs. */
  outputs: TensorSpec[];
  /** Serving config (default: batching with maxBatchSize 8). */
  config?: ModelConfig;
}

/** A running test server. */
export interface TestServer extends AsyncDisposable {
  /** Base URL, e.g. `http://127.0.0.1:PORT`. */
  readonly url: string;
  /** The engine. */
  readonly engine: Engine;
}

/** Every dtype, in the order of the Identity model's inputs and outputs. */
export const ALL_DTYPES: readonly DType[] = [
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
  "bfloat16",
  "float32",
  "float64",
  "bytes",
];

/** `Identity`: optional inputs `in_<dtype>` of every dtype echoed to `out_<dtype>`. */
export const IDENTITY: TestModel = {
  name: "Identity",
  fn: (requests: InferRequest[]): InferResult[] =>
    requests.map((request) =>
      Object.fromEntries(
        Object.entries(request.data).map(([name, value]) => [name.replace("in_", "out_"), value]),
      )
    ),
  inputs: ALL_DTYPES.map((dtype) => ({ name: `in_${dtype}`, dtype, shape: [-1], optional: true })),
  outputs: ALL_DTYPES.map((dtype) => ({ name: `out_${dtype}`, dtype, shape: [-1] })),
};

/**
 * Starts an engine with the models and the HTTP front end on 127.0.0.1:0.
 *
 * @param kind Which engine.
 * @param models Models to load.
 * @param options Front-end options.
 * @returns The server; dispose it with `await using`.
 */
export async function startHttpServer(
  kind: EngineKind,
  models: readonly TestModel[],
  options: HttpFrontendOptions = {},
): Promise<TestServer> {
  const logger = new Logger({ file: "/dev/null" });
  const engine = await createEngine(kind, { logger, logFile: "/dev/null" });
  await engine.start();
  let frontend: HttpFrontend | undefined;
  try {
    for (const model of models) {
      await engine.loadModel({
        name: model.name,
        version: model.version ?? 1,
        strict: false,
        inputs: resolveTensorSpecs(model.inputs, "input"),
        outputs: resolveTensorSpecs(model.outputs, "output"),
        config: resolveModelConfig(model.config ?? { maxBatchSize: 8 }),
        instances: new MainThreadInstances([model.fn]),
      });
    }
    frontend = await HttpFrontend.start(engine, {
      hostname: "127.0.0.1",
      port: 0,
      logger,
      ...options,
    });
  } catch (error) {
    await engine.stop();
    logger.close();
    throw error;
  }
  const running = frontend;
  return {
    url: running.url,
    engine,
    async [Symbol.asyncDispose](): Promise<void> {
      await running.shutdown();
      await engine.stop();
      logger.close();
    },
  };
}
