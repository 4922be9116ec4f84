/**
 * What a route says of itself in the OpenAPI document: a summary, its request body, its
 * responses with their schemas, and, where a route's wire form depends on the model, the
 * operation it becomes for one model. A route table carries a {@linkcode RouteDoc} beside each
 * handler (`Router.add`), and `openapi.ts` walks the tables, so what is described is what is
 * served.
 *
 * The types are a small subset of OpenAPI 3.1's operation object, with JSON Schema 2020-12
 * schemas (OpenAPI 3.1's dialect).
 *
 * @module
 */

import type { ModelHandle } from "../../engine/engine.ts";

/** A JSON Schema (2020-12), as plain JSON. */
export type JsonSchema = boolean | { readonly [keyword: string]: unknown };

/** A named example of a body. */
export interface ExampleDoc {
  /** What it shows, in a line. */
  readonly summary: string;
  /** The value. */
  readonly value: unknown;
}

/** One media type of a body: its schema and examples a docs page can send as they are. */
export interface MediaDoc {
  /** The body's schema. */
  readonly schema: JsonSchema;
  /** An example value. */
  readonly example?: unknown;
  /** Named examples, when there are several (OpenAPI allows `example` or `examples`). */
  readonly examples?: Readonly<Record<string, ExampleDoc>>;
}

/** A request or response header. */
export interface HeaderDoc {
  /** What it means. */
  readonly description: string;
  /** Its value's schema. */
  readonly schema: JsonSchema;
  /** Whether it must be sent (request headers only). */
  readonly required?: boolean;
}

/** A request body. */
export interface BodyDoc {
  /** What it holds. */
  readonly description?: string;
  /** Whether a request must have one. */
  readonly required?: boolean;
  /** Its media types. */
  readonly content: Readonly<Record<string, MediaDoc>>;
}

/** One response. */
export interface ResponseDoc {
  /** When it is sent. */
  readonly description: string;
  /** Its media types; none for an empty body. */
  readonly content?: Readonly<Record<string, MediaDoc>>;
  /** Its headers. */
  readonly headers?: Readonly<Record<string, HeaderDoc>>;
}

/** The parts of an operation that one model changes. */
export interface ModelOperationDoc {
  /** The request body for this model. */
  readonly requestBody?: BodyDoc;
  /** Responses for this model, replacing those of the same status. */
  readonly responses?: Readonly<Record<string, ResponseDoc>>;
}

/** A route's description. */
export interface RouteDoc {
  /** A unique name of the operation (a versioned path adds `Version`). */
  readonly operationId: string;
  /** One line. */
  readonly summary: string;
  /** More, in CommonMark. */
  readonly description?: string;
  /** The tag that groups it on the docs page; the route's endpoint group by default. */
  readonly tag?: string;
  /** Request headers beside the body. */
  readonly headers?: Readonly<Record<string, HeaderDoc>>;
  /** The request body. */
  readonly requestBody?: BodyDoc;
  /** Every status the route answers itself, besides the access check's 401 and 403. */
  readonly responses: Readonly<Record<string, ResponseDoc>>;
  /**
   * For a route under `/v2/models/{model}` whose bodies follow the model's tensors: the
   * operation at that model's own path, or `undefined` where the route does not serve it.
   */
  readonly forModel?: (model: ModelHandle) => ModelOperationDoc | undefined;
  /**
   * For a route whose body names a model (OpenAI's `model` field): the operation given every
   * model the server serves at the moment the document is built (the field's enum, examples
   * naming one), or `undefined` to keep the generic one (no model fits).
   */
  readonly forModels?: (models: readonly ModelHandle[]) => ModelOperationDoc | undefined;
}

/** The name of the access token's security scheme (the `triton-access-token` header). */
export const ACCESS_TOKEN_SCHEME = "tritonAccessToken";

/** `application/json`. */
export const JSON_TYPE = "application/json";

/**
 * A JSON body.
 *
 * @param schema Its schema.
 * @param example An example value.
 * @returns The media types.
 *
 * @example Wrap a schema as a JSON body
 * ```ts
 * import { jsonContent } from "./route_doc.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(jsonContent({ type: "object" }), {
 *   "application/json": { schema: { type: "object" } },
 * });
 * ```
 */
export function jsonContent(
  schema: JsonSchema,
  example?: unknown,
): Readonly<Record<string, MediaDoc>> {
  return { [JSON_TYPE]: example === undefined ? { schema } : { schema, example } };
}

/**
 * A reference to a schema of the document's components.
 *
 * @param name The component's name.
 * @returns The `$ref` schema.
 *
 * @example Refer to the Error schema
 * ```ts
 * import { schemaRef } from "./route_doc.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(schemaRef("Error"), { $ref: "#/components/schemas/Error" });
 * ```
 */
export function schemaRef(name: string): JsonSchema {
  return { $ref: `#/components/schemas/${name}` };
}

/**
 * Error responses, each Triton's `{"error": "..."}` body.
 *
 * @param statuses When each status is sent, by status.
 * @returns The responses.
 *
 * @example Describe a 404
 * ```ts
 * import { errorResponses } from "./route_doc.ts";
 * import assert from "node:assert/strict";
 *
 * const responses = errorResponses({ 404: "Unknown model" });
 * assert.equal(responses["404"]?.description, "Unknown model");
 * ```
 */
export function errorResponses(
  statuses: Readonly<Record<number, string>>,
): Record<string, ResponseDoc> {
  return Object.fromEntries(
    Object.entries(statuses).map((
      [status, description],
    ) => [status, { description, content: jsonContent(schemaRef("Error")) }]),
  );
}

/** Errors of a route that reads a request body. */
export const BODY_ERRORS: Readonly<Record<number, string>> = {
  400: "The body is not valid (its JSON, its fields, or its compressed form)",
  413: "The body, or its decompressed form, is over the server's `maxRequestBytes`",
  501: "The body's Content-Encoding is not gzip, deflate or identity",
};

/** Errors of a route that looks a model up. */
export const MODEL_ERRORS: Readonly<Record<number, string>> = {
  404: "The server does not know the model or the version",
  503: "The model was unloaded (the repository extension) or is not ready",
};
