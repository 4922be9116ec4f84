// The server of tests/grpc_tls_test.ts, in its own process: the Identity model on the engine named
// by the first argument, with the TLS fields of the JSON config in the second. Prints the gRPC URL
// once serving, stops when its standard input ends.
//
// Its own process so that a client cannot end the test process with it, and a server that dies is
// seen (when grpc-js served TLS, a grpc-js client beside it in one process, with the Triton core
// loaded, crashed Deno's HTTP/2 now and then: see grpc_tls_test.ts).

import { type BindOptions, Triton, type TritonConfig } from "../mod.ts";

const IDENTITY: BindOptions = {
  modelName: "Identity",
  inferFunc: (requests) => requests.map((request) => ({ y: request.data.x! })),
  inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
  outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
};

const [engine, config] = [Deno.args[0] as "builtin" | "triton", JSON.parse(Deno.args[1]!)];
const triton = new Triton({
  engine,
  config: {
    ...config as TritonConfig,
    allowHttp: false,
    allowMetrics: false,
    grpcPort: 0,
    grpcAddress: "127.0.0.1",
  },
});
await triton.bind(IDENTITY);
await triton.run();
console.log(triton.urls.grpc);
for await (const _ of Deno.stdin.readable) { /* until the test closes it */ }
await triton.stop();
