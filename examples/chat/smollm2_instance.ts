/**
 * The instance module of the SmolLM2 models: each Worker loads the model once (generation or
 * embeddings, as `ctx.data.kind` says) with its own llama.cpp context and threads.
 *
 * @module
 */

import { embedFunc, generateFunc, type InferFunc, type WorkerContext } from "../../mod.ts";
import { type RuntimeOptions, Smollm2Runtime } from "./runtime.ts";

/** What `bindSmollm2` passes to each instance as `ctx.data`. */
export interface Smollm2InstanceData extends RuntimeOptions {
  /** Which model the instance serves. */
  kind: "generate" | "embed";
}

/**
 * Loads the model and returns the instance's callable.
 *
 * @param ctx The instance's context; `ctx.data` is {@linkcode Smollm2InstanceData}.
 * @returns The callable.
 */
export default async function smollm2Instance(ctx: WorkerContext): Promise<InferFunc> {
  const data = ctx.data as Smollm2InstanceData;
  if (data.kind === "embed") {
    const runtime = await Smollm2Runtime.embedder(data);
    return embedFunc((texts) => runtime.embed(texts)) as InferFunc;
  }
  const runtime = await Smollm2Runtime.generator(data);
  return generateFunc((request) => runtime.generate(request)) as InferFunc;
}
