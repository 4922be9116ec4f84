// ModelInfer over a loopback gRPC connection: raw and typed contents, outputs, parameters,
// forwarded metadata and the error mapping.

import * as grpc from "@grpc/grpc-js";
import { Buffer } from "node:buffer";
import assert from "node:assert/strict";
import {
  codecs,
  type InferTensorContents,
  type ModelInferRequest,
  type ModelInferResponse,
} from "../src/protocol/grpc_codec.ts";
import { rejectsWith, TestGrpcClient } from "./grpc_test_client.ts";
import { ENGINES, watchdog } from "./_helpers.ts";
import { startTestServer } from "./grpc_test_server.ts";

const f32 = (...values: number[]): Uint8Array => new Uint8Array(new Float32Array(values).buffer);
const text = new TextEncoder();

function infer(
  client: TestGrpcClient,
  request: ModelInferRequest,
  metadata?: grpc.Metadata,
): Promise<ModelInferResponse> {
  return client.call(
    "ModelInfer",
    codecs.ModelInferRequest,
    codecs.ModelInferResponse,
    request,
    metadata,
  );
}

const addSub = (extra: Partial<ModelInferRequest> = {}): ModelInferRequest => ({
  model_name: "AddSub",
  inputs: [
    { name: "a", datatype: "FP32", shape: [1, 2] },
    { name: "b", datatype: "FP32", shape: [1, 2] },
  ],
  raw_input_contents: [f32(1, 2), f32(0.5, 0.5)],
  ...extra,
});

for (const engine of ENGINES) {
  Deno.test(`ModelInfer answers raw outputs, one per output, in order [${engine}]`, async () => {
    await using server = await startTestServer(engine);
    using client = new TestGrpcClient(server.frontend.port);
    const response = await infer(client, addSub({ id: "r1", model_version: "1" }));
    assert.equal(response.model_name, "AddSub");
    assert.equal(response.model_version, "1");
    assert.equal(response.id, "r1");
    assert.deepEqual(response.outputs!.map((o) => [o.name, o.datatype, o.shape]), [
      ["add", "FP32", ["1", "2"]],
      ["sub", "FP32", ["1", "2"]],
    ]);
    assert.deepEqual(response.raw_output_contents!.map((b) => [...b]), [
      [0, 0, 0xc0, 0x3f, 0, 0, 0x20, 0x40], // 1.5, 2.5
      [0, 0, 0, 0x3f, 0, 0, 0xc0, 0x3f], // 0.5, 1.5
    ]);
    const onlySub = await infer(client, addSub({ outputs: [{ name: "sub" }] }));
    assert.deepEqual(onlySub.outputs!.map((o) => o.name), ["sub"]);
    assert.equal(onlySub.raw_output_contents!.length, 1);
  });
}

