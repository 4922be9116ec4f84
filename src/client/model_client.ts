/**
 * `ModelClient`: calls one model of a Triton-compatible server over HTTP or gRPC, the way
 * PyTriton's `ModelClient` does — lazy readiness wait and config fetch, batch-axis handling,
 * timeouts on every call, and clear errors.
 *
 * Over 500 lines because it is one class whose methods share its private state (the transport,
 * the lazily fetched config, the timeouts, the request ids); its option types live in
 * `options.ts` and the building of requests in `request.ts`.
 *
 * @module
 */

import {
  ClientClosedError,
  ClientError,
  ClientInferenceServerError,
  ClientModelDoesntSupportBatchingError,
  ClientPermissionError,
  ClientTimeoutError,
  ClientValueError,
} from "./errors.ts";
import { CallLimit } from "./call_limit.ts";
import { type ClientModelConfig, parseModelConfig } from "./model_config.ts";
import type {
  ClientInputs,
  ClientOutputs,
  InferOptions,
  InferStreamOptions,
  LoadModelOptions,
  ModelClientOptions,
} from "./options.ts";
import { buildRequest, checkValues, outputsOf, stringHeaders } from "./request.ts";
import type {
  Transport,
  TransportCallOptions,
  TransportInferRequest,
  TransportInferResponse,
} from "./transport.ts";
import { parseTritonUrl, type TritonUrl } from "./url.ts";
import { deniedPermission, envGranted, GRPC_CLIENT_ENV_VARIABLES } from "../permissions.ts";

const HTTP_TOKEN_HEADER = "triton-access-token";
const GRPC_TOKEN_HEADER = "triton-grpc-protocol-triton-access-token";

function isParsedConfig(
  value: ClientModelConfig | Readonly<Record<string, unknown>>,
): value is ClientModelConfig {
  return typeof value.maxBatchSize === "number" && Array.isArray(value.inputs) &&
    Array.isArray(value.outputs) && typeof value.batching === "boolean";
}

function positiveSeconds(value: number | undefined, fallback: number, what: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !(value > 0) || !Number.isFinite(value)) {
    throw new ClientValueError(
      `Invalid ${what}: expected a positive number of seconds, got ${value}`,
    );
  }
  return value;
}

/**
 * A client of one model on a Triton-compatible server (DenoTriton, PyTriton, Triton).
 *
 * @example Refuses bad URLs at once
 * ```ts
 * import { ClientInvalidUrlError, ModelClient } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * assert.throws(() => new ModelClient("ftp://localhost", "AddSub"), ClientInvalidUrlError);
 * ```
 *
 * @example Calls after close fail
 * ```ts
 * import { ClientClosedError, ModelClient, ndarray } from "./mod.ts";
 * import assert from "node:assert/strict";
 *
 * const client = new ModelClient("localhost:8000", "AddSub");
 * await client.close();
 * await assert.rejects(client.inferSample([ndarray([1])]), ClientClosedError);
 * ```
 */
export class ModelClient implements AsyncDisposable {
  #url: TritonUrl;
  #modelName: string;
  #modelVersion: string | undefined;
  #initTimeoutMs: number;
  #inferenceTimeoutMs: number;
  #headers: Record<string, string>;
  #givenConfig: ClientModelConfig | undefined;
  #ensureReady: boolean;
  #transport: Promise<Transport> | undefined;
  #init: Promise<ClientModelConfig> | undefined;
  #closer = new AbortController();
  #closed = false;
  #nextId = 1;
  #calls: CallLimit;

  /**
   * Creates a client. Nothing connects until the first call unless `lazyInit` is `false`.
   *
   * @param url `host`, `host:port`, `http://host:port` or `grpc://host:port`.
   * @param modelName The model to call.
   * @param options Version, timeouts, token, headers, a known config.
   * @throws {ClientInvalidUrlError} When the URL cannot be used.
   * @throws {ClientValueError} When an option is invalid.
   */
  constructor(url: string, modelName: string, options: ModelClientOptions = {}) {
    this.#url = parseTritonUrl(url);
    if (typeof modelName !== "string" || modelName === "") {
      throw new ClientValueError("Invalid model name: it is empty");
    }
    this.#modelName = modelName;
    if (options.modelVersion !== undefined) {
      const version = String(options.modelVersion);
      if (!/^[0-9]+$/.test(version)) {
        throw new ClientValueError(
          `Invalid model version ${JSON.stringify(version)}: expected digits`,
        );
      }
      this.#modelVersion = version;
    }
    this.#initTimeoutMs = positiveSeconds(options.initTimeoutS, 300, "initTimeoutS") * 1000;
    this.#inferenceTimeoutMs = positiveSeconds(options.inferenceTimeoutS, 60, "inferenceTimeoutS") *
      1000;
    this.#headers = stringHeaders(checkValues(options.headers, "header"));
    if (options.accessToken !== undefined) {
      const key = this.#url.scheme === "grpc" ? GRPC_TOKEN_HEADER : HTTP_TOKEN_HEADER;
      this.#headers[key] = options.accessToken;
    }
    if (options.modelConfig !== undefined) {
      this.#givenConfig = isParsedConfig(options.modelConfig)
        ? options.modelConfig
        : parseModelConfig(options.modelConfig);
    }
    this.#ensureReady = options.ensureModelIsReady ?? true;
    this.#calls = new CallLimit(options.maxConcurrency, options.maxQueueSize);
    if (options.lazyInit === false) {
      // Errors surface on the first call; this only starts the work.
      this.#initialize().catch(() => {});
    }
  }

