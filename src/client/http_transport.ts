/**
 * The HTTP/REST transport: KServe v2 routes over `fetch`, binary tensor data both ways.
 *
 * @module
 */

import { QUEUE_FULL_MESSAGE } from "../errors.ts";
import {
  ClientError,
  ClientInferenceServerError,
  ClientModelUnavailableError,
  ClientQueueFullError,
  ClientTimeoutError,
  ClientValueError,
} from "./errors.ts";
import { decodeHttpInferResponse, encodeHttpInferRequest } from "./http_codec.ts";
import { HEADER_LENGTH_HEADER } from "../protocol/binary_data.ts";
import { decodeGenerateResponse, encodeGenerateRequest } from "./http_generate.ts";
import { sseData } from "../protocol/generate.ts";
import type {
  Transport,
  TransportCallOptions,
  TransportInferRequest,
  TransportInferResponse,
  TransportLoadOptions,
} from "./transport.ts";
import type { TritonUrl } from "./url.ts";

/**
 * Turns an HTTP error answer into a client error: the server's `{"error": ...}` message and
 * status; a full queue gives {@linkcode ClientQueueFullError}.
 *
 * @param what What was being done, e.g. `"Inference failed"`.
 * @param status The HTTP status.
 * @param text The response body.
 * @returns The error to throw.
 *
 * @example Queue full
 * ```ts
 * import { httpErrorOf } from "./http_transport.ts";
 * import { ClientQueueFullError } from "./errors.ts";
 * import assert from "node:assert/strict";
 *
 * const error = httpErrorOf("Inference failed", 503, '{"error":"Exceeds maximum queue size"}');
 * assert.ok(error instanceof ClientQueueFullError);
 * assert.equal(error.message, "Inference failed: Exceeds maximum queue size (HTTP 503)");
 * ```
 */
export function httpErrorOf(
  what: string,
  status: number,
  text: string,
): ClientInferenceServerError {
  let message = text.trim();
  try {
    const json = JSON.parse(text);
    if (typeof json?.error === "string") message = json.error;
  } catch {
    // Not JSON: keep the text as it is.
  }
  if (message === "") message = "no error message";
  const options = { status, serverMessage: message };
  const full = `${what}: ${message} (HTTP ${status})`;
  if (status === 503 && message.includes(QUEUE_FULL_MESSAGE)) {
    return new ClientQueueFullError(full, options);
  }
  return new ClientInferenceServerError(full, options);
}

function toBase64(bytes: Uint8Array): string {
  let text = "";
  const chunk = 0x8000;
  for (let i = 0; i < bytes.byteLength; i += chunk) {
    text += String.fromCharCode(...bytes.subarray(i, i + chunk));
  }
  return btoa(text);
}

function modelPath(name: string, version: string | undefined): string {
  const base = `/v2/models/${encodeURIComponent(name)}`;
  return version === undefined ? base : `${base}/versions/${encodeURIComponent(version)}`;
}

/**
 * The HTTP transport of `ModelClient`.
 *
 * @example Not ready when nothing listens
 * ```ts
 * import { HttpTransport } from "./http_transport.ts";
 * import { parseTritonUrl } from "./url.ts";
 * import assert from "node:assert/strict";
 *
 * using listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
 * const port = listener.addr.port;
 * listener.close();
 * const transport = new HttpTransport(parseTritonUrl(`127.0.0.1:${port}`));
 * await assert.rejects(
 *   transport.serverReady({ signal: AbortSignal.timeout(5000), headers: {} }),
 *   /Cannot reach server/,
 * );
 * await transport.close();
 * ```
 */
export class HttpTransport implements Transport {
  /** Always `"http"`. */
  readonly protocol = "http" as const;
  #base: string;
  #client: Deno.HttpClient;

  /**
   * Creates a transport; connections open lazily.
   *
   * @param url The server URL.
   */
  constructor(url: TritonUrl) {
    this.#base = `http://${url.withoutScheme}`;
    this.#client = Deno.createHttpClient({});
  }

