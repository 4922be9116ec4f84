import assert from "node:assert/strict";
import { type NDArray, ndarray } from "../../tensor/ndarray.ts";
import type { InferResult } from "../types.ts";
import {
  batch,
  type ContextInputs,
  fillOptionals,
  firstValue,
  groupByKeys,
  groupByValues,
  tritonContext,
} from "./mod.ts";
import { makeContext, makeRequest, values } from "./_test_util.ts";

const context = makeContext({
  name: "Generate",
  inputs: [
    { name: "prompt", dtype: "bytes", shape: [1] },
    { name: "temperature", dtype: "float32", shape: [1], optional: true },
    { name: "top_k", dtype: "int32", shape: [1], optional: true },
  ],
  outputs: [
    { name: "text", dtype: "bytes", shape: [1] },
    { name: "used_temperature", dtype: "float32", shape: [1] },
  ],
  config: { maxBatchSize: 8 },
});

const prompts = (...texts: string[]): NDArray => ndarray(texts, [texts.length, 1]);
const temperatures = (...values: number[]): NDArray =>
  ndarray(new Float32Array(values), [values.length, 1]);

const requests = () => [
  makeRequest({ prompt: prompts("a", "b") }),
  makeRequest({ prompt: prompts("c"), temperature: temperatures(0.5) }),
  makeRequest({
    prompt: prompts("d"),
    temperature: temperatures(1),
    top_k: ndarray(new Int32Array([5]), [1, 1]),
  }),
  makeRequest({ prompt: prompts("e", "f"), temperature: temperatures(0.5, 0.5) }),
];

interface Call {
  prompts: (number | string)[];
  temperatureShape: readonly number[];
  temperature: number;
  topK: (number | string)[] | undefined;
  model: string;
}

function generate(calls: Call[]): (inputs: ContextInputs) => Record<string, NDArray> {
  return ({ prompt, temperature, top_k, tritonContext }: ContextInputs) => {
    calls.push({
      prompts: values(prompt),
      temperatureShape: temperature!.shape,
      temperature: values(temperature)[0] as number,
      topK: top_k === undefined ? undefined : values(top_k),
      model: tritonContext.model.name,
    });
    const rows = prompt!.shape[0]!;
    const used = (temperature!.data as Float32Array)[0]!;
    return {
      text: prompt!,
      used_temperature: ndarray(new Float32Array(rows).fill(used), [rows, 1]),
    };
  };
}

const expectedCalls: Call[] = [
  // Group of requests without top_k; its samples split by temperature (0.5 sorts first by bytes).
  {
    prompts: ["c", "e", "f"],
    temperatureShape: [],
    temperature: 0.5,
    topK: undefined,
    model: "Generate",
  },
  { prompts: ["a", "b"], temperatureShape: [], temperature: 1, topK: undefined, model: "Generate" },
  // The request with top_k forms its own group.
  { prompts: ["d"], temperatureShape: [], temperature: 1, topK: [5], model: "Generate" },
];

function check(results: InferResult[]): void {
  assert.deepEqual(results.map((r) => values(r.text)), [["a", "b"], ["c"], ["d"], ["e", "f"]]);
  assert.deepEqual(
    results.map((r) => values(r.used_temperature)),
    [[1, 1], [0.5], [1], [0.5, 0.5]],
  );
}

Deno.test("the decorators stack in PyTriton's recommended order", () => {
  const calls: Call[] = [];
  const infer = fillOptionals(
    { temperature: new Float32Array([1]) },
    groupByKeys(batch(groupByValues(
      ["temperature"],
      firstValue(["temperature"], tritonContext(generate(calls))),
    ))),
  );
  const results = infer(requests(), context) as InferResult[];
  assert.deepEqual(calls, expectedCalls);
  check(results);
});

Deno.test("the stacked decorators resolve an async function", async () => {
  const calls: Call[] = [];
  const sync = generate(calls);
  const infer = fillOptionals(
    { temperature: new Float32Array([1]) },
    groupByKeys(batch(groupByValues(
      ["temperature"],
      firstValue(
        ["temperature"],
        tritonContext(async (inputs) => {
          await new Promise((resolve) => setTimeout(resolve, 1));
          return sync(inputs);
        }),
      ),
    ))),
  );
  const pending = infer(requests(), context);
  assert.ok(pending instanceof Promise);
  check(await pending);
  assert.deepEqual(calls, expectedCalls);
});

Deno.test("the stacked decorators accept an object with an infer method at the bottom", () => {
  class Generator {
    readonly calls: Call[] = [];
    #generate = generate(this.calls);
    infer(inputs: ContextInputs): Record<string, NDArray> {
      return this.#generate(inputs);
    }
  }
  const model = new Generator();
  const infer = fillOptionals(
    { temperature: new Float32Array([1]) },
    groupByKeys(
      batch(groupByValues(["temperature"], firstValue(["temperature"], tritonContext(model)))),
    ),
  );
  check(infer(requests(), context) as InferResult[]);
  assert.deepEqual(model.calls, expectedCalls);
});
