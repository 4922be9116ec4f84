/**
 * From a validated {@linkcode InferenceRequest} to the scheduler and back: the request the
 * callable sees (with its own abort signal), the scheduler entry, and the response built from a
 * result (the requested outputs, in declared order).
 *
 * @module
 */

import type { AnyTensors, InferRequest, InferResult } from "../../callable/types.ts";
import type { Tensor } from "../../tensor/device_tensor.ts";
import type { InferenceRequest, InferenceResponse } from "../engine.ts";
import type { ModelEntry } from "./registry.ts";
import type { ValidatedRequest } from "./request_validation.ts";
import type { ModelScheduler, SchedulerSink } from "./scheduler.ts";
import type { RequestTrace } from "../../telemetry/request_trace.ts";

/** How a validated request is queued: what validation learned, when it arrived, who hears. */
export interface Submission {
  /** What validation learned of the request. */
  validated: ValidatedRequest;
  /** `performance.now()` when the request arrived. */
  arrival: number;
  /** Receives its outcome. */
  sink: SchedulerSink;
  /**
   * The request's trace, when it is traced.
   *
   * @default {undefined}
   */
  trace?: RequestTrace | undefined;
}

/**
 * Queues a validated request on its model's scheduler.
 *
 * @param entry The ready model version.
 * @param request The request.
 * @param submission What validation learned, when it arrived, its sink and its trace.
 * @returns The controller that aborts the signal its callable sees.
 */
export function submit(
  entry: ModelEntry,
  request: InferenceRequest,
  submission: Submission,
): AbortController {
  const { validated, arrival, sink, trace } = submission;
  const controller = new AbortController();
  const data: Record<string, Tensor> = {};
  for (const [name, tensor] of request.inputs) data[name] = tensor;
  const callableRequest: InferRequest<AnyTensors> = {
    data,
    parameters: { ...request.parameters },
    requestedOutputNames: validated.outputs,
    signal: controller.signal,
    ...(request.parent === undefined ? {} : { parent: request.parent }),
  };
  // The engine runs an ensemble's requests on its EnsembleScheduler, never through here.
  (entry.scheduler as ModelScheduler).submit({
    request: callableRequest,
    controller,
    batchSize: validated.batchSize,
    shapeKey: validated.shapeKey,
    arrival,
    sink,
    trace,
    ...(request.outputBuffers === undefined ? {} : { outputBuffers: request.outputBuffers }),
    ...(request.priority === undefined ? {} : { priority: request.priority }),
    ...(request.timeoutMicroseconds === undefined
      ? {}
      : { timeoutMicroseconds: request.timeoutMicroseconds }),
    ...(request.sequence === undefined ? {} : { sequence: request.sequence }),
    ...(request.signal === undefined ? {} : { signal: request.signal }),
  });
  return controller;
}

/**
 * The requested outputs of a result, in declared order.
 *
 * @param result What the callable returned for the request.
 * @param validated What validation learned of the request.
 * @returns The outputs by name.
 */
export function outputsOf(
  result: InferResult<AnyTensors>,
  validated: ValidatedRequest,
): Map<string, Tensor> {
  const outputs = new Map<string, Tensor>();
  for (const name of validated.outputs) {
    const array = result[name];
    if (array !== undefined) outputs.set(name, array);
  }
  return outputs;
}

/**
 * A response to a request.
 *
 * @param entry The model version that ran it.
 * @param request The request (its id is echoed).
 * @param outputs The outputs.
 * @returns The response.
 */
export function responseOf(
  entry: ModelEntry,
  request: InferenceRequest,
  outputs: ReadonlyMap<string, Tensor>,
): InferenceResponse {
  return {
    modelName: entry.definition.name,
    modelVersion: String(entry.definition.version),
    ...(request.id === undefined || request.id === "" ? {} : { id: request.id }),
    outputs,
  };
}
