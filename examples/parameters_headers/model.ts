/**
 * Reads a request parameter and a forwarded HTTP header: `scaled_add = (a + b) * multiplier /
 * divisor`, `scaled_sub = (a - b) * multiplier / divisor`, where `multiplier` comes from the
 * KServe body parameters and `divisor` from the `header_divisor` header (forwarded because it
 * matches the server's `httpHeaderForwardPattern`, `header.*`).
 *
 * @module
 */

import { type Triton, zip } from "../../mod.ts";

/** The header pattern the server needs for this model. */
export const HEADER_PATTERN = "header.*";

/**
 * Binds ParamsAndHeaders on a server (undecorated: decorators do not pass parameters on).
 *
 * @param triton The server, configured with `httpHeaderForwardPattern: HEADER_PATTERN`.
 * @returns A promise that settles when the model is loaded.
 */
export function bindParamsAndHeaders(triton: Triton): Promise<void> {
  return triton.bind({
    modelName: "ParamsAndHeaders",
    inferFunc: (requests) =>
      requests.map((request) => {
        const multiplier = Number(request.parameters.multiplier ?? 1);
        const divisor = Number(request.parameters.header_divisor ?? 1);
        return {
          scaled_add: zip(request.a, request.b, (x, y) => (x + y) * multiplier / divisor),
          scaled_sub: zip(request.a, request.b, (x, y) => (x - y) * multiplier / divisor),
        };
      }),
    inputs: [
      { name: "a", dtype: "float32", shape: [-1] },
      { name: "b", dtype: "float32", shape: [-1] },
    ],
    outputs: [
      { name: "scaled_add", dtype: "float32", shape: [-1] },
      { name: "scaled_sub", dtype: "float32", shape: [-1] },
    ],
    config: { maxBatchSize: 8 },
  });
}
