/**
 * Wire rules of Triton's generate extension (`/generate`, `/generate_stream`), one set for the
 * front end (`frontend/http/generate.ts`) and the client (`client/http_generate.ts`):
 *
 * - A request is one JSON object: `id` (a string), `parameters` (an object), and every other key
 *   an input (when it names one of the model's) or a request parameter; the keys of `parameters`
 *   may name inputs too ({@linkcode GENERATE_RESERVED_KEYS}).
 * - A response is one JSON object: `model_name`, `model_version`, `id`
 *   ({@linkcode GENERATE_METADATA_KEYS}), and one key per output or response parameter. A failure
 *   after responses were streamed is an object with only `error`
 *   ({@linkcode generateErrorJson}).
 * - A tensor is a scalar or a flat list of its elements ({@linkcode generateValue},
 *   {@linkcode generateElements}); the JSON carries no shapes, so a value of `count` elements
 *   fills a declared shape by {@linkcode generateShape}'s rule. The front end shapes request
 *   inputs with it, the client response outputs, and refuses inputs it cannot reproduce.
 * - `/generate_stream` answers Server-Sent Events, one `data: <object>` event per response
 *   ({@linkcode sseEvent}, {@linkcode sseData}).
 *
 * @module
 */

/**
 * The shape `count` elements take for a declared `shape`, as Triton 2.51's generate endpoint
 * computes it: the fixed dimensions first, the innermost `-1` takes the remaining elements and
 * every other `-1` is 1.
 *
 * @param shape The declared shape, batch axis included (`-1` for variable dimensions).
 * @param count The number of elements given.
 * @returns The concrete shape, or `undefined` when the elements cannot fill it.
 *
 * @example Fill the free dimensions; a fixed shape that does not fit
 * ```ts
 * import { generateShape } from "./generate.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(generateShape([-1, -1], 3), [1, 3]);
 * assert.deepEqual(generateShape([-1, 2], 6), [3, 2]);
 * assert.equal(generateShape([4], 3), undefined);
 * ```
 */
export function generateShape(shape: readonly number[], count: number): number[] | undefined {
  const result = [...shape];
  let remaining = count;
  for (const dim of result) {
    if (dim === -1) continue;
    if (dim === 0 ? remaining !== 0 : remaining % dim !== 0) return undefined;
    remaining = dim === 0 ? 0 : remaining / dim;
  }
  for (let i = result.length - 1; i >= 0; i--) {
    if (result[i] === -1) {
      result[i] = remaining;
      remaining = 1;
    }
  }
  return remaining === 1 || (remaining === 0 && count === 0) ? result : undefined;
}

/**
 * The keys of a generate request object that are never an input: the request id, and the
 * object of parameters (whose own keys may name inputs).
 *
 * @example The id and parameters keys
 * ```ts
 * import { GENERATE_RESERVED_KEYS } from "./generate.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual([...GENERATE_RESERVED_KEYS], ["id", "parameters"]);
 * ```
 */
export const GENERATE_RESERVED_KEYS: ReadonlySet<string> = new Set(["id", "parameters"]);

/**
 * The keys of a generate response object that are not outputs or response parameters.
 *
 * @example The model version is metadata
 * ```ts
 * import { GENERATE_METADATA_KEYS } from "./generate.ts";
 * import assert from "node:assert/strict";
 *
 * assert.ok(GENERATE_METADATA_KEYS.has("model_version"));
 * ```
 */
export const GENERATE_METADATA_KEYS: ReadonlySet<string> = new Set([
  "model_name",
  "model_version",
  "id",
]);

/** The key of the object that reports a failure on `/generate_stream`. */
export const GENERATE_ERROR_KEY = "error";

/**
 * The object a stream's failure is reported as.
 *
 * @param message The failure's message.
 * @returns The JSON text.
 *
 * @example A stream's failure as JSON
 * ```ts
 * import { generateErrorJson } from "./generate.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(generateErrorJson("model failed"), '{"error":"model failed"}');
 * ```
 */
export function generateErrorJson(message: string): string {
  return JSON.stringify({ [GENERATE_ERROR_KEY]: message });
}

/**
 * A tensor's value in a generate object: its only element, or the flat list of them.
 *
 * @param elements The tensor's elements, row-major.
 * @returns The value.
 *
 * @example One element alone, several as a list
 * ```ts
 * import { generateValue } from "./generate.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(generateValue(["hi"]), "hi");
 * assert.deepEqual(generateValue([1, 2]), [1, 2]);
 * ```
 */
export function generateValue(elements: readonly unknown[]): unknown {
  return elements.length === 1 ? elements[0] : elements;
}

/**
 * The elements a generate object's value holds: a list's, or the scalar alone.
 *
 * @param value The value.
 * @returns The elements, row-major.
 *
 * @example A scalar and a list
 * ```ts
 * import { generateElements } from "./generate.ts";
 * import assert from "node:assert/strict";
 *
 * assert.deepEqual(generateElements("hi"), ["hi"]);
 * assert.deepEqual(generateElements([1, 2]), [1, 2]);
 * ```
 */
export function generateElements(value: unknown): readonly unknown[] {
  return Array.isArray(value) ? value : [value];
}

const encoder = new TextEncoder();

/**
 * One Server-Sent Event of `/generate_stream`.
 *
 * @param json The event's object, as JSON text (one line).
 * @returns The event's bytes.
 *
 * @example Frame one JSON object as an event
 * ```ts
 * import { sseEvent } from "./generate.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(new TextDecoder().decode(sseEvent('{"a":1}')), 'data: {"a":1}\n\n');
 * ```
 */
export function sseEvent(json: string): Uint8Array {
  return encoder.encode(`data: ${json}\n\n`);
}

/**
 * Splits a Server-Sent Events byte stream into the `data` of each event (multi-line data joined
 * with `\n`; comments, `event:`, `id:` and `retry:` fields ignored).
 *
 * @param body The response body.
 * @returns The data of each event, as they arrive.
 *
 * @example Skip a comment, join multi-line data
 * ```ts
 * import { sseData } from "./generate.ts";
 * import assert from "node:assert/strict";
 *
 * const body = new Response(": hi\n\ndata: {\"a\":1}\r\n\r\ndata:x\ndata: y\n\n").body!;
 * assert.deepEqual(await Array.fromAsync(sseData(body)), ['{"a":1}', "x\ny"]);
 * ```
 */
export async function* sseData(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<string, void, undefined> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data: string[] = [];
  try {
    while (true) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += value;
      let newline: number;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
        if (line === "") {
          if (data.length > 0) yield data.join("\n");
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
        }
      }
    }
    if (data.length > 0) yield data.join("\n");
  } finally {
    await reader.cancel().catch(() => {});
  }
}
