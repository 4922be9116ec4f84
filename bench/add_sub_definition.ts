/**
 * `examples/add_sub` as an engine's `loadModel()` takes it, on the main thread, for the benches
 * that drive an engine without `bind()` (`engine_roundtrip.ts`, `http_handler.ts`).
 *
 * @module
 */

import { addSub } from "../examples/add_sub/model.ts";
import type { InferCallable } from "../src/callable/types.ts";
import { resolveModelConfig } from "../src/config/model_config.ts";
import { resolveTensorSpecs } from "../src/config/tensor_spec.ts";
import type { ModelDefinition } from "../src/engine/engine.ts";
import { MainThreadInstances } from "../src/instances/main_thread.ts";

/**
 * add_sub (`AddSub`, version 1): FP32 `a` and `b` in, `add` and `sub` out, batching up to 128.
 *
 * @param queueDelayUs The dynamic batcher's queue delay in µs.
 * @returns The definition.
 */
export function addSubDefinition(queueDelayUs: number): ModelDefinition {
  return {
    name: "AddSub",
    version: 1,
    strict: false,
    inputs: resolveTensorSpecs([
      { name: "a", dtype: "float32", shape: [-1] },
      { name: "b", dtype: "float32", shape: [-1] },
    ], "input"),
    outputs: resolveTensorSpecs([
      { name: "add", dtype: "float32", shape: [-1] },
      { name: "sub", dtype: "float32", shape: [-1] },
    ], "output"),
    config: resolveModelConfig({
      maxBatchSize: 128,
      batcher: { maxQueueDelayMicroseconds: queueDelayUs },
    }),
    // Typed for bind(); the engines take the untyped callable bind() hands them.
    instances: new MainThreadInstances([addSub as InferCallable]),
  };
}
