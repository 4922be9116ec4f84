// Rapid reset (CVE-2023-44487) against the gRPC port: a client that opens ModelInfer calls and
// cancels each at once (HEADERS + RST_STREAM) is cut off with GOAWAY ENHANCE_YOUR_CALM once its
// resets pass the limit (a burst of 1,000, then 100 a second: h2/reset_limit.ts), on both
// engines, and the server serves the next client.

import assert from "node:assert/strict";
import { bindAddSub } from "../examples/add_sub/model.ts";
import { ENGINES, startServer, watchdog } from "./_helpers.ts";
import { rapidReset } from "./_rapid_reset.ts";
import { TestGrpcClient } from "./grpc_test_client.ts";
import { codecs } from "../src/protocol/grpc_codec.ts";

for (const engine of ENGINES) {
  Deno.test(`gRPC: a rapid reset ends with GOAWAY ENHANCE_YOUR_CALM, and the server serves on [${engine}]`, async () => {
    await using triton = await startServer({ engine });
    await bindAddSub(triton);
    const port = Number(new URL(triton.urls.grpc!.replace("grpc:", "http:")).port);
    const result = await watchdog(rapidReset(port, 20_000), "the rapid reset");
    assert.equal(result.goaway, 0xb, JSON.stringify(result));
    // The server stopped at about 1,000 streams, not at the 20,000 the client would send.
    assert.ok(result.lastStream! < 2 * 1100, JSON.stringify(result));
    using client = new TestGrpcClient(triton.urls.grpc!, { deadlineMs: 10_000 });
    const response = await client.call(
      "ModelInfer",
      codecs.ModelInferRequest,
      codecs.ModelInferResponse,
      {
        model_name: "AddSub",
        inputs: [
          { name: "a", datatype: "FP32", shape: [1, 2], contents: { fp32_contents: [1, 2] } },
          { name: "b", datatype: "FP32", shape: [1, 2], contents: { fp32_contents: [3, 5] } },
        ],
      },
    );
    const add = new Float32Array(response.raw_output_contents![0]!.slice().buffer);
    assert.deepEqual([...add], [4, 7]);
  });
}
