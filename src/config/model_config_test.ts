import assert from "node:assert/strict";
import { resolveModelConfig } from "./model_config.ts";

Deno.test("resolveModelConfig: executionTimeoutS defaults to none and refuses bad values", () => {
  assert.equal(resolveModelConfig({}).executionTimeoutS, 0);
  assert.equal(resolveModelConfig({ executionTimeoutS: 2.5 }).executionTimeoutS, 2.5);
  for (const bad of [-1, Number.NaN, Infinity, 3_000_000]) {
    assert.throws(
      () => resolveModelConfig({ executionTimeoutS: bad }),
      new RegExp(
        `^TritonBadParameterError: Invalid model config: executionTimeoutS must be a number of seconds within \\[0, 2147483\\], got ${bad}$`,
      ),
    );
  }
});
