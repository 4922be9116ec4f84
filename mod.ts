/**
 * DenoTriton serves TypeScript inference functions over the KServe v2 protocol (HTTP/REST with
 * binary tensors, and gRPC), with dynamic batching, statistics and Prometheus metrics — what
 * NVIDIA PyTriton does for Python.
 *
 * Permissions: importing this module needs none. The default server (HTTP, gRPC, metrics) needs
 * `--allow-net` on the built-in engine, and `--allow-net --allow-env --allow-ffi
 * --allow-read=$HOME/.cache/denotriton --allow-write=/tmp` on the Triton-core engine
 * (`--allow-env` to find the core; install it once with
 * `deno run -A jsr:@denotriton/triton/setup`). A missing one ends in a
 * {@linkcode TritonPermissionError}, one line naming the flag; the README's "Permissions" table
 * lists every feature's grants and the narrower ones that work too.
 *
 * The tensor specs type the callable: `a` and `b` below are `NDArray<"float32">`, and a misspelled
 * input, a wrong output dtype or a missing output fails to compile.
 *
 * ```ts ignore
 * import { batch, Triton, zip } from "jsr:@denotriton/triton";
 *
 * await using triton = new Triton({ config: { httpPort: 8000 } });
 * triton.bind({
 *   modelName: "AddSub",
 *   inferFunc: batch(({ a, b }) => ({
 *     add: zip(a, b, (x, y) => x + y),
 *     sub: zip(a, b, (x, y) => x - y),
 *   })),
 *   inputs: [
 *     { name: "a", dtype: "float32", shape: [-1] },
 *     { name: "b", dtype: "float32", shape: [-1] },
 *   ],
 *   outputs: [
 *     { name: "add", dtype: "float32", shape: [-1] },
 *     { name: "sub", dtype: "float32", shape: [-1] },
 *   ],
 *   config: { maxBatchSize: 8 },
 * });
 * await triton.serve(); // until SIGINT/SIGTERM
 * ```
 *
 * @module
 */

export {
  type BindCallable,
  type BindOptions,
  Triton,
  type TritonOptions,
  type TritonStartOptions,
  type TritonUrls,
} from "./src/triton.ts";
export type { LogFormat, LogSink } from "./src/log.ts";
export {
  ensemble,
  type EnsembleBindOptions,
  type EnsembleOptions,
  ensembleStep,
  EnsembleSteps,
  type EnsembleStepSpec,
  type StepInputMap,
  type StepOutputMap,
} from "./src/ensemble.ts";
export {
  type ChatMessage,
  chatModel,
  type ChatModelOptions,
  type ChatRole,
  type Embedding,
  embeddingModel,
  type EmbeddingModelOptions,
  type EmbeddingResultTensors,
  type EmbeddingTensors,
  type EmbedFunc,
  embedFunc,
  type FinishReason,
  type GenerateFunc,
  generateFunc,
  type GenerateInput,
  type GenerateOptions,
  type GenerateRequest,
  type GenerateStep,
  type GenerateStepTensors,
  type GenerateTensors,
  type OpenAIEndpoint,
  type OpenAIModelConfig,
  type OpenAIOptions,
} from "./src/openai_models.ts";
export {
  EMBEDDING_INPUTS,
  embeddingOutputs,
  GENERATE_INPUTS,
  GENERATE_OUTPUTS,
} from "./src/protocol/openai.ts";
export type { ModelInfo, OpenAIServing } from "./src/config/model_info.ts";
export type { ResolvedEnsemble, ResolvedEnsembleStep } from "./src/config/ensemble.ts";
export type { EngineChoice } from "./src/engine/select.ts";
export type { EngineKind } from "./src/engine/engine.ts";

export {
  asDType,
  type BytesNDArray,
  type ElementOf,
  type NDArray,
  ndarray,
  type NDArrayData,
  type NDArrayOptions,
  type NestedArray,
  type NumericNDArray,
} from "./src/tensor/ndarray.ts";
export { type ElementResult, map, rows, zip } from "./src/tensor/ops.ts";
export {
  type DeviceBuffer,
  DeviceTensor,
  type DeviceTensorInit,
  isDeviceTensor,
  type Tensor,
} from "./src/tensor/device_tensor.ts";
export {
  type CopyCount,
  type DeviceCopyCounts,
  deviceCopyCounts,
} from "./src/native/cuda_memory.ts";
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
} from "./src/tensor/dtype.ts";

export type {
  AnyTensors,
  CallableResult,
  CallFrame,
  CallParent,
  InferCallable,
  InferCallableObject,
  InferCallOptions,
  InferContext,
  InferFunc,
  InferRequest,
  InferRequestFields,
  InferResult,
  InferReturn,
  InputProperties,
  ModelCall,
  ModelCaller,
  ModelRef,
  ParameterValue,
  Request,
  Sequence,
  SequenceRequest,
  SpecName,
  TensorOf,
  Tensors,
  TensorsOf,
} from "./src/callable/types.ts";
export { sequenceOf } from "./src/callable/sequence.ts";
export { inferRequest, type InferRequestOptions } from "./src/callable/request.ts";
export {
  Metric,
  type MetricChange,
  MetricFamily,
  type MetricFamilyOptions,
  type MetricKind,
  type MetricOperation,
  type MetricOptions,
  type MetricsBackend,
  ModelMetrics,
} from "./src/callable/metrics.ts";
export type { OpenTelemetryTraceConfig } from "./src/config/trace_config.ts";
export {
  getModelConfig,
  inferContext,
  type InferContextOptions,
  type TritonContext,
} from "./src/callable/context.ts";
export * from "./src/callable/decorators/mod.ts";

export type { ResolvedTensorSpec, TensorSpec } from "./src/config/tensor_spec.ts";
export type {
  DynamicBatcher,
  ModelConfig,
  ModelWarmup,
  QueuePolicy,
  ResolvedDynamicBatcher,
  ResolvedModelConfig,
  ResolvedQueuePolicy,
  TimeoutAction,
  WarmupInput,
} from "./src/config/model_config.ts";
export type {
  ControlDType,
  CorrelationIdControl,
  CorrelationIdDType,
  ImplicitState,
  ResolvedImplicitState,
  ResolvedSequenceBatching,
  ResolvedSequenceControl,
  SequenceBatching,
  SequenceControl,
  SequenceControls,
  SequenceId,
  SequenceStrategy,
} from "./src/config/sequence_batching.ts";
export type {
  GrpcCompressionLevel,
  ResolvedTritonConfig,
  TritonConfig,
} from "./src/config/triton_config_fields.ts";
export type { SecurityConfig } from "./src/config/security_config.ts";
export type {
  InstanceProvider,
  InstanceStartOptions,
  ModelInstance,
  NativeLocations,
  NativeTensorLocation,
} from "./src/instances/instance.ts";
export type { GpuDevice, GpuInventory } from "./src/gpu/devices.ts";
export { currentGpu, discoverGpus, type DiscoverGpusOptions } from "./src/gpu/cuda.ts";
export { type WorkerContext, WorkerInstances, workers } from "./src/instances/workers.ts";
export type {
  WorkersLogger,
  WorkersOptions,
  WorkerTransferStats,
} from "./src/instances/workers_options.ts";

export {
  type ErrorCode,
  InferenceError,
  type InferenceErrorOptions,
  TritonBadParameterError,
  TritonError,
  TritonInvalidOperationError,
  TritonModelConfigError,
  TritonPermissionError,
  TritonRuntimeError,
  TritonUnrecoverableError,
  TritonValidationError,
} from "./src/errors.ts";
