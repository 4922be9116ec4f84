/**
 * A reader for the ONNX files this example runs: the few fields of ONNX's `onnx.proto3` that a
 * convolutional network stored with Constant nodes needs (the graph's nodes, their attributes and
 * tensors, the inputs and outputs), declared here with their field numbers and decoded with
 * protobufjs. Not a general ONNX reader: sparse tensors, external data, subgraphs and types other
 * than float32 and int32/int64 are not read (such a tensor is an error naming it).
 *
 * @module
 */

import protobuf from "protobufjs";

/** A tensor read from the model: float32 or integer values, with its dimensions. */
export interface OnnxTensor {
  /** The tensor's name (empty for a Constant node's value). */
  readonly name: string;
  /** Dimensions, outermost first (`[]` for a scalar). */
  readonly dims: readonly number[];
  /** float32 values, or integers (int32 and int64 both, as numbers). */
  readonly data: Float32Array | readonly number[];
}

/** An attribute value: a number, numbers, a string, or a tensor. */
export type OnnxAttribute = number | readonly number[] | string | OnnxTensor;

/** One node of the graph. */
export interface OnnxNode {
  /** The node's name (may be empty). */
  readonly name: string;
  /** The operator (`Conv`, `Relu`, ...). */
  readonly opType: string;
  /** Input value names, in order (`""` for an omitted optional input). */
  readonly inputs: readonly string[];
  /** Output value names. */
  readonly outputs: readonly string[];
  /** Attributes by name. */
  readonly attributes: ReadonlyMap<string, OnnxAttribute>;
}

/** A graph input or output: its name and dimensions (a symbolic dimension is `-1`). */
export interface OnnxValueInfo {
  /** The value's name. */
  readonly name: string;
  /** Dimensions; `-1` where the file names a symbol instead of a size. */
  readonly dims: readonly number[];
}

/** What the reader gives back. */
export interface OnnxModel {
  /** The default domain's opset version. */
  readonly opset: number;
  /** The program that wrote the file (`producer_name`). */
  readonly producer: string;
  /** Nodes in the file's order (ONNX requires topological order). */
  readonly nodes: readonly OnnxNode[];
  /** Initializers by name (this model keeps its weights in Constant nodes instead). */
  readonly initializers: ReadonlyMap<string, OnnxTensor>;
  /** Graph inputs that are not initializers. */
  readonly inputs: readonly OnnxValueInfo[];
  /** Graph outputs. */
  readonly outputs: readonly OnnxValueInfo[];
}

// Field numbers from onnx/onnx.proto3 (ONNX IR version 3 and later; unchanged since).
const SCHEMA = {
  nested: {
    onnx: {
      nested: {
        ModelProto: {
          fields: {
            producer_name: { type: "string", id: 2 },
            graph: { type: "GraphProto", id: 7 },
            opset_import: { rule: "repeated", type: "OperatorSetIdProto", id: 8 },
          },
        },
        OperatorSetIdProto: {
          fields: { domain: { type: "string", id: 1 }, version: { type: "int64", id: 2 } },
        },
        GraphProto: {
          fields: {
            node: { rule: "repeated", type: "NodeProto", id: 1 },
            initializer: { rule: "repeated", type: "TensorProto", id: 5 },
            input: { rule: "repeated", type: "ValueInfoProto", id: 11 },
            output: { rule: "repeated", type: "ValueInfoProto", id: 12 },
          },
        },
        NodeProto: {
          fields: {
            input: { rule: "repeated", type: "string", id: 1 },
            output: { rule: "repeated", type: "string", id: 2 },
            name: { type: "string", id: 3 },
            op_type: { type: "string", id: 4 },
            attribute: { rule: "repeated", type: "AttributeProto", id: 5 },
            domain: { type: "string", id: 7 },
          },
        },
        AttributeProto: {
          fields: {
            name: { type: "string", id: 1 },
            f: { type: "float", id: 2 },
            i: { type: "int64", id: 3 },
            s: { type: "bytes", id: 4 },
            t: { type: "TensorProto", id: 5 },
            floats: { rule: "repeated", type: "float", id: 7 },
            ints: { rule: "repeated", type: "int64", id: 8 },
            type: { type: "int32", id: 20 },
          },
        },
        TensorProto: {
          fields: {
            dims: { rule: "repeated", type: "int64", id: 1 },
            data_type: { type: "int32", id: 2 },
            float_data: { rule: "repeated", type: "float", id: 4 },
            int32_data: { rule: "repeated", type: "int32", id: 5 },
            int64_data: { rule: "repeated", type: "int64", id: 7 },
            name: { type: "string", id: 8 },
            raw_data: { type: "bytes", id: 9 },
            data_location: { type: "int32", id: 14 },
          },
        },
        ValueInfoProto: {
          fields: { name: { type: "string", id: 1 }, type: { type: "TypeProto", id: 2 } },
        },
        TypeProto: { fields: { tensor_type: { type: "TypeProtoTensor", id: 1 } } },
        TypeProtoTensor: {
          fields: {
            elem_type: { type: "int32", id: 1 },
            shape: { type: "TensorShapeProto", id: 2 },
          },
        },
        TensorShapeProto: {
          fields: { dim: { rule: "repeated", type: "TensorShapeDimension", id: 1 } },
        },
        TensorShapeDimension: {
          fields: { dim_value: { type: "int64", id: 1 }, dim_param: { type: "string", id: 2 } },
        },
      },
    },
  },
};

