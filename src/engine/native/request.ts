/**
 * Submitting an {@linkcode InferenceRequest} to the core: a `TRITONSERVER_InferenceRequest`
 * with inputs pointing at the caller's buffers (kept alive until the release event), requested
 * outputs, typed parameters, priority, timeout and id, built, bound to the completion queue and
 * submitted by one bridge call (`dt_infer`) from a packed description; cancellation on `signal`
 * abort while the core still holds the request.
 *
 * @module
 */

import { InferenceError } from "../../errors.ts";
import { toRawBytes } from "../../tensor/ndarray.ts";
import type { InferenceRequest } from "../engine.ts";
import type { CompletionPump } from "./events.ts";
import type { NativeLibraries } from "./ffi.ts";
import { Packer } from "./packer.ts";
import { pointerOf, takeError } from "./status.ts";
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
  // Input memory must outlive the request: the core reads it until the release event.
  const keep: unknown[] = [];
  const inlined = packRequest(request, keep);
  let packed = packer.bytes();
  if (inlined) {
    // With inputs inside, the description must outlive the call: a copy of its own. Reading
    // `.buffer` moves an on-heap copy off-heap, so its address stays put.
    packed = packed.slice();
    keep.push(packed.buffer, packed);
  }
  let handle: Deno.PointerValue = null;
  let tag: bigint | undefined;
  try {
    let released = false;
    let finalSeen = false;
    const onAbort = (): void => {
      // Cancelling after the release event would touch freed memory.
      if (!released) {
        const failure = core.TRITONSERVER_InferenceRequestCancel(handle);
        if (failure !== null) core.TRITONSERVER_ErrorDelete(failure);
        queueMicrotask(() => queue.drain());
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
    // One call builds, binds and submits it; on failure the bridge has deleted it.
    const failure = takeError(
      core,
      bridge.dt_infer(server, packed, BigInt(packed.byteLength), tag, submitted),
    );
    if (failure !== undefined) throw failure;
    handle = pointerOf(submitted);
    // No { once } options object: the listener is removed at the end in any case.
    request.signal?.addEventListener("abort", onAbort);
    // A cache hit completes inside ServerInferAsync, on this thread; dispatched once the caller
    // has its handlers in place. Nothing queued (the usual case): nothing to drain.
    if (submitted[1] !== 0n) queueMicrotask(() => queue.drain());
  } catch (error) {
    // Before a successful submit no callback fires, and the bridge deleted the request.
    if (tag !== undefined) queue.unregister(tag);
    throw error;
  }
}

const packer = new Packer();
// Inputs up to this size are copied into the description; larger ones are passed by address.
const INLINE_INPUT_BYTES = 4096;
const INPUT_ADDRESS = 0;
const INPUT_INLINE = 1;
// What `dt_infer` hands back: the request, and how many events its queue holds after the submit.
const submitted = new BigUint64Array(2);
// Typed parameter kinds `dt_infer` reads.
const PARAMETER_STRING = 0;
const PARAMETER_INT = 1;
const PARAMETER_BOOL = 2;
const PARAMETER_DOUBLE = 3;

/**
 * Writes the description `dt_infer` reads into `packer`: model, version, id, priority, timeout,
 * the inputs (name, datatype, shape, byte size, then the bytes themselves up to
 * {@linkcode INLINE_INPUT_BYTES}, else their address), the requested outputs and the typed
 * parameters. The bytes of inputs passed by address are pushed onto `keep`.
 *
 * @returns Whether an input's bytes are inside the description, which must then live until the
 *   release event.
 */
function packRequest(request: InferenceRequest, keep: unknown[]): boolean {
  packer.reset();
  packer.string(request.modelName);
  packer.i64(request.modelVersion ?? -1);
  packer.string(request.id ?? "");
  packer.i64(request.priority !== undefined && request.priority > 0 ? request.priority : 0);
  packer.i64(
    request.timeoutMicroseconds !== undefined && request.timeoutMicroseconds > 0
      ? request.timeoutMicroseconds
      : 0,
  );
  const outputs = request.outputs ?? [];
  const parameters = Object.entries(request.parameters);
  packer.u32(request.inputs.size);
  packer.u32(outputs.length);
  packer.u32(parameters.length);
  let inlined = false;
  for (const [name, array] of request.inputs) {
    packer.string(name);
    packer.u32(tritonDataType(array.dtype));
    packer.u32(array.shape.length);
    for (const d of array.shape) packer.i64(d);
    const bytes = toRawBytes(array);
    packer.i64(bytes.byteLength);
    if (bytes.byteLength <= INLINE_INPUT_BYTES) {
      // Small inputs travel inside the description (kept until the release event), 16-byte
      // aligned so the backend can read them in place: no pointer of their own to look up.
      packer.u32(INPUT_INLINE);
      packer.bytesAligned(bytes, 16);
      inlined = true;
    } else {
      packer.u32(INPUT_ADDRESS);
      // Reading `.buffer` moves small on-heap typed arrays off-heap, so the address stays put.
      keep.push(bytes.buffer, bytes);
      packer.i64(Deno.UnsafePointer.value(Deno.UnsafePointer.of(bytes)));
    }
  }
  for (const name of outputs) packer.string(name);
  for (const [key, value] of parameters) {
    packer.string(key);
    if (typeof value === "string") {
      packer.u32(PARAMETER_STRING);
      packer.string(value);
    } else if (typeof value === "boolean") {
      packer.u32(PARAMETER_BOOL);
      packer.u32(value ? 1 : 0);
    } else if (Number.isInteger(value)) {
      packer.u32(PARAMETER_INT);
      packer.i64(value);
    } else {
      packer.u32(PARAMETER_DOUBLE);
      packer.f64(value);
    }
  }
  return inlined;
}
