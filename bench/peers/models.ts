/**
 * The models every peer serves, and each peer's natural HTTP JSON request for them: the same
 * tensors as KServe v2 JSON (DenoTriton, tritonserver), as named fields (FastAPI, LitServe,
 * Ray Serve), or as BentoML's batchable arrays. Every answer is checked against the expected
 * tensors, value by value.
 *
 * @module
 */

/** The models, served alike by every peer. */
export const MODELS = [
  "identity_small",
  "identity_large",
  "add_sub",
  "fixed_5ms",
  "cpu_2",
] as const;

/** A model's name. */
export type ModelName = typeof MODELS[number];

/** How a model is bound on every peer. */
export interface ModelSpec {
  /** The model. */
  readonly name: ModelName;
  /** Heading in the report. */
  readonly title: string;
  /** Elements of each input (and output). */
  readonly elements: number;
  /** Whether the model batches (peers that offer batching batch it, up to 32). */
  readonly batching: boolean;
  /**
   * Which goal its cells are held to: `small` (serving overhead: 2× every peer), `model` (the
   * model's cost dominates: 1.2×) or `data` (a large tensor's JSON: 1.2×).
   */
  readonly kind: "small" | "model" | "data";
}

/** The models' bindings, by name. */
export const MODEL_SPECS: Readonly<Record<ModelName, ModelSpec>> = {
  identity_small: {
    name: "identity_small",
    title: "identity float32[16], no batching — serving overhead",
    elements: 16,
    batching: false,
    kind: "small",
  },
  identity_large: {
    name: "identity_large",
    title: "identity float32[1,048,576], no batching — a large tensor as JSON",
    elements: 1048576,
    batching: false,
    kind: "data",
  },
  add_sub: {
    name: "add_sub",
    title: "add_sub float32[16] × 2, batching (max 32, no wait) — serving and batching overhead",
    elements: 16,
    batching: true,
    kind: "small",
  },
  fixed_5ms: {
    name: "fixed_5ms",
    title:
      "fixed 5 ms per call whatever the batch size, one instance, batching (max 32) — a device-bound model",
    elements: 16,
    batching: true,
    kind: "model",
  },
  cpu_2: {
    name: "cpu_2",
    title: "CPU-bound, ~2 ms of arithmetic per sample, 2 instances, batching (max 32)",
    elements: 16,
    batching: true,
    kind: "model",
  },
};

/** The request shapes the peers speak. */
export type Shape = "kserve" | "fields" | "bentoml";

/** One request of a cell and how to check its answer. */
export interface Exchange {
  /** The request target. */
  readonly path: string;
  /** The JSON body. */
  readonly body: string;
  /**
   * Checks a response body.
   *
   * @returns `undefined` when it is right, else what is wrong.
   */
  readonly check: (body: Uint8Array) => string | undefined;
}

const decoder = new TextDecoder();

/**
 * Input values of variant `v`: multiples of 1/8 below 1024 in magnitude, so they, their sums and
 * their differences are exact in float32 and print the same in Python, C++ and JavaScript.
 *
 * @param elements How many.
 * @param v The variant.
 * @param salt Tells a model's inputs apart.
 * @returns The values.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { inputValues } from "./models.ts";
 *
 * const values = inputValues(16, 1, 0);
 * assert.equal(values.length, 16);
 * assert.ok(values.every((x) => Number.isInteger(x * 8) && Math.abs(x) < 1024));
 * assert.equal(Math.fround(values[3]!), values[3]);
 * ```
 */
export function inputValues(elements: number, v: number, salt: number): number[] {
  const out = new Array<number>(elements);
  for (let i = 0; i < elements; i++) {
    out[i] = (((i * 37 + v * 101 + salt * 53) % 8191) - 4095) / 8;
  }
  return out;
}

/** Where a peer's answer for a model keeps each output, as a flat list of numbers. */
type Outputs = Record<string, readonly number[]>;

function expectedOutputs(model: ModelName, v: number): { inputs: Outputs; outputs: Outputs } {
  const { elements } = MODEL_SPECS[model];
  if (model === "add_sub") {
    const a = inputValues(elements, v, 1);
    const b = inputValues(elements, v, 2);
    return {
      inputs: { a, b },
      outputs: { add: a.map((x, i) => x + b[i]!), sub: a.map((x, i) => x - b[i]!) },
    };
  }
  const x = inputValues(elements, v, 0);
  return { inputs: { x }, outputs: { y: x } };
}

function flat(value: unknown): number[] | undefined {
  if (!Array.isArray(value)) return undefined;
  if (value.every((x) => typeof x === "number")) return value as number[];
  const out: number[] = [];
  for (const item of value) {
    const inner = flat(item);
    if (inner === undefined) return undefined;
    for (const x of inner) out.push(x);
  }
  return out;
}