  /** The parsed server URL. */
  get url(): TritonUrl {
    return this.#url;
  }

  /** The model name. */
  get modelName(): string {
    return this.#modelName;
  }

  /** The model version asked for, `undefined` for the server's choice. */
  get modelVersion(): string | undefined {
    return this.#modelVersion;
  }

  /** Whether {@linkcode ModelClient.close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  #checkOpen(what: string): void {
    if (this.#closed) throw new ClientClosedError(`Cannot ${what}: the client is closed`);
  }

  #getTransport(): Promise<Transport> {
    // Loaded on demand so HTTP users never load gRPC.
    const url = this.#url;
    this.#transport ??= url.scheme === "grpc"
      ? Promise.resolve()
        .then(() => {
          // grpc-js swallows a refused connection or proxy variable and retries until the
          // timeout: check both first.
          const host = url.withoutScheme;
          if (Deno.permissions.querySync({ name: "net", host }).state !== "granted") {
            throw new ClientPermissionError(`DenoTriton needs --allow-net=${host} for the client`);
          }
          if (!envGranted(GRPC_CLIENT_ENV_VARIABLES)) {
            throw new ClientPermissionError(
              `DenoTriton needs --allow-env=${
                GRPC_CLIENT_ENV_VARIABLES.join(",")
              } for the gRPC client`,
            );
          }
        })
        .then(() => import("./grpc_transport.ts"))
        .then(({ GrpcTransport }): Transport => new GrpcTransport(url))
      : import("./http_transport.ts").then(({ HttpTransport }): Transport =>
        new HttpTransport(url)
      );
    return this.#transport;
  }

  /**
   * Runs one transport call under the client's timeout, the close signal and the caller's signal,
   * and turns aborts into client errors.
   */
  async #call<T>(
    what: string,
    run: (transport: Transport, options: TransportCallOptions) => Promise<T>,
    timeoutMs: number,
    signal?: AbortSignal,
    headers?: Readonly<Record<string, string>>,
  ): Promise<T> {
    this.#checkOpen(what);
    signal?.throwIfAborted();
    const timer = new AbortController();
    const id = setTimeout(() => timer.abort(), timeoutMs);
    const signals = [timer.signal, this.#closer.signal];
    if (signal !== undefined) signals.push(signal);
    try {
      const transport = await this.#getTransport();
      return await run(transport, {
        signal: AbortSignal.any(signals),
        headers: { ...this.#headers, ...headers },
      });
    } catch (error) {
      const denied = deniedPermission(error);
      if (denied !== undefined) {
        throw new ClientPermissionError(`DenoTriton needs ${denied.flag} for the client`);
      }
      throw this.#abortError(what, error, timer.signal, timeoutMs, signal);
    } finally {
      clearTimeout(id);
    }
  }

  #abortError(
    what: string,
    error: unknown,
    timer: AbortSignal,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): unknown {
    if (this.#closer.signal.aborted) {
      return new ClientClosedError(`Cannot ${what}: the client was closed`, { cause: error });
    }
    if (signal?.aborted) return signal.reason;
    if (timer.aborted && !(error instanceof ClientError)) {
      return new ClientTimeoutError(
        `Cannot ${what}: timed out after ${timeoutMs / 1000} s`,
        { cause: error },
      );
    }
    return error;
  }

  async #sleep(ms: number, signal?: AbortSignal): Promise<void> {
    const signals = [this.#closer.signal];
    if (signal !== undefined) signals.push(signal);
    const any = AbortSignal.any(signals);
    await new Promise<void>((resolve) => {
      const id = setTimeout(done, ms);
      any.addEventListener("abort", done, { once: true });
      function done(): void {
        clearTimeout(id);
        any.removeEventListener("abort", done);
        resolve();
      }
    });
  }

  /** Polls `check` until it answers `true`; unreachable servers and errors are retried. */
  async #poll(
    what: string,
    deadline: number,
    timeoutS: number,
    check: (transport: Transport, options: TransportCallOptions) => Promise<boolean>,
    signal?: AbortSignal,
  ): Promise<void> {
    let delay = 250;
    let last: unknown;
    while (true) {
      this.#checkOpen(`wait for ${what}`);
      signal?.throwIfAborted();
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        const why = last instanceof Error ? `: ${last.message}` : "";
        throw new ClientTimeoutError(
          `Timed out after ${timeoutS} s waiting for ${what} to be ready${why}`,
          last === undefined ? {} : { cause: last },
        );
      }
      try {
        const attempt = Math.min(remaining, this.#inferenceTimeoutMs);
        if (await this.#call(`wait for ${what}`, check, attempt, signal)) return;
        last = undefined;
      } catch (error) {
        // A missing permission does not come with time.
        if (this.#closed || signal?.aborted || error instanceof ClientPermissionError) throw error;
        last = error;
      }
      await this.#sleep(Math.min(delay, Math.max(0, deadline - Date.now())), signal);
      delay = Math.min(delay * 2, 1000);
    }
  }

  #serverCheck = (transport: Transport, options: TransportCallOptions): Promise<boolean> =>
    transport.serverReady(options);

  #modelCheck = async (transport: Transport, options: TransportCallOptions): Promise<boolean> =>
    await transport.serverReady(options) &&
    await transport.modelReady(this.#modelName, this.#modelVersion, options);

  #modelLabel(): string {
    return this.#modelVersion === undefined
      ? `model '${this.#modelName}'`
      : `model '${this.#modelName}' version ${this.#modelVersion}`;
  }

  /**
   * Waits until the server answers ready.
   *
   * @param timeoutS How long to wait, in seconds.
   * @returns When the server is ready.
   * @throws {ClientTimeoutError} When it is not ready in time (also when nothing listens).
   * @throws {ClientClosedError} When the client is closed.
   */
  async waitForServer(timeoutS: number): Promise<void> {
    const seconds = positiveSeconds(timeoutS, 0, "timeoutS");
    await this.#poll("server", Date.now() + seconds * 1000, seconds, this.#serverCheck);
  }

  /**
   * Waits until the server and the model answer ready.
   *
   * @param timeoutS How long to wait, in seconds.
   * @returns When the model is ready.
   * @throws {ClientTimeoutError} When it is not ready in time (unknown models never are).
   * @throws {ClientClosedError} When the client is closed.
   */
  async waitForModel(timeoutS: number): Promise<void> {
    const seconds = positiveSeconds(timeoutS, 0, "timeoutS");
    await this.#poll(this.#modelLabel(), Date.now() + seconds * 1000, seconds, this.#modelCheck);
  }

  #initialize(): Promise<ClientModelConfig> {
    if (this.#init === undefined) {
      const init = this.#runInit();
      this.#init = init;
      // A failed init is retried by the next call.
      init.catch(() => {
        if (this.#init === init) this.#init = undefined;
      });
    }
    return this.#init;
  }

  async #runInit(): Promise<ClientModelConfig> {
    const deadline = Date.now() + this.#initTimeoutMs;
    const seconds = this.#initTimeoutMs / 1000;
    if (this.#ensureReady) {
      await this.#poll(this.#modelLabel(), deadline, seconds, this.#modelCheck);
    }
    if (this.#givenConfig !== undefined) return this.#givenConfig;
    const remaining = Math.max(1, Math.min(deadline - Date.now(), this.#inferenceTimeoutMs));
    const json = await this.#call(
      `get config of ${this.#modelLabel()}`,
      (transport, options) => transport.modelConfig(this.#modelName, this.#modelVersion, options),
      remaining,
    );
    return parseModelConfig(json);
  }

  async #ready(signal: AbortSignal | undefined): Promise<ClientModelConfig> {
    this.#checkOpen("infer");
    const init = this.#initialize();
    if (signal === undefined) return await init;
    signal.throwIfAborted();
    return await new Promise<ClientModelConfig>((resolve, reject) => {
      const abort = (): void => reject(signal.reason);
      signal.addEventListener("abort", abort, { once: true });
      init.then(resolve, reject).finally(() => signal.removeEventListener("abort", abort));
    });
  }

  /**
   * The model's config (waits for readiness and fetches it on first use).
   *
   * @returns The parsed config.
   * @throws {ClientTimeoutError} When the model does not get ready within `initTimeoutS`.
   */
  modelConfig(): Promise<ClientModelConfig> {
    return this.#ready(undefined);
  }

  /**
   * Whether the model batches (`max_batch_size > 0`).
   *
   * @returns `true` when `inferBatch` may be used.
   */
  async isBatchingSupported(): Promise<boolean> {
    return (await this.#ready(undefined)).batching;
  }

  #request(
    inputs: ClientInputs,
    options: InferOptions,
    config: ClientModelConfig,
    addBatchAxis: boolean,
  ): { request: TransportInferRequest; headers: Record<string, string> } {
    const request = buildRequest(inputs, options, {
      config,
      modelName: this.#modelName,
      modelVersion: this.#modelVersion,
      id: String(this.#nextId++),
      addBatchAxis,
      label: this.#modelLabel(),
    });
    return { request, headers: stringHeaders(checkValues(options.headers, "header")) };
  }

  async #infer(
    inputs: ClientInputs,
    options: InferOptions,
    sample: boolean,
  ): Promise<ClientOutputs> {
    this.#checkOpen("infer");
    const release = await this.#calls.acquire(`infer with ${this.#modelLabel()}`, options.signal);
    try {
      return await this.#inferNow(inputs, options, sample);
    } finally {
      release();
    }
  }

  async #inferNow(
    inputs: ClientInputs,
    options: InferOptions,
    sample: boolean,
  ): Promise<ClientOutputs> {
    const config = await this.#ready(options.signal);
    if (config.decoupled) {
      throw new ClientInferenceServerError(
        `Cannot infer with ${this.#modelLabel()}: it is decoupled; use inferStream()`,
      );
    }
    if (!sample && !config.batching) {
      throw new ClientModelDoesntSupportBatchingError(
        `Cannot infer a batch with ${this.#modelLabel()}: it does not support batching (max_batch_size is 0); use inferSample()`,
      );
    }
    const batchAxis = sample && config.batching;
    const { request, headers } = this.#request(inputs, options, config, batchAxis);
    const response = await this.#call(
      `infer with ${this.#modelLabel()}`,
      (transport, call) => transport.infer(request, call),
      this.#inferenceTimeoutMs,
      options.signal,
      headers,
    );
    return outputsOf(response, batchAxis);
  }

  /**
   * Runs one sample: adds a batch axis of 1 to every input when the model batches and strips it
   * from every output.
   *
   * @param inputs Positional (declared input order) or named tensors.
   * @param options Parameters, headers, outputs, a signal.
   * @returns The outputs by name.
   * @throws {ClientTimeoutError} When readiness or the inference takes too long.
   * @throws {ClientInferenceServerError} When the server answers an error (or the model is decoupled).
   * @throws {ClientQueueFullError} When the model's queue is full, or the client's
   *   (`maxQueueSize`).
   * @throws {ClientClosedError} When the client is closed.
   */
  inferSample(inputs: ClientInputs, options: InferOptions = {}): Promise<ClientOutputs> {
    return this.#infer(inputs, options, true);
  }

  /**
   * Runs a batch: inputs are sent as they are, with their batch axis.
   *
   * @param inputs Positional (declared input order) or named tensors.
   * @param options Parameters, headers, outputs, a signal.
   * @returns The outputs by name.
   * @throws {ClientModelDoesntSupportBatchingError} When the model does not batch.
   * @throws {ClientTimeoutError} When readiness or the inference takes too long.
   * @throws {ClientInferenceServerError} When the server answers an error (or the model is decoupled).
   * @throws {ClientQueueFullError} When the model's queue is full, or the client's
   *   (`maxQueueSize`).
   * @throws {ClientClosedError} When the client is closed.
   */
  inferBatch(inputs: ClientInputs, options: InferOptions = {}): Promise<ClientOutputs> {
    return this.#infer(inputs, options, false);
  }

  /**
   * Streams the responses of a decoupled model: over gRPC with `ModelStreamInfer`, over HTTP
   * with the generate extension (`/generate_stream`, Server-Sent Events; tensors travel as JSON,
   * so FP16/BF16 and shapes with two variable dimensions above 1 need gRPC). Each message must
   * arrive within `inferenceTimeoutS`. Breaking out of the loop (or aborting `signal`) cancels
   * the request on the server.
   *
   * @param inputs Positional (declared input order) or named tensors.
   * @param options Parameters, headers, outputs, a signal, and `batch` to send a batch.
   * @returns The responses' outputs, one object per response.
   * @throws {ClientInferenceServerError} When the model is not decoupled, or a response is an error.
   * @throws {ClientTimeoutError} When a message takes longer than `inferenceTimeoutS`.
   * @throws {ClientQueueFullError} When the client's queue is full (`maxQueueSize`).
   */
  async *inferStream(
    inputs: ClientInputs,
    options: InferStreamOptions = {},
  ): AsyncGenerator<ClientOutputs, void, undefined> {
    this.#checkOpen("infer");
    // The slot is held until the last response, or until the caller stops reading.
    const release = await this.#calls.acquire(
      `stream from ${this.#modelLabel()}`,
      options.signal,
    );
    try {
      yield* this.#stream(inputs, options);
    } finally {
      release();
    }
  }

  async *#stream(
    inputs: ClientInputs,
    options: InferStreamOptions,
  ): AsyncGenerator<ClientOutputs, void, undefined> {
    const what = `stream from ${this.#modelLabel()}`;
    const config = await this.#ready(options.signal);
    if (!config.decoupled) {
      throw new ClientInferenceServerError(
        `Cannot stream from ${this.#modelLabel()}: it is not decoupled; use inferSample() or inferBatch()`,
      );
    }
    const batch = options.batch ?? false;
    if (batch && !config.batching) {
      throw new ClientModelDoesntSupportBatchingError(
        `Cannot stream a batch with ${this.#modelLabel()}: it does not support batching (max_batch_size is 0)`,
      );
    }
    const batchAxis = !batch && config.batching;
    const { request, headers } = this.#request(inputs, options, config, batchAxis);
    const transport = await this.#getTransport();
    this.#checkOpen(what);
    const stop = new AbortController();
    const signals = [stop.signal, this.#closer.signal];
    if (options.signal !== undefined) signals.push(options.signal);
    const iterator = transport.inferStream(request, {
      signal: AbortSignal.any(signals),
      headers: { ...this.#headers, ...headers },
    })[Symbol.asyncIterator]();
    try {
      while (true) {
        const timer = new AbortController();
        const id = setTimeout(() => {
          timer.abort();
          stop.abort();
        }, this.#inferenceTimeoutMs);
        let step: IteratorResult<TransportInferResponse>;
        try {
          step = await iterator.next();
        } catch (error) {
          throw this.#abortError(
            what,
            error,
            timer.signal,
            this.#inferenceTimeoutMs,
            options.signal,
          );
        } finally {
          clearTimeout(id);
        }
        if (step.done) return;
        yield outputsOf(step.value, batchAxis);
      }
    } finally {
      stop.abort();
      await iterator.return?.();
    }
  }

  /**
   * Asks the server to load the model (repository API); the next call waits for it again.
   *
   * @param options A config and files to load it with.
   * @returns When the server has loaded it.
   * @throws {ClientInferenceServerError} When the server refuses, with its message.
   */
  async loadModel(options: LoadModelOptions = {}): Promise<void> {
    const config = typeof options.config === "object"
      ? JSON.stringify(options.config)
      : options.config;
    await this.#call(
      `load ${this.#modelLabel()}`,
      (transport, call) =>
        transport.loadModel(
          this.#modelName,
          {
            ...(config === undefined ? {} : { config }),
            ...(options.files ? { files: options.files } : {}),
          },
          call,
        ),
      this.#inferenceTimeoutMs,
      options.signal,
    );
    this.#init = undefined;
  }

  /**
   * Asks the server to unload the model (repository API).
   *
   * @param options A signal.
   * @returns When the server has unloaded it.
   * @throws {ClientInferenceServerError} When the server refuses, with its message.
   */
  async unloadModel(options: { signal?: AbortSignal } = {}): Promise<void> {
    await this.#call(
      `unload ${this.#modelLabel()}`,
      (transport, call) => transport.unloadModel(this.#modelName, call),
      this.#inferenceTimeoutMs,
      options.signal,
    );
    this.#init = undefined;
  }

  /**
   * Closes the client: pending calls reject with {@linkcode ClientClosedError}, and so do later
   * ones. Closing twice is fine.
   *
   * @returns When connections are released.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#closer.abort();
    this.#calls.rejectWaiting(
      new ClientClosedError(`Cannot infer with ${this.#modelLabel()}: the client was closed`),
    );
    const transport = this.#transport;
    this.#transport = undefined;
    if (transport !== undefined) {
      try {
        await (await transport).close();
      } catch {
        // Closing must not fail: the connections are gone either way.
      }
    }
  }

  /**
   * Closes the client (`await using`).
   *
   * @returns When connections are released.
   */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
