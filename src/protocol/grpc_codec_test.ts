import assert from "node:assert/strict";
import {
  codecs,
  protoRoot,
  RAW_INPUT_CONTENTS_FIELD,
  RAW_OUTPUT_CONTENTS_FIELD,
} from "./grpc_codec.ts";

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

/** What protobufjs alone writes for a message. */
function protobufjsBytes(name: string, value: Record<string, unknown>): number[] {
  const type = protoRoot().lookupType(name);
  return [...type.encode(type.fromObject(value)).finish()];
}

Deno.test("Raw contents are written around protobufjs with the bytes it would write", () => {
  const big = new Uint8Array(300).map((_, i) => i % 256); // a two-byte length varint
  const response = {
    model_name: "m",
    model_version: "1",
    id: "r",
    parameters: { triton_final_response: { bool_param: true } },
    outputs: [
      { name: "a", datatype: "UINT8", shape: [300] },
      { name: "b", datatype: "INT32", shape: [0] },
      { name: "c", datatype: "INT32", shape: [1] },
    ],
    raw_output_contents: [big, new Uint8Array(0), new Uint8Array([7, 0, 0, 0])],
  };
  assert.deepEqual(
    [...codecs.ModelInferResponse.encode(response)],
    protobufjsBytes("inference.ModelInferResponse", response),
  );
  assert.deepEqual(
    [...codecs.ModelInferResponse.encode({ model_name: "m", model_version: "" })],
    protobufjsBytes("inference.ModelInferResponse", { model_name: "m", model_version: "" }),
  );
  for (
    const stream of [
      { infer_response: response },
      { error_message: "e", infer_response: { model_name: "m", model_version: "1" } },
      { error_message: "e", infer_response: { model_name: "", model_version: "" } },
      { error_message: "only" },
    ]
  ) {
    assert.deepEqual(
      [...codecs.ModelStreamInferResponse.encode(stream)],
      protobufjsBytes("inference.ModelStreamInferResponse", stream),
    );
  }
  const request = {
    model_name: "m",
    inputs: [{ name: "x", datatype: "UINT8", shape: [300] }],
    outputs: [{ name: "y" }],
    raw_input_contents: [big],
  };
  assert.deepEqual(
    [...codecs.ModelInferRequest.encode(request)],
    protobufjsBytes("inference.ModelInferRequest", request),
  );
});

Deno.test("Decoded raw contents are views of the received bytes", () => {
  const wire = codecs.ModelInferRequest.encode({
    model_name: "m",
    inputs: [{ name: "x", datatype: "UINT8", shape: [4] }],
    raw_input_contents: [new Uint8Array([1, 2, 3, 4])],
  });
  const received = new Uint8Array(wire.byteLength + 5);
  received.set(wire, 5);
  const raw = codecs.ModelInferRequest.decode(received.subarray(5)).raw_input_contents![0]!;
  assert.deepEqual([...raw], [1, 2, 3, 4]);
  assert.equal(raw.buffer, received.buffer);
  assert.equal(raw.byteOffset, 5 + wire.byteLength - 4);
});

Deno.test("Encoding with headroom leaves that many free bytes before the same message", () => {
  const response = {
    model_name: "m",
    model_version: "1",
    outputs: [{ name: "y", datatype: "INT32", shape: [1] }],
    raw_output_contents: [new Uint8Array([7, 0, 0, 0])],
  };
  const cases: [string, Uint8Array, Uint8Array][] = [
    [
      "ModelInferResponse",
      codecs.ModelInferResponse.encode(response),
      codecs.ModelInferResponse.encode(response, { headroom: 5 }),
    ],
    [
      "ModelStreamInferResponse",
      codecs.ModelStreamInferResponse.encode({ infer_response: response }),
      codecs.ModelStreamInferResponse.encode({ infer_response: response }, { headroom: 5 }),
    ],
    [
      "ModelStreamInferResponse without a response",
      codecs.ModelStreamInferResponse.encode({ error_message: "e" }),
      codecs.ModelStreamInferResponse.encode({ error_message: "e" }, { headroom: 5 }),
    ],
    [
      "ServerLiveResponse",
      codecs.ServerLiveResponse.encode({ live: true }),
      codecs.ServerLiveResponse.encode({ live: true }, { headroom: 5 }),
    ],
  ];
  for (const [what, plain, framed] of cases) {
    assert.equal(framed.byteLength, plain.byteLength + 5, what);
    assert.deepEqual([...framed.subarray(0, 5)], [0, 0, 0, 0, 0], what);
    assert.deepEqual([...framed.subarray(5)], [...plain], what);
  }
  assert.deepEqual([...cases[0]![1]], [
    ...[0x0a, 0x01, 0x6d, 0x12, 0x01, 0x31], // model_name "m", model_version "1"
    ...[0x2a, 0x0d, 0x0a, 0x01, 0x79, 0x12, 0x05, 0x49, 0x4e, 0x54, 0x33, 0x32, 0x1a, 0x01, 0x01],
    ...[0x32, 0x04, 7, 0, 0, 0], // raw_output_contents
  ]);
});

Deno.test("Messages with raw contents are written into the buffer the caller provides", () => {
  const sizes: number[] = [];
  const provided = new Uint8Array(64).fill(0xee);
  const allocate = (bytes: number): Uint8Array => {
    sizes.push(bytes);
    return provided.subarray(0, bytes);
  };
  const response = {
    model_name: "m",
    model_version: "1",
    outputs: [{ name: "y", datatype: "INT32", shape: [1] }],
    raw_output_contents: [new Uint8Array([7, 0, 0, 0])],
  };
  const plain = codecs.ModelInferResponse.encode(response);
  const framed = codecs.ModelInferResponse.encode(response, { headroom: 5, allocate });
  assert.equal(framed.buffer, provided.buffer);
  assert.deepEqual(sizes, [plain.byteLength + 5]);
  assert.deepEqual([...framed.subarray(5)], [...plain]);
  const stream = codecs.ModelStreamInferResponse.encode({ infer_response: response }, { allocate });
  assert.equal(stream.buffer, provided.buffer);
  assert.deepEqual(
    [...stream],
    [...codecs.ModelStreamInferResponse.encode({ infer_response: response })],
  );
});

Deno.test("the raw-contents field numbers are the proto's", () => {
  const root = protoRoot();
  assert.equal(
    root.lookupType("inference.ModelInferRequest").fields.raw_input_contents?.id,
    RAW_INPUT_CONTENTS_FIELD,
  );
  assert.equal(
    root.lookupType("inference.ModelInferResponse").fields.raw_output_contents?.id,
    RAW_OUTPUT_CONTENTS_FIELD,
  );
});
