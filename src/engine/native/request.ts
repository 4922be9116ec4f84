/**
 * Submitting an {@linkcode InferenceRequest} to the core: a `TRITONSERVER_InferenceRequest`
 * with inputs pointing at the caller's buffers (kept alive until the release event), requested
 * outputs, typed parameters, priority, timeout and id; callbacks routed through the C bridge to
 * the completion queue; cancellation on `signal` abort while the core still holds the request.
 *
 * @module
 */

import { InferenceError } from "../../errors.ts";
import { toRawBytes } from "../../tensor/ndarray.ts";
import type { InferenceRequest } from "../engine.ts";
import type { CompletionPump } from "./events.ts";
import type { NativeLibraries } from "./ffi.ts";
import { check, cString, pointerOf, takeError } from "./status.ts";
import { tritonDataType } from "./tensors.ts";

const RESPONSE_FINAL = 1;
const RELEASE_ALL = 1;

/** What a submitted request reports back. */
export interface SubmitHandlers {
  /**
   * One response (null for a flags-only final); `final` marks the last. The response must be
   * consumed synchronously: it is deleted right after this returns.
   */
  response(response: Deno.PointerValue, final: boolean): void;
}

/**
 * Builds and submits a request; returns once the core accepted it.
 *
 * @param libraries The opened libraries.
 * @param queue The completion queue.
 * @param server The `TRITONSERVER_Server*`.
 * @param request The request.
 * @param handlers Receives the responses.
 * @throws {InferenceError} With the core's code when building or submitting fails, or
 *   CANCELLED when the signal was already aborted.
 */
export function submitRequest(
  libraries: NativeLibraries,
  queue: CompletionPump,
  server: Deno.PointerValue,
  request: InferenceRequest,
  handlers: SubmitHandlers,
): void {
  const { core, bridge } = libraries;
  if (request.signal?.aborted) {
    throw InferenceError.cancelled(`Request for model '${request.modelName}' was cancelled`);
  }
  const slot = new BigUint64Array(1);
  check(
    core,
    core.TRITONSERVER_InferenceRequestNew(
      slot,
      server,
      cString(request.modelName),
      BigInt(request.modelVersion ?? -1),
    ),
  );
  const handle = pointerOf(slot);
  // Input memory must outlive the request: the core reads it until the release event.
  const keep: unknown[] = [];
  let tag: bigint | undefined;
  try {
    if (request.id !== undefined && request.id !== "") {
      check(core, core.TRITONSERVER_InferenceRequestSetId(handle, cString(request.id)));
    }
    for (const [name, array] of request.inputs) {
      const cname = cString(name);
      const shape = new BigInt64Array(array.shape.map((d) => BigInt(d)));
      check(
        core,
        core.TRITONSERVER_InferenceRequestAddInput(
          handle,
          cname,
          tritonDataType(array.dtype),
          shape,
          BigInt(array.shape.length),
        ),
      );
      const bytes = toRawBytes(array);
      // Reading `.buffer` moves small on-heap typed arrays off-heap, so the address stays put.
      keep.push(bytes.buffer, bytes);
      check(
        core,
        core.TRITONSERVER_InferenceRequestAppendInputData(
          handle,
          cname,
          bytes.byteLength === 0 ? null : bytes,
          BigInt(bytes.byteLength),
          0,
          0n,
        ),
      );
    }
    for (const name of request.outputs ?? []) {
      check(core, core.TRITONSERVER_InferenceRequestAddRequestedOutput(handle, cString(name)));
    }
    for (const [key, value] of Object.entries(request.parameters)) {
      const ckey = cString(key);
      if (typeof value === "string") {
        check(
          core,
          core.TRITONSERVER_InferenceRequestSetStringParameter(handle, ckey, cString(value)),
        );
      } else if (typeof value === "boolean") {
        check(core, core.TRITONSERVER_InferenceRequestSetBoolParameter(handle, ckey, value));
      } else if (Number.isInteger(value)) {
        check(core, core.TRITONSERVER_InferenceRequestSetIntParameter(handle, ckey, BigInt(value)));
      } else {
        check(core, core.TRITONSERVER_InferenceRequestSetDoubleParameter(handle, ckey, value));
      }
    }
    if (request.priority !== undefined && request.priority > 0) {
      check(
        core,
        core.TRITONSERVER_InferenceRequestSetPriorityUInt64(handle, BigInt(request.priority)),
      );
    }
    if (request.timeoutMicroseconds !== undefined && request.timeoutMicroseconds > 0) {
      check(
        core,
        core.TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(
          handle,
          BigInt(request.timeoutMicroseconds),
        ),
      );
    }
    let released = false;
    let finalSeen = false;
    const onAbort = (): void => {
      // Cancelling after the release event would touch freed memory.
      if (!released) {
        const failure = core.TRITONSERVER_InferenceRequestCancel(handle);
        if (failure !== null) core.TRITONSERVER_ErrorDelete(failure);
      }
    };
    const finish = (): void => {
      if (released && finalSeen) {
        request.signal?.removeEventListener("abort", onAbort);
        queue.unregister(tag!);
      }
    };
    tag = queue.register({
      response(response, flags): void {
        const final = (flags & RESPONSE_FINAL) !== 0;
        try {
          handlers.response(response, final);
        } finally {
          if (response !== null) {
            const failure = core.TRITONSERVER_InferenceResponseDelete(response);
            if (failure !== null) core.TRITONSERVER_ErrorDelete(failure);
          }
          if (final) {
            finalSeen = true;
            finish();
          }
        }
      },
      release(_request, flags): void {
        if ((flags & RELEASE_ALL) === 0) return;
        released = true;
        const failure = core.TRITONSERVER_InferenceRequestDelete(handle);
        if (failure !== null) core.TRITONSERVER_ErrorDelete(failure);
        keep.length = 0;
        finish();
      },
    });
    check(core, bridge.dt_request_bind(handle, tag));
    const failure = takeError(core, core.TRITONSERVER_ServerInferAsync(server, handle, null));
    if (failure !== undefined) throw failure;
    request.signal?.addEventListener("abort", onAbort, { once: true });
  } catch (error) {
    // Before a successful InferAsync the request is still ours and no callback will fire.
    if (tag !== undefined) queue.unregister(tag);
    const failure = core.TRITONSERVER_InferenceRequestDelete(handle);
    if (failure !== null) core.TRITONSERVER_ErrorDelete(failure);
    throw error;
  }
}
