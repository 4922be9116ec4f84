/**
 * What a bound model is, as every layer above the configuration sees it: its name, version,
 * resolved tensors and serving configuration ({@linkcode ModelInfo}, which callables get in
 * `InferContext.model`), and how it is served on the OpenAI API. It lives here, below the
 * callables, the engines and the wire protocol, because all of them read it, and so does
 * Triton's model-config JSON (`triton_model_config.ts`).
 *
 * @module
 */

import type { ResolvedEnsemble } from "./ensemble.ts";
import type { ResolvedModelConfig } from "./model_config.ts";
import type { ResolvedTensorSpec } from "./tensor_spec.ts";

/** What the model sees of itself: the bound configuration, given to every call. */
export interface ModelInfo {
  /** Model name. */
  readonly name: string;
  /** Model version. */
  readonly version: number;
  /** Declared inputs. */
  readonly inputs: readonly ResolvedTensorSpec[];
  /** Declared outputs. */
  readonly outputs: readonly ResolvedTensorSpec[];
  /** Resolved serving configuration. */
  readonly config: ResolvedModelConfig;
  /** Whether outputs are validated strictly. */
  readonly strict: boolean;
  /** How the model is served on the OpenAI API; `undefined` when it is not. */
  readonly openai?: OpenAIServing;
  /**
   * The steps when the model is an ensemble (Triton's platform `ensemble`): it has no callable
   * and no instances of its own, and runs its steps' models; `undefined` for other models.
   */
  readonly ensemble?: ResolvedEnsemble;
}

/** The endpoints of the OpenAI API a model can serve. */
export type OpenAIEndpoint = "chat" | "completions" | "embeddings";

/**
 * How a model is served on the OpenAI API (`ModelInfo.openai`): which endpoints name it in their
 * `model` field, and what `GET /v1/models` says of it.
 */
export interface OpenAIServing {
  /** The endpoints: `chat` (`/v1/chat/completions`), `completions`, `embeddings`. */
  readonly endpoints: readonly OpenAIEndpoint[];
  /** `owned_by` in `/v1/models`. */
  readonly ownedBy: string;
  /** `created` in `/v1/models` (seconds since the epoch): when it was bound. */
  readonly created: number;
}