// AttributeProto.AttributeType
const ATTRIBUTE_FLOAT = 1;
const ATTRIBUTE_INT = 2;
const ATTRIBUTE_STRING = 3;
const ATTRIBUTE_TENSOR = 4;
const ATTRIBUTE_FLOATS = 6;
const ATTRIBUTE_INTS = 7;

// TensorProto.DataType
const FLOAT = 1;
const INT32 = 6;
const INT64 = 7;

/** Plain objects as protobufjs's `toObject` gives them with the options below. */
interface RawTensor {
  dims: number[];
  data_type: number;
  float_data: number[];
  int32_data: number[];
  int64_data: number[];
  name: string;
  raw_data: Uint8Array;
  data_location: number;
}
interface RawAttribute {
  name: string;
  f: number;
  i: number;
  s: Uint8Array;
  t?: RawTensor;
  floats: number[];
  ints: number[];
  type: number;
}
interface RawNode {
  input: string[];
  output: string[];
  name: string;
  op_type: string;
  attribute: RawAttribute[];
  domain: string;
}
interface RawValueInfo {
  name: string;
  type?: {
    tensor_type?: {
      shape?: { dim: { dim_value: number; dim_param: string }[] };
    };
  };
}
interface RawModel {
  producer_name: string;
  graph?: {
    node: RawNode[];
    initializer: RawTensor[];
    input: RawValueInfo[];
    output: RawValueInfo[];
  };
  opset_import: { domain: string; version: number }[];
}

let modelType: protobuf.Type | undefined;

function tensorOf(raw: RawTensor, where: string): OnnxTensor {
  const name = raw.name;
  const what = `${where}${name === "" ? "" : ` '${name}'`}`;
  if (raw.data_location === 1) throw new Error(`Cannot read ${what}: its data is external`);
  const dims = raw.dims;
  const count = dims.reduce((a, b) => a * b, 1);
  const raw_data = raw.raw_data;
  let data: Float32Array | number[];
  if (raw.data_type === FLOAT) {
    if (raw_data.length > 0) {
      // raw_data is little-endian and may sit at any offset of the file: copy it out aligned.
      data = new Float32Array(raw_data.slice().buffer, 0, raw_data.length / 4);
    } else {
      data = Float32Array.from(raw.float_data);
    }
  } else if (raw.data_type === INT64 || raw.data_type === INT32) {
    if (raw_data.length > 0) {
      const view = new DataView(raw_data.buffer, raw_data.byteOffset, raw_data.byteLength);
      const width = raw.data_type === INT64 ? 8 : 4;
      data = Array.from(
        { length: raw_data.length / width },
        (_, i) => width === 8 ? Number(view.getBigInt64(i * 8, true)) : view.getInt32(i * 4, true),
      );
    } else {
      data = raw.data_type === INT64 ? raw.int64_data : raw.int32_data;
    }
  } else {
    throw new Error(`Cannot read ${what}: data type ${raw.data_type} is not float32 or int32/64`);
  }
  if (data.length !== count) {
    throw new Error(`Cannot read ${what}: ${data.length} values for dims [${dims.join(", ")}]`);
  }
  return { name, dims, data };
}

