import assert from "node:assert/strict";
import { TritonValidationError } from "../errors.ts";
import { ensembleSchedulingJson, type EnsembleStepSpec, resolveEnsemble } from "./ensemble.ts";
import type { ResolvedTensorSpec } from "./tensor_spec.ts";

const tensor = (name: string): ResolvedTensorSpec => ({
  name,
  dtype: "float32",
  shape: [-1],
  optional: false,
});
const X = [tensor("x")];
const Y = [tensor("y")];

function refused(
  steps: readonly EnsembleStepSpec[],
  message: string,
  inputs: readonly ResolvedTensorSpec[] = X,
  outputs: readonly ResolvedTensorSpec[] = Y,
): void {
  assert.throws(() => resolveEnsemble("E", steps, { inputs, outputs }), (error) => {
    assert.ok(error instanceof TritonValidationError, String(error));
    assert.equal(error.message, `Cannot bind ensemble 'E': ${message}`);
    return true;
  });
}

Deno.test("resolveEnsemble: the graph rules, each with its message", () => {
  refused([], "it has no steps");
  refused(
    [{ model: "A", inputMap: { v: "x" }, outputMap: { v: "y" } }],
    "'x' is both an input and an output",
    X,
    [tensor("x"), tensor("y")],
  );
  refused(
    [{ model: "A", inputMap: { v: "x" }, outputMap: { v: "y" } }],
    "input 'x' is optional, which an ensemble cannot be",
    [{ ...tensor("x"), optional: true }],
  );
  refused([{ model: "", inputMap: { v: "x" }, outputMap: { v: "y" } }], "step 1 names no model");
  refused(
    [{ model: "E", inputMap: { v: "x" }, outputMap: { v: "y" } }],
    "step 1 runs the ensemble itself",
  );
  refused(
    [{ model: "A", version: 0, inputMap: { v: "x" }, outputMap: { v: "y" } }],
    "step 1 has version 0: give an integer >= 1, or -1 for the served one",
  );
  refused(
    [{ model: "A", inputMap: {}, outputMap: { v: "y" } }],
    "step 1 (model 'A'): inputMap is empty",
  );
  refused(
    [{ model: "A", inputMap: { v: "x" }, outputMap: { v: "" } }],
    `step 1 (model 'A'): outputMap maps 'v' to "": names must be non-empty strings`,
  );
  refused(
    [{ model: "A", inputMap: { v: "x" }, outputMap: { v: "x" } }],
    "step 1 (model 'A') writes 'x', an input of the ensemble",
  );
  refused(
    [
      { model: "A", inputMap: { v: "x" }, outputMap: { v: "y" } },
      { model: "B", inputMap: { v: "x" }, outputMap: { v: "y" } },
    ],
    "steps 1 and 2 both write 'y'",
  );
  refused(
    [{ model: "A", inputMap: { v: "z" }, outputMap: { v: "y" } }],
    "step 1 (model 'A') reads 'z', which is no input of the ensemble and no step writes",
  );
  refused(
    [{ model: "A", inputMap: { v: "x" }, outputMap: { v: "t" } }],
    "no step writes output 'y'",
  );
  refused(
    [{ model: "A", inputMap: { v: "x" }, outputMap: { v: "y" } }],
    "no step reads input 'w'",
    [tensor("x"), tensor("w")],
  );
  refused(
    [
      { model: "A", inputMap: { v: "x" }, outputMap: { v: "y" } },
      { model: "B", inputMap: { v: "c" }, outputMap: { v: "b" } },
      { model: "C", inputMap: { v: "b" }, outputMap: { v: "c" } },
    ],
    "steps 2, 3 wait for each other's outputs",
  );
});

Deno.test("resolveEnsemble: a diamond resolves, in the order given, as Triton's JSON", () => {
  const ensemble = resolveEnsemble(
    "E",
    [
      { model: "A", inputMap: { v: "x" }, outputMap: { v: "a" } },
      { model: "B", version: 2, inputMap: { v: "x" }, outputMap: { v: "b" } },
      { model: "Join", inputMap: { l: "a", r: "b" }, outputMap: { v: "y" } },
    ],
    { inputs: X, outputs: Y },
  );
  assert.deepEqual(ensembleSchedulingJson(ensemble), {
    step: [
      { model_name: "A", model_version: -1, input_map: { v: "x" }, output_map: { v: "a" } },
      { model_name: "B", model_version: 2, input_map: { v: "x" }, output_map: { v: "b" } },
      {
        model_name: "Join",
        model_version: -1,
        input_map: { l: "a", r: "b" },
        output_map: { v: "y" },
      },
    ],
  });
});
