/**
 * The model of tests/grpc_tls_test.ts and its server: `y = x`.
 *
 * @module
 */

import type { BindOptions } from "../mod.ts";

/** The model. */
export const IDENTITY: BindOptions = {
  modelName: "Identity",
  inferFunc: (requests) => requests.map((request) => ({ y: request.data.x! })),
  inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
  outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
};
