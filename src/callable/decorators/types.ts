/**
 * Types shared by the decorators: the batch-level callable shape (`batch`'s inner function) and
 * what a decorator accepts as a callable.
 *
 * @module
 */

import type { InferContext, InferFunc } from "../types.ts";
import type { NDArray } from "../../tensor/ndarray.ts";

/** A batch of inputs by name (PyTriton's `**inputs`): every request concatenated along axis 0. */
export type Inputs = Record<string, NDArray>;

/** Inputs with the model's context injected by `tritonContext`. */
export type ContextInputs = Inputs & {
  /** The context of the call: model name, declared tensors and resolved configuration. */
  tritonContext: InferContext;
};

/**
 * What a batch-level function returns for one batch: outputs by name, or an array mapped
 * positionally onto the model's declared outputs.
 */
export type BatchOutput = Record<string, NDArray> | readonly NDArray[];

/** What a batch-level function may return: outputs, a promise of them, or a stream of them. */
export type BatchReturn =
  | BatchOutput
  | Promise<BatchOutput>
  | Iterable<BatchOutput>
  | AsyncIterable<BatchOutput>;

/** A function below `batch`: receives the batched inputs and the context. */
export type BatchFunc<I extends Inputs = Inputs> = (
  inputs: I,
  context: InferContext,
) => BatchReturn;

/** A function, or an object serving one through its `infer` method. */
export type Callable<F> = F | { infer: F };

/** A request-level callable: a function or an object with an `infer` method. */
export type RequestCallable = Callable<InferFunc>;

/** A batch-level callable: a function or an object with an `infer` method. */
export type BatchCallable<I extends Inputs = Inputs> = Callable<BatchFunc<I>>;
