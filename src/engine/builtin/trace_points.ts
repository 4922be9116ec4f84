/**
 * Where the built-in engine traces a request: the same points as the Triton core's
 * (`REQUEST_START` when the engine takes it, with its inputs at level `TENSORS`, `QUEUE_START`
 * when the scheduler queues it, the `COMPUTE_*` activities around its batch's callable, with its
 * outputs, and `REQUEST_END` once its response or error is handed back).
 *
 * @module
 */

import { toRawBytes } from "../../tensor/ndarray.ts";
import { isDeviceTensor, type Tensor } from "../../tensor/device_tensor.ts";
import type { InferenceRequest } from "../engine.ts";
import {
  kserveDatatype,
  type RequestTrace,
  type TensorActivity,
} from "../../telemetry/request_trace.ts";
import type { Tracer } from "../../telemetry/tracer.ts";

/**
 * Records tensors of a traced request.
 *
 * @param trace The trace.
 * @param activity Where they were seen.
 * @param tensors The tensors by name (one in GPU memory is copied to the host).
 */
export function traceTensors(
  trace: RequestTrace,
  activity: TensorActivity,
  tensors: Readonly<Record<string, Tensor>> | ReadonlyMap<string, Tensor>,
): void {
  const entries = tensors instanceof Map ? tensors.entries() : Object.entries(tensors);
  for (const [name, tensor] of entries) {
    // A tensor in GPU memory is copied to the host to be written, as Triton's tracer does at
    // level TENSORS (a level asked for to see the data).
    const array = isDeviceTensor(tensor) ? tensor.toHost() : tensor;
    trace.tensor(activity, {
      name,
      datatype: kserveDatatype(array.dtype),
      shape: array.shape,
      raw: toRawBytes(array),
    });
  }
}

/**
 * Starts a request's trace when the tracer samples it: `REQUEST_START` (at `arrival`) and, at
 * level `TENSORS`, its inputs.
 *
 * @param tracer The server's tracer, if any.
 * @param request The request.
 * @param model The model version: its name and version.
 * @returns The trace, or `undefined`.
 */
export function startTrace(
  tracer: Tracer | undefined,
  request: InferenceRequest,
  model: { readonly name: string; readonly version: number },
): RequestTrace | undefined {
  const trace = tracer?.start({
    model: model.name,
    version: model.version,
    id: request.id,
    traceContext: request.traceContext,
  });
  if (trace === undefined) return undefined;
  trace.activity("REQUEST_START");
  if (trace.tensors) traceTensors(trace, "TENSOR_QUEUE_INPUT", request.inputs);
  return trace;
}

/**
 * Ends a request's trace: `REQUEST_END`, then its records or spans are written.
 *
 * @param trace The trace, if any.
 */
export function endTrace(trace: RequestTrace | undefined): void {
  if (trace === undefined) return;
  trace.activity("REQUEST_END");
  trace.end();
}
