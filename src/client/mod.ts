/**
 * The DenoTriton client: call a model on a Triton-compatible server (DenoTriton, PyTriton,
 * Triton) over HTTP/REST (binary tensors) or gRPC, the way PyTriton's `ModelClient` does.
 *
 * Permissions: importing it needs none; calls need `--allow-net` for the server's address, and
 * over gRPC `--allow-env` for the variables grpc-js reads (`GRPC_*` and the proxy settings; the
 * error names them). A missing one ends the call at once with a `ClientPermissionError` naming
 * the flag, instead of retrying until `initTimeoutS`.
 *
 * ```ts ignore
 * import { ModelClient, ndarray } from "jsr:@denotriton/triton/client";
 *
 * await using client = new ModelClient("localhost:8000", "AddSub");
 * const { add, sub } = await client.inferSample({
 *   a: ndarray(new Float32Array([1, 2])),
 *   b: ndarray(new Float32Array([3, 4])),
 * });
 * console.log(add!.data, sub!.data);
 * ```
 *
 * @module
 */

export { ModelClient } from "./model_client.ts";
export type * from "./options.ts";
export {
  type ClientDynamicBatcher,
  type ClientModelConfig,
  type ClientTensorSpec,
  parseModelConfig,
} from "./model_config.ts";
export { type ClientProtocol, parseTritonUrl, type TritonUrl } from "./url.ts";
export type { ClientParameterValue } from "./transport.ts";
export {
  ClientClosedError,
  ClientError,
  ClientInferenceServerError,
  type ClientInferenceServerErrorOptions,
  ClientInvalidUrlError,
  ClientModelDoesntSupportBatchingError,
  ClientModelUnavailableError,
  ClientPermissionError,
  ClientQueueFullError,
  ClientTimeoutError,
  ClientValueError,
} from "./errors.ts";
export {
  asDType,
  type BytesNDArray,
  type NDArray,
  ndarray,
  type NDArrayData,
  type NDArrayOptions,
  type NestedArray,
  type NumericNDArray,
} from "../tensor/ndarray.ts";
export type {
  DType,
  DTypeLike,
  DTypeOf,
  DTypeOfArray,
  DTypeSpellings,
  KServeDType,
  NumericDType,
  TypedArray,
  TypedArrayConstructor,
  TypedArrayOf,
} from "../tensor/dtype.ts";
