/**
 * Types shared by the decorators: the batch-level callable shape (`batch`'s inner function) and
 * what a decorator accepts as a callable. Each is generic in the inputs `I` and outputs `O`, so
 * the types `bind()` infers from the tensor specs flow through a stack of decorators.
 *
 * @module
 */

import type { CallableResult, InferContext, InferFunc, Tensors } from "../types.ts";
import type { NDArray } from "../../tensor/ndarray.ts";

/** A batch of inputs by name (PyTriton's `**inputs`): every request concatenated along axis 0. */
export type Inputs = Tensors;

/**
 * Inputs with the model's context injected by `tritonContext`.
 *
 * @typeParam I The inputs.
 */
export type ContextInputs<I = Inputs> = I & {
  /** The context of the call: model name, declared tensors and resolved configuration. */
  tritonContext: InferContext;
};

/**
 * What a batch-level function returns for one batch: outputs by name, or an array mapped
 * positionally onto the model's declared outputs.
 */
export type BatchOutput = Tensors | readonly NDArray[];

/**
 * What a batch-level function may return: outputs, a promise of them, or a stream of them.
 *
 * @typeParam O The outputs by name (or `readonly NDArray[]` for positional outputs).
 */
export type BatchReturn<O = BatchOutput> = O | Promise<O> | Iterable<O> | AsyncIterable<O>;

/**
 * A function below `batch`: receives the batched inputs and the context.
 *
 * @typeParam I The inputs by name.
 * @typeParam O The outputs by name (or `readonly NDArray[]` for positional outputs).
 */
export type BatchFunc<I = Inputs, O = BatchOutput> = (
  inputs: I,
  context: InferContext,
) => BatchReturn<O>;

/**
 * A function, or an object serving one through its `infer` method.
 *
 * @typeParam F The function type.
 */
export type Callable<F> = F | { infer: F };

/**
 * A request-level callable: a function or an object with an `infer` method.
 *
 * @typeParam I The inputs.
 * @typeParam O The outputs.
 * @typeParam R What it gives back per request (outputs, or requests).
 */
export type RequestCallable<
  I = Tensors,
  O = Tensors,
  R extends CallableResult<O> = CallableResult<O>,
> = Callable<InferFunc<I, O, R>>;

/**
 * A batch-level callable: a function or an object with an `infer` method.
 *
 * @typeParam I The inputs.
 * @typeParam O The outputs by name (or `readonly NDArray[]` for positional outputs).
 */
export type BatchCallable<I = Inputs, O = BatchOutput> = Callable<BatchFunc<I, O>>;