function attributeOf(raw: RawAttribute, node: string): OnnxAttribute {
  const where = `attribute '${raw.name}' of node '${node}'`;
  switch (raw.type) {
    case ATTRIBUTE_FLOAT:
      return raw.f;
    case ATTRIBUTE_INT:
      return raw.i;
    case ATTRIBUTE_STRING:
      return new TextDecoder().decode(raw.s);
    case ATTRIBUTE_TENSOR:
      return tensorOf(raw.t!, where);
    case ATTRIBUTE_FLOATS:
      return raw.floats;
    case ATTRIBUTE_INTS:
      return raw.ints;
    default:
      throw new Error(`Cannot read ${where}: attribute type ${raw.type} is not supported`);
  }
}

function valueInfoOf(raw: RawValueInfo): OnnxValueInfo {
  const dims = raw.type?.tensor_type?.shape?.dim ?? [];
  return {
    name: raw.name,
    dims: dims.map((dim) => (dim.dim_param !== "" || dim.dim_value === 0 ? -1 : dim.dim_value)),
  };
}

/**
 * Decodes an ONNX model file.
 *
 * @param bytes The `.onnx` file's contents.
 * @returns The graph.
 * @throws {Error} When the file is not an ONNX model this reader can read, naming the part.
 *
 * @example Read a one-node model
 * ```ts
 * import { readOnnx } from "./onnx.ts";
 * import assert from "node:assert/strict";
 *
 * // ModelProto { graph { node { input: "x" output: "y" op_type: "Relu" } } }
 * const node = [0x0a, 0x01, 0x78, 0x12, 0x01, 0x79, 0x22, 0x04, 0x52, 0x65, 0x6c, 0x75];
 * const graph = [0x0a, node.length, ...node];
 * const model = readOnnx(new Uint8Array([0x3a, graph.length, ...graph]));
 * assert.equal(model.nodes[0]!.opType, "Relu");
 * assert.deepEqual(model.nodes[0]!.inputs, ["x"]);
 * ```
 */
export function readOnnx(bytes: Uint8Array): OnnxModel {
  modelType ??= protobuf.Root.fromJSON(SCHEMA).lookupType("onnx.ModelProto");
  let raw: RawModel;
  try {
    raw = modelType.toObject(modelType.decode(bytes), {
      longs: Number,
      bytes: Uint8Array,
      defaults: true,
      arrays: true,
    }) as RawModel;
  } catch (error) {
    throw new Error(`Cannot read ONNX model: ${(error as Error).message}`, { cause: error });
  }
  const graph = raw.graph;
  if (graph === undefined) throw new Error("Cannot read ONNX model: it has no graph");
  const opset = raw.opset_import.find((entry) => entry.domain === "" || entry.domain === "ai.onnx");
  const initializers = new Map(
    graph.initializer.map((tensor) => [tensor.name, tensorOf(tensor, "initializer")]),
  );
  return {
    opset: opset?.version ?? 0,
    producer: raw.producer_name,
    nodes: graph.node.map((node) => {
      if (node.domain !== "" && node.domain !== "ai.onnx") {
        throw new Error(
          `Cannot read node '${node.name}': operator domain '${node.domain}' is not ONNX's`,
        );
      }
      return {
        name: node.name,
        opType: node.op_type,
        inputs: node.input,
        outputs: node.output,
        attributes: new Map(
          node.attribute.map((attribute) => [attribute.name, attributeOf(attribute, node.name)]),
        ),
      };
    }),
    initializers,
    inputs: graph.input.filter((input) => !initializers.has(input.name)).map(valueInfoOf),
    outputs: graph.output.map(valueInfoOf),
  };
}