for (const engine of ENGINES) {
  Deno.test(`ModelInfer takes typed contents for every dtype that has them [${engine}]`, async () => {
    await using server = await startTestServer(engine);
    using client = new TestGrpcClient(server.frontend.port);
    const cases: [string, string, InferTensorContents, number[]][] = [
      ["bool", "BOOL", { bool_contents: [true, false] }, [1, 0]],
      ["int8", "INT8", { int_contents: [-1, 2] }, [0xff, 2]],
      ["int32", "INT32", { int_contents: [-2, 1] }, [0xfe, 0xff, 0xff, 0xff, 1, 0, 0, 0]],
      ["uint16", "UINT16", { uint_contents: [65535, 1] }, [0xff, 0xff, 1, 0]],
      ["int64", "INT64", { int64_contents: ["-1", 2n] }, [
        ...[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        ...[2, 0, 0, 0, 0, 0, 0, 0],
      ]],
      ["uint64", "UINT64", { uint64_contents: ["18446744073709551615", 0] }, [
        ...[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        ...[0, 0, 0, 0, 0, 0, 0, 0],
      ]],
      ["float64", "FP64", { fp64_contents: [1, -2] }, [
        ...[0, 0, 0, 0, 0, 0, 0xf0, 0x3f],
        ...[0, 0, 0, 0, 0, 0, 0, 0xc0],
      ]],
      ["bytes", "BYTES", { bytes_contents: [text.encode("a\0"), new Uint8Array()] }, [
        ...[2, 0, 0, 0, 0x61, 0],
        ...[0, 0, 0, 0],
      ]],
    ];
    for (const [dtype, datatype, contents, expected] of cases) {
      const response = await infer(client, {
        model_name: "Identity",
        inputs: [{ name: `IN_${dtype}`, datatype, shape: [2], contents }],
      });
      assert.deepEqual(response.outputs, [{
        name: `OUT_${dtype}`,
        datatype,
        shape: ["2"],
        parameters: {},
        contents: null,
      }]);
      assert.deepEqual([...response.raw_output_contents![0]!], expected, dtype);
    }
  });
}

for (const engine of ENGINES) {
  Deno.test(`ModelInfer forwards parameters and matching metadata [${engine}]`, async () => {
    await using server = await startTestServer(engine);
    using client = new TestGrpcClient(server.frontend.port);
    const metadata = new grpc.Metadata();
    metadata.set("x-forward-user", "alice");
    metadata.set("x-private", "hidden");
    const response = await infer(client, {
      model_name: "Echo",
      inputs: [{ name: "text", datatype: "BYTES", shape: [1, 1] }],
      raw_input_contents: [new Uint8Array([2, 0, 0, 0, 0x68, 0x69])],
      parameters: {
        flag: { bool_param: true },
        count: { int64_param: 3 },
        big: { uint64_param: 5 },
        ratio: { double_param: 0.25 },
        name: { string_param: "x" },
        priority: { int64_param: 0 },
        timeout: { int64_param: 1000 },
        sequence_id: { int64_param: 9 },
        triton_enable_empty_final_response: { bool_param: true },
      },
    }, metadata);
    const [, params] = response.raw_output_contents!;
    const json = JSON.parse(new TextDecoder().decode(params!.subarray(4)));
    assert.deepEqual(json, {
      flag: true,
      count: 3,
      big: 5,
      ratio: 0.25,
      name: "x",
      "x-forward-user": "alice",
    });
  });
}

for (const engine of ENGINES) {
  Deno.test(`ModelInfer maps errors to gRPC status codes and keeps serving [${engine}]`, async () => {
    await using server = await startTestServer(engine);
    using client = new TestGrpcClient(server.frontend.port);
    await rejectsWith(
      infer(client, { ...addSub(), model_name: "Missing" }),
      grpc.status.NOT_FOUND,
      "Request for unknown model: 'Missing' is not found",
    );
    await rejectsWith(
      infer(client, {
        model_name: "Stream",
        inputs: [{ name: "n", datatype: "INT32", shape: [1], contents: { int_contents: [1] } }],
      }),
      grpc.status.UNIMPLEMENTED,
      "ModelInfer RPC doesn't support models with decoupled transaction policy",
    );
    await rejectsWith(
      infer(client, {
        model_name: "Fail",
        inputs: [{ name: "x", datatype: "FP32", shape: [1], contents: { fp32_contents: [1] } }],
      }),
      grpc.status.INTERNAL,
      /Model failed on purpose/,
    );
    await rejectsWith(
      infer(client, addSub({ parameters: { triton_secret: { bool_param: true } } })),
      grpc.status.INVALID_ARGUMENT,
      "Invalid request parameter 'triton_secret': names starting with 'triton_' are reserved",
    );
    await rejectsWith(
      infer(client, addSub({ parameters: { priority: { int64_param: -1 } } })),
      grpc.status.INVALID_ARGUMENT,
      "Invalid request parameter 'priority': expected a non-negative integer, got int64_param -1",
    );
    await rejectsWith(
      infer(client, addSub({ raw_input_contents: [f32(1, 2)] })),
      grpc.status.INVALID_ARGUMENT,
      "Invalid request for model 'AddSub': expected 2 raw_input_contents (one per input), got 1",
    );
    await rejectsWith(
      infer(client, addSub({ raw_input_contents: [f32(1), f32(1, 2)] })),
      grpc.status.INVALID_ARGUMENT,
      "Invalid data for input 'a': Unexpected byte size for float32 tensor of shape [1,2]: expected 8 bytes, got 4",
    );
    await rejectsWith(
      infer(client, {
        ...addSub(),
        inputs: [
          { name: "a", datatype: "FP32", shape: [1, 2], contents: { fp32_contents: [1, 2] } },
          { name: "b", datatype: "FP32", shape: [1, 2] },
        ],
      }),
      grpc.status.INVALID_ARGUMENT,
      "Invalid data for input 'a': contents must be empty when raw_input_contents is used",
    );
    await rejectsWith(
      infer(client, {
        model_name: "Identity",
        inputs: [{
          name: "IN_float16",
          datatype: "FP16",
          shape: [1],
          contents: { fp32_contents: [1] },
        }],
      }),
      grpc.status.INVALID_ARGUMENT,
      "Invalid data for input 'IN_float16': FP16 tensors must be sent in raw_input_contents, not contents",
    );
    await rejectsWith(
      infer(client, {
        model_name: "Identity",
        inputs: [{
          name: "IN_int32",
          datatype: "INT32",
          shape: [2],
          contents: { int_contents: [1] },
        }],
      }),
      grpc.status.INVALID_ARGUMENT,
      "Invalid data for input 'IN_int32': the shape needs 2 elements but contents.int_contents has 1",
    );
    await rejectsWith(
      infer(client, {
        model_name: "Identity",
        inputs: [{ name: "IN_int32", datatype: "INT_32", shape: [1] }],
      }),
      grpc.status.INVALID_ARGUMENT,
      "Invalid datatype for input 'IN_int32': 'INT_32' is not a KServe datatype",
    );
    await rejectsWith(
      infer(client, {
        ...addSub(),
        inputs: [{
          name: "a",
          datatype: "FP32",
          shape: [1, 2],
          parameters: {
            shared_memory_region: { string_param: "r" },
            shared_memory_byte_size: { int64_param: "8" },
          },
        }, { name: "b", datatype: "FP32", shape: [1, 2] }],
        // Inputs in shared memory take no raw entry.
        raw_input_contents: [f32(0.5, 0.5)],
      }),
      // This test server has no shared-memory registry (the facade gives it one).
      grpc.status.UNIMPLEMENTED,
      "System shared memory is not enabled on this server: send tensors in the request",
    );
    await rejectsWith(
      infer(client, {
        ...addSub(),
        inputs: [{
          name: "a",
          datatype: "FP32",
          shape: [1, 2],
          parameters: { shared_memory_region: { string_param: "r" } },
        }, { name: "b", datatype: "FP32", shape: [1, 2] }],
        raw_input_contents: [f32(0.5, 0.5)],
      }),
      grpc.status.INVALID_ARGUMENT,
      "Invalid shared memory parameters of input 'a': 'shared_memory_byte_size' is required with 'shared_memory_region'",
    );
    await rejectsWith(
      infer(
        client,
        addSub({ outputs: [{ name: "add", parameters: { classification: { int64_param: 1 } } }] }),
      ),
      grpc.status.UNIMPLEMENTED,
      "Unsupported parameter 'classification' for output 'add': DenoTriton does not support it",
    );
    await rejectsWith(
      infer(client, addSub({ model_version: "one" })),
      grpc.status.INVALID_ARGUMENT,
      "Invalid model version: 'one' is not a non-negative integer",
    );
    await rejectsWith(
      client.raw("ModelInfer", new Uint8Array([0x0a, 0x05, 0x41])),
      grpc.status.INVALID_ARGUMENT,
      /^Invalid ModelInferRequest message: /,
    );
    // The engine's own validation (wrong dtype) maps to INVALID_ARGUMENT as well.
    await rejectsWith(
      infer(client, {
        ...addSub(),
        inputs: [
          { name: "a", datatype: "INT32", shape: [1, 2] },
          { name: "b", datatype: "FP32", shape: [1, 2] },
        ],
      }),
      grpc.status.INVALID_ARGUMENT,
      /'a'/,
    );
    const ok = await infer(client, addSub());
    assert.equal(ok.outputs!.length, 2);
  });
}

for (const engine of ENGINES) {
  Deno.test(`ModelInfer cancelled by the client aborts the request signal [${engine}]`, async () => {
    await using server = await startTestServer(engine);
    const client = new grpc.Client(
      `127.0.0.1:${server.frontend.port}`,
      grpc.credentials.createInsecure(),
    );
    try {
      const started = server.nextWaitStart();
      const aborted = server.nextAbort();
      const call = client.makeUnaryRequest(
        "/inference.GRPCInferenceService/ModelInfer",
        (value: ModelInferRequest) => Buffer.from(codecs.ModelInferRequest.encode(value)),
        (bytes: Buffer) => bytes,
        {
          model_name: "Wait",
          inputs: [{ name: "x", datatype: "FP32", shape: [1], contents: { fp32_contents: [1] } }],
        },
        () => {},
      );
      await watchdog(started, "the request to start");
      call.cancel();
      const reason = await watchdog(aborted, "the abort");
      assert.match(String(reason), /cancelled/);
    } finally {
      client.close();
    }
  });
}

for (const engine of ENGINES) {
  Deno.test(`ModelInfer carries 4 MiB tensors both ways, concurrently, byte for byte [${engine}]`, async () => {
    await using server = await startTestServer(engine);
    // grpc-js clients take 4 MiB by default; the response is a little more.
    using client = new TestGrpcClient(server.frontend.port, {
      channelOptions: { "grpc.max_receive_message_length": 8 * 1024 * 1024 },
    });
    const elements = 1 << 20;
    // Each request its own values, so a response buffer reused too early shows up as a mismatch.
    const tensor = (seed: number): Float32Array => {
      const values = new Float32Array(elements);
      for (let i = 0; i < elements; i++) values[i] = seed * 1e6 + i;
      return values;
    };
    const identity = async (seed: number): Promise<void> => {
      const sent = tensor(seed);
      const response = await watchdog(
        infer(client, {
          model_name: "Identity",
          inputs: [{ name: "IN_float32", datatype: "FP32", shape: [elements] }],
          raw_input_contents: [new Uint8Array(sent.buffer)],
        }),
        `identity ${seed}`,
      );
      const raw = response.raw_output_contents![0]!;
      assert.equal(raw.byteLength, 4 * elements);
      const back = new Float32Array(raw.slice().buffer);
      const first = back.findIndex((value, i) => value !== sent[i]);
      assert.equal(first, -1, `request ${seed} differs at element ${first}`);
    };
    for (let round = 0; round < 2; round++) {
      await Promise.all([1, 2, 3, 4].map((seed) => identity(round * 10 + seed)));
    }
  });
}
