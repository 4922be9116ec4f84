/**
 * The contract between `ModelClient` and its protocol transports (HTTP, gRPC): protocol-neutral
 * requests and responses, and the calls a client makes.
 *
 * @module
 */

import type { NDArray } from "../tensor/ndarray.ts";
import type { DType } from "../tensor/dtype.ts";
import type { ClientProtocol } from "./url.ts";

/** A request parameter or header-like value. */
export type ClientParameterValue = string | number | boolean;

/** A declared tensor, as the generate codec (`http_generate.ts`) needs it. */
export interface GenerateTensorSpec {
  /** The name. */
  readonly name: string;
  /** The element type. */
  readonly dtype: DType;
  /** The dimensions, with a leading `-1` when the model batches. */
  readonly shape: readonly number[];
}

/** The shape information the generate wire lacks. */
export interface GenerateSpecs {
  /** The model's inputs. */
  readonly inputs: readonly GenerateTensorSpec[];
  /** The model's outputs. */
  readonly outputs: readonly GenerateTensorSpec[];
}

/** An inference request, protocol-neutral. */
export interface TransportInferRequest {
  /** The model name. */
  readonly modelName: string;
  /** The model version; `undefined` for the server's choice. */
  readonly modelVersion: string | undefined;
  /** The request id. */
  readonly id: string;
  /** Inputs in wire order. */
  readonly inputs: readonly (readonly [name: string, tensor: NDArray])[];
  /** Requested outputs; empty for all of them. */
  readonly outputs: readonly string[];
  /** Request parameters. */
  readonly parameters: Readonly<Record<string, ClientParameterValue>>;
  /**
   * The model's declared tensors (shapes with a leading `-1` when it batches), for protocols
   * whose messages carry no shapes (HTTP's generate extension).
   */
  readonly declared?: GenerateSpecs;
}

/** An inference response, protocol-neutral. */
export interface TransportInferResponse {
  /** The model that answered. */
  readonly modelName: string;
  /** The version that answered. */
  readonly modelVersion: string;
  /** The request id echoed back (`""` when none). */
  readonly id: string;
  /** Response parameters. */
  readonly parameters: Readonly<Record<string, ClientParameterValue>>;
  /** Outputs by name, in the server's order. */
  readonly outputs: Record<string, NDArray>;
}

/** What every transport call gets. */
export interface TransportCallOptions {
  /** Aborts the call (timeout, user signal, client closed). */
  readonly signal: AbortSignal;
  /** Extra HTTP headers / gRPC metadata, the access token included. */
  readonly headers: Readonly<Record<string, string>>;
}

/** Parameters of a repository load. */
export interface TransportLoadOptions {
  /** The model config as a JSON string. */
  readonly config?: string;
  /** Files keyed `file:<version>/<name>`. */
  readonly files?: Readonly<Record<string, Uint8Array>>;
}

/** One protocol's implementation of the client calls. */
export interface Transport {
  /** The protocol. */
  readonly protocol: ClientProtocol;
  /** Whether the server is ready. */
  serverReady(options: TransportCallOptions): Promise<boolean>;
  /** Whether the model (version) is ready. */
  modelReady(
    name: string,
    version: string | undefined,
    options: TransportCallOptions,
  ): Promise<boolean>;
  /** The model's config as Triton's model-config JSON. */
  modelConfig(
    name: string,
    version: string | undefined,
    options: TransportCallOptions,
  ): Promise<Record<string, unknown>>;
  /** Runs one inference. */
  infer(
    request: TransportInferRequest,
    options: TransportCallOptions,
  ): Promise<TransportInferResponse>;
  /**
   * Streams the responses of one request to a decoupled model; ends after the final response.
   * Aborting `options.signal` cancels the stream.
   */
  inferStream(
    request: TransportInferRequest,
    options: TransportCallOptions,
  ): AsyncIterable<TransportInferResponse>;
  /** Asks the server to load a model. */
  loadModel(name: string, load: TransportLoadOptions, options: TransportCallOptions): Promise<void>;
  /** Asks the server to unload a model. */
  unloadModel(name: string, options: TransportCallOptions): Promise<void>;
  /** Releases connections. */
  close(): Promise<void>;
}
