import assert from "node:assert/strict";
import { codecs, protoRoot } from "./grpc_codec.ts";

const INFER_REQUEST = [
  ...[0x0a, 0x01, 0x6d], // model_name: "m"
  ...[0x22, 0x07, 0x0a, 0x01, 0x6b, 0x12, 0x02, 0x08, 0x01], // parameters {k: bool_param true}
  ...[0x2a, 0x0d], // inputs (13 bytes)
  ...[0x0a, 0x01, 0x78], //   name: "x"
  ...[0x12, 0x05, 0x49, 0x4e, 0x54, 0x33, 0x32], //   datatype: "INT32"
  ...[0x1a, 0x01, 0x02], //   shape: [2], packed
  ...[0x3a, 0x08, 1, 0, 0, 0, 2, 0, 0, 0], // raw_input_contents
];

Deno.test("ModelInferRequest encodes to the protobuf wire bytes", () => {
  const bytes = codecs.ModelInferRequest.encode({
    model_name: "m",
    parameters: { k: { bool_param: true } },
    inputs: [{ name: "x", datatype: "INT32", shape: [2] }],
    raw_input_contents: [new Uint8Array([1, 0, 0, 0, 2, 0, 0, 0])],
  });
  assert.deepEqual([...bytes], INFER_REQUEST);
});

Deno.test("ModelInferRequest decodes with defaults, string int64s and plain byte views", () => {
  const message = codecs.ModelInferRequest.decode(new Uint8Array(INFER_REQUEST));
  const raw = message.raw_input_contents![0]!;
  assert.equal(raw.constructor, Uint8Array);
  assert.deepEqual({ ...message, raw_input_contents: [[...raw]] }, {
    model_name: "m",
    model_version: "",
    id: "",
    parameters: { k: { bool_param: true, parameter_choice: "bool_param" } },
    inputs: [{ name: "x", datatype: "INT32", shape: ["2"], parameters: {}, contents: null }],
    outputs: [],
    raw_input_contents: [[1, 0, 0, 0, 2, 0, 0, 0]],
  });
});

Deno.test("ModelStreamInferResponse round-trips through literal bytes", () => {
  const wire = [0x0a, 0x01, 0x65, 0x12, 0x06, 0x0a, 0x01, 0x6d, 0x12, 0x01, 0x31];
  const bytes = codecs.ModelStreamInferResponse.encode({
    error_message: "e",
    infer_response: { model_name: "m", model_version: "1" },
  });
  assert.deepEqual([...bytes], wire);
  const back = codecs.ModelStreamInferResponse.decode(new Uint8Array(wire));
  assert.equal(back.error_message, "e");
  assert.equal(back.infer_response?.model_version, "1");
});

Deno.test("64-bit integers encode from numbers, strings and bigints alike", () => {
  const fromNumber = codecs.ModelMetadataResponse.encode({
    name: "",
    versions: [],
    platform: "",
    inputs: [{ name: "t", datatype: "INT64", shape: [-1, 3] }],
    outputs: [],
  });
  const fromBigint = codecs.ModelMetadataResponse.encode({
    name: "",
    versions: [],
    platform: "",
    inputs: [{ name: "t", datatype: "INT64", shape: [-1n, "3"] }],
    outputs: [],
  });
  assert.deepEqual([...fromNumber], [...fromBigint]);
  const decoded = codecs.ModelMetadataResponse.decode(fromNumber);
  assert.deepEqual(decoded.inputs[0]!.shape, ["-1", "3"]);
});

Deno.test("Field numbers follow Triton's grpc_service.proto and model_config.proto", () => {
  const root = protoRoot();
  const ids = (name: string): Record<string, number> =>
    Object.fromEntries(
      Object.entries(root.lookupType(name).fields).map(([key, field]) => [key, field.id]),
    );
  assert.deepEqual(ids("inference.ModelInferResponse"), {
    model_name: 1,
    model_version: 2,
    id: 3,
    parameters: 4,
    outputs: 5,
    raw_output_contents: 6,
  });
  assert.deepEqual(ids("inference.ModelStatistics"), {
    name: 1,
    version: 2,
    last_inference: 3,
    inference_count: 4,
    execution_count: 5,
    inference_stats: 6,
    batch_stats: 7,
    memory_usage: 8,
    response_stats: 9,
  });
  const config = ids("inference.ModelConfig");
  assert.equal(config.backend, 17);
  assert.equal(config.dynamic_batching, 11);
  assert.equal(config.model_transaction_policy, 19);
  assert.equal(config.response_cache, 24);
  assert.equal(config.runtime, 25);
  assert.equal(ids("inference.ModelInstanceGroup").kind, 4);
  assert.equal(ids("inference.ModelOutput").label_filename, 4);
});

Deno.test("Malformed bytes fail to decode", () => {
  assert.throws(() => codecs.ModelInferRequest.decode(new Uint8Array([0x0a, 0x05, 0x41])));
});