function sameValues(name: string, got: unknown, want: readonly number[]): string | undefined {
  const values = flat(got);
  if (values === undefined) return `${name}: not a list of numbers`;
  if (values.length !== want.length) {
    return `${name}: ${values.length} values, expected ${want.length}`;
  }
  for (let i = 0; i < want.length; i++) {
    if (values[i] !== want[i]) return `${name}[${i}] = ${values[i]}, expected ${want[i]}`;
  }
  return undefined;
}

function parse(body: Uint8Array): unknown {
  return JSON.parse(decoder.decode(body));
}

/**
 * The request for variant `v` of a model in a peer's shape, with its check.
 *
 * - `kserve`: `POST /v2/models/<model>/infer`, KServe v2 JSON tensors (shape `[1, n]` where the
 *   model batches);
 * - `fields`: `POST <path>` with `{"x": [...]}` or `{"a": [...], "b": [...]}`, answered with
 *   `{"y": [...]}` or `{"add": [...], "sub": [...]}`;
 * - `bentoml`: `POST /<model>` with `{"x": ...}`, answered with the array itself: a batch of one
 *   (`[[...]]`) where the model batches, add_sub's two inputs stacked as `[[a, b]]` (a batchable
 *   BentoML API takes one argument) and answered as `[[add, sub]]`.
 *
 * @param shape The peer's shape.
 * @param model The model.
 * @param v The variant.
 * @param path The target for `fields` (each such peer routes its own way).
 * @returns The exchange.
 *
 * @example A KServe v2 request and its answer
 * ```ts
 * import assert from "node:assert/strict";
 * import { exchange } from "./models.ts";
 *
 * const identity = exchange("kserve", "identity_small", 0);
 * assert.equal(identity.path, "/v2/models/identity_small/infer");
 * const x = JSON.parse(identity.body).inputs[0];
 * assert.deepEqual(x.shape, [16]);
 * const answer = { outputs: [{ name: "y", datatype: "FP32", shape: [16], data: x.data }] };
 * assert.equal(identity.check(new TextEncoder().encode(JSON.stringify(answer))), undefined);
 * answer.outputs[0]!.data = [...x.data.slice(1), 0];
 * assert.match(identity.check(new TextEncoder().encode(JSON.stringify(answer)))!, /^y\[0\] = /);
 * ```
 */
export function exchange(shape: Shape, model: ModelName, v: number, path = `/${model}`): Exchange {
  const spec = MODEL_SPECS[model];
  const { inputs, outputs } = expectedOutputs(model, v);
  if (shape === "kserve") {
    const dims = spec.batching ? [1, spec.elements] : [spec.elements];
    return {
      path: `/v2/models/${model}/infer`,
      body: JSON.stringify({
        inputs: Object.entries(inputs).map(([name, data]) => ({
          name,
          shape: dims,
          datatype: "FP32",
          data,
        })),
      }),
      check(body): string | undefined {
        const answer = parse(body) as {
          outputs?: { name: string; shape: number[]; data: unknown }[];
        };
        for (const [name, want] of Object.entries(outputs)) {
          const output = answer.outputs?.find((o) => o.name === name);
          if (output === undefined) return `no output ${name}`;
          if (output.shape.join(",") !== dims.join(",")) {
            return `${name}: shape [${output.shape}], expected [${dims}]`;
          }
          const wrong = sameValues(name, output.data, want);
          if (wrong !== undefined) return wrong;
        }
        return undefined;
      },
    };
  }
  if (shape === "fields") {
    return {
      path,
      body: JSON.stringify(inputs),
      check(body): string | undefined {
        const answer = parse(body) as Record<string, unknown>;
        for (const [name, want] of Object.entries(outputs)) {
          const wrong = sameValues(name, answer[name], want);
          if (wrong !== undefined) return wrong;
        }
        return undefined;
      },
    };
  }
  // BentoML: one argument, x; a batch of one where the model batches.
  const x = model === "add_sub" ? [inputs["a"], inputs["b"]] : inputs["x"];
  const want = model === "add_sub" ? [...outputs["add"]!, ...outputs["sub"]!] : outputs["y"]!;
  const depth = (model === "add_sub" ? 3 : 2) - (spec.batching ? 0 : 1);
  return {
    path: `/${model}`,
    body: JSON.stringify({ x: spec.batching ? [x] : x }),
    check(body): string | undefined {
      const answer = parse(body);
      let level = answer;
      for (let d = 0; d < depth; d++) {
        if (!Array.isArray(level)) return `answer nested ${d} deep, expected ${depth}`;
        level = level[0];
      }
      return sameValues("answer", answer, want);
    },
  };
}