  async #fetch(path: string, init: RequestInit, options: TransportCallOptions): Promise<Response> {
    // fetch() asks for gzip by default, and compressing large tensors costs far more than the
    // loopback or LAN transfer it saves: like tritonclient, ask for compression only on request.
    const headers = new Headers(init.headers);
    if (!headers.has("accept-encoding")) headers.set("accept-encoding", "identity");
    for (const [key, value] of Object.entries(options.headers)) headers.set(key, value);
    try {
      return await fetch(`${this.#base}${path}`, {
        ...init,
        headers,
        signal: options.signal,
        client: this.#client,
      });
    } catch (error) {
      if (options.signal.aborted || error instanceof ClientError) throw error;
      throw new ClientTimeoutError(
        `Cannot reach server at ${this.#base}: ${(error as Error).message}`,
        { cause: error },
      );
    }
  }

  async #status(path: string, options: TransportCallOptions): Promise<boolean> {
    const response = await this.#fetch(path, { method: "GET" }, options);
    await response.body?.cancel();
    return response.status === 200;
  }

  /** Whether `GET /v2/health/ready` answers 200. */
  serverReady(options: TransportCallOptions): Promise<boolean> {
    return this.#status("/v2/health/ready", options);
  }

  /** Whether `GET /v2/models/{m}[/versions/{v}]/ready` answers 200. */
  modelReady(
    name: string,
    version: string | undefined,
    options: TransportCallOptions,
  ): Promise<boolean> {
    return this.#status(`${modelPath(name, version)}/ready`, options);
  }

  /** `GET /v2/models/{m}[/versions/{v}]/config`. */
  async modelConfig(
    name: string,
    version: string | undefined,
    options: TransportCallOptions,
  ): Promise<Record<string, unknown>> {
    const response = await this.#fetch(
      `${modelPath(name, version)}/config`,
      { method: "GET" },
      options,
    );
    const text = await response.text();
    if (response.status === 404) {
      const error = httpErrorOf(`Cannot get config of model '${name}'`, 404, text);
      throw new ClientModelUnavailableError(error.message, { cause: error });
    }
    if (!response.ok) {
      throw httpErrorOf(`Cannot get config of model '${name}'`, response.status, text);
    }
    try {
      const json = JSON.parse(text);
      if (typeof json === "object" && json !== null && !Array.isArray(json)) return json;
    } catch {
      // Reported below.
    }
    throw new ClientInferenceServerError(
      `Cannot get config of model '${name}': the answer is not a JSON object`,
      { status: response.status },
    );
  }

  /** `POST /v2/models/{m}[/versions/{v}]/infer` with binary inputs and outputs. */
  async infer(
    request: TransportInferRequest,
    options: TransportCallOptions,
  ): Promise<TransportInferResponse> {
    const { body, headerLength } = encodeHttpInferRequest(request);
    const response = await this.#fetch(
      `${modelPath(request.modelName, request.modelVersion)}/infer`,
      {
        method: "POST",
        body,
        headers: {
          "content-type": "application/octet-stream",
          [HEADER_LENGTH_HEADER]: String(headerLength),
        },
      },
      options,
    );
    const bytes = new Uint8Array(await response.arrayBuffer());
    if (!response.ok) {
      throw httpErrorOf("Inference failed", response.status, new TextDecoder().decode(bytes));
    }
    const length = response.headers.get(HEADER_LENGTH_HEADER);
    return decodeHttpInferResponse(bytes, length === null ? undefined : Number(length));
  }

  /**
   * `POST /v2/models/{m}[/versions/{v}]/generate_stream`: one response per Server-Sent Event, an
   * `error` event fails the stream. Needs `request.declared` (the model's tensors).
   */
  async *inferStream(
    request: TransportInferRequest,
    options: TransportCallOptions,
  ): AsyncGenerator<TransportInferResponse, void, undefined> {
    const declared = request.declared;
    if (declared === undefined) {
      throw new ClientValueError("Cannot stream over HTTP: the model's tensors are not known");
    }
    const body = encodeGenerateRequest(request, declared);
    const response = await this.#fetch(
      `${modelPath(request.modelName, request.modelVersion)}/generate_stream`,
      {
        method: "POST",
        body,
        headers: { "content-type": "application/json", accept: "text/event-stream" },
      },
      options,
    );
    if (!response.ok || response.body === null) {
      throw httpErrorOf("Inference failed", response.status, await response.text());
    }
    if (!(response.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
      const text = await response.text();
      yield decodeGenerateResponse(text, declared, response.status);
      return;
    }
    for await (const data of sseData(response.body)) {
      yield decodeGenerateResponse(data, declared, response.status);
    }
  }

  async #repository(
    path: string,
    body: unknown,
    what: string,
    options: TransportCallOptions,
  ): Promise<void> {
    const response = await this.#fetch(path, {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "content-type": "application/json" },
    }, options);
    const text = await response.text();
    if (!response.ok) throw httpErrorOf(what, response.status, text);
  }

  /** `POST /v2/repository/models/{m}/load`. */
  loadModel(
    name: string,
    load: TransportLoadOptions,
    options: TransportCallOptions,
  ): Promise<void> {
    const parameters: Record<string, string> = {};
    if (load.config !== undefined) parameters["config"] = load.config;
    for (const [key, bytes] of Object.entries(load.files ?? {})) parameters[key] = toBase64(bytes);
    const body = Object.keys(parameters).length > 0 ? { parameters } : {};
    return this.#repository(
      `/v2/repository/models/${encodeURIComponent(name)}/load`,
      body,
      `Cannot load model '${name}'`,
      options,
    );
  }

  /** `POST /v2/repository/models/{m}/unload`. */
  unloadModel(name: string, options: TransportCallOptions): Promise<void> {
    return this.#repository(
      `/v2/repository/models/${encodeURIComponent(name)}/unload`,
      {},
      `Cannot unload model '${name}'`,
      options,
    );
  }

  /** Closes the connection pool. */
  close(): Promise<void> {
    this.#client.close();
    return Promise.resolve();
  }
}
