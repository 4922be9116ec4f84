// Triton's trace extension on both engines: tritonclient reads and changes the settings over
// HTTP and gRPC (bad settings refused naming the setting), and in mode `triton` a traced
// request writes one record with Triton's timestamps in order; trace_rate and trace_count
// decide how many (the records are counted).

import assert from "node:assert/strict";
import { type BindOptions, Triton } from "../mod.ts";
import { ENGINES, PEERS_REQUIRED, startServer } from "./_helpers.ts";
import { PYTHON } from "./_peers.ts";

const SCRIPT = new URL("./interop/trace_client.py", import.meta.url).pathname;

const ID: BindOptions = {
  modelName: "Id",
  inferFunc: (requests) => requests.map((request) => ({ y: request.data.x! })),
  inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
  outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
  config: { maxBatchSize: 4 },
};

const TIMELINE = [
  "REQUEST_START",
  "QUEUE_START",
  "COMPUTE_START",
  "COMPUTE_INPUT_END",
  "COMPUTE_OUTPUT_START",
  "COMPUTE_END",
  "REQUEST_END",
];

interface TraceRecord {
  id: number;
  model_name?: string;
  model_version?: number;
  request_id?: string;
  timestamps?: { name: string; ns: number }[];
  activity?: string;
  tensor?: { name: string; data: string; shape: string; dtype: string };
}

async function infer(triton: Triton, id: string, data = [1, 2]): Promise<void> {
  const response = await fetch(`${triton.urls.http}/v2/models/Id/infer`, {
    method: "POST",
    body: JSON.stringify({
      id,
      inputs: [{ name: "x", datatype: "FP32", shape: [1, data.length], data }],
    }),
  });
  const text = await response.text();
  assert.equal(response.status, 200, text);
}

/** Every record of a trace file and its indexed files (`<file>.0`, ...), in file order. */
function recordsOf(file: string): TraceRecord[] {
  const records: TraceRecord[] = [];
  const read = (path: string): boolean => {
    try {
      records.push(...JSON.parse(Deno.readTextFileSync(path)) as TraceRecord[]);
      return true;
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return false;
      throw error;
    }
  };
  for (let index = 0; read(`${file}.${index}`); index++);
  read(file);
  return records;
}

/** The records grouped by trace: the head record, the timestamps in order, the tensors. */
function traces(records: TraceRecord[]): Map<number, TraceRecord[]> {
  const byId = new Map<number, TraceRecord[]>();
  for (const record of records) {
    const list = byId.get(record.id) ?? [];
    list.push(record);
    byId.set(record.id, list);
  }
  return byId;
}

for (const engine of ENGINES) {
  for (const protocol of ["http", "grpc"] as const) {
    const name = `tritonclient reads and changes trace settings over ${protocol} [${engine}]`;
    Deno.test({
      name: PYTHON ? name : `${name} (skipped: no python3 with tritonclient)`,
      ignore: PYTHON === undefined && !PEERS_REQUIRED,
      async fn(): Promise<void> {
        assert.ok(PYTHON, "python3 with tritonclient is required but was not found");
        const dir = await Deno.makeTempDir({ prefix: "denotriton-trace-" });
        try {
          await using triton = await startServer({ engine, models: [ID] });
          const url = (protocol === "http" ? triton.urls.http! : triton.urls.grpc!)
            .replace(/^\w+:\/\//, "");
          const result = await new Deno.Command(PYTHON.python, {
            args: [SCRIPT, "--url", url, "--protocol", protocol, "--dir", dir],
            stdout: "piped",
            stderr: "piped",
            signal: AbortSignal.timeout(120_000),
          }).output();
          const decoder = new TextDecoder();
          const stdout = decoder.decode(result.stdout);
          assert.equal(result.code, 0, `${stdout}\n${decoder.decode(result.stderr)}`);
          assert.deepEqual(stdout.match(/^ok .*$/gm), [
            "ok defaults",
            "ok update global",
            "ok model setting",
            "ok refusals",
            "ok off",
          ]);
        } finally {
          await Deno.remove(dir, { recursive: true });
        }
      },
    });
  }

  Deno.test(`bad trace settings are refused naming the setting, over HTTP [${engine}]`, async () => {
    await using triton = await startServer({ engine, models: [ID] });
    const post = async (body: unknown, path = "/v2/trace/setting"): Promise<[number, string]> => {
      const response = await fetch(`${triton.urls.http}${path}`, {
        method: "POST",
        body: JSON.stringify(body),
      });
      return [response.status, (await response.json()).error];
    };
    assert.deepEqual(await post({ trace_rate: "0" }), [
      400,
      "Invalid trace_rate '0': expected an integer from 1 to 4294967295",
    ]);
    assert.deepEqual(await post({ trace_level: ["ALL"] }), [
      400,
      "Invalid trace_level 'ALL': expected OFF, TIMESTAMPS or TENSORS",
    ]);
    assert.deepEqual(await post({ trace_file: "/no/such/dir/t.json" }), [
      400,
      "Invalid trace_file '/no/such/dir/t.json': directory '/no/such/dir' does not exist",
    ]);
    assert.deepEqual(await post({ trace_level: ["TIMESTAMPS"] }), [
      400,
      "Invalid trace settings: trace_level is on in trace mode triton but trace_file is empty",
    ]);
    assert.deepEqual(await post({ trace_mode: "opentelemetry" }), [
      400,
      "Invalid trace_mode 'opentelemetry': the trace mode is set when the server starts (traceConfig mode=...), and it is 'triton'",
    ]);
    assert.deepEqual(await post({ trace_rate: 5 }), [
      400,
      "Invalid 'trace_rate': expected a string",
    ]);
    assert.deepEqual(await post({ sample: "1" }), [
      400,
      "Unknown trace setting 'sample': expected one of trace_level, trace_rate, trace_count, log_frequency, trace_file, trace_mode",
    ]);
    const [status] = await post({ trace_rate: "3" }, "/v2/models/Nope/trace/setting");
    assert.equal(status, 404);
    const settings = await (await fetch(`${triton.urls.http}/v2/trace/setting`)).json();
    assert.deepEqual(settings.trace_level, ["OFF"]);
    assert.equal(settings.trace_rate, "1000");
  });

  Deno.test(`mode triton writes one record per traced request, timestamps in order [${engine}]`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "denotriton-trace-" });
    const file = `${dir}/trace.json`;
    try {
      const triton = await startServer({
        engine,
        models: [ID],
        config: {
          traceConfig: ["level=TIMESTAMPS", "level=TENSORS", "rate=1", `triton,file=${file}`],
        },
      });
      try {
        await infer(triton, "first", [1, 2]);
        await infer(triton, "second", [3, 4]);
      } finally {
        await triton.stop();
      }
      const byId = traces(recordsOf(file));
      assert.equal(byId.size, 2);
      const requestIds: string[] = [];
      for (const records of byId.values()) {
        const [head, ...rest] = records;
        assert.equal(head!.model_name, "Id");
        assert.equal(head!.model_version, 1);
        requestIds.push(head!.request_id!);
        const stamps = rest.filter((record) => record.timestamps !== undefined)
          .map((record) => record.timestamps![0]!);
        assert.deepEqual(stamps.map((stamp) => stamp.name), TIMELINE);
        for (let i = 1; i < stamps.length; i++) {
          assert.ok(
            stamps[i]!.ns >= stamps[i - 1]!.ns,
            `${stamps[i]!.name} before ${stamps[i - 1]!.name}`,
          );
        }
        const tensors = rest.filter((record) => record.tensor !== undefined);
        assert.deepEqual(
          tensors.map((record) => [record.activity, record.tensor!.name, record.tensor!.dtype]),
          [["TENSOR_QUEUE_INPUT", "x", "FP32"], ["TENSOR_BACKEND_OUTPUT", "y", "FP32"]],
        );
        assert.equal(tensors[0]!.tensor!.shape, "1,2");
        assert.equal(tensors[0]!.tensor!.data, tensors[1]!.tensor!.data);
      }
      assert.deepEqual(requestIds.sort(), ["first", "second"]);
      const data = [...byId.values()].map((records) =>
        records.find((record) => record.tensor !== undefined)!.tensor!.data
      ).sort();
      assert.deepEqual(data, ["1,2", "3,4"]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });

  Deno.test(`trace_rate and trace_count decide how many requests are traced [${engine}]`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "denotriton-trace-" });
    try {
      const rated = `${dir}/rate.json`;
      const counted = `${dir}/count.json`;
      const triton = await startServer({
        engine,
        models: [ID],
        config: { traceConfig: ["level=TIMESTAMPS", "rate=3", `triton,file=${rated}`] },
      });
      try {
        // Every third request: 3 of 9.
        for (let i = 0; i < 9; i++) await infer(triton, `r${i}`);
        // Then, over HTTP: every request, 2 more at most, written to <file>.0 once collected.
        const response = await fetch(`${triton.urls.http}/v2/trace/setting`, {
          method: "POST",
          body: JSON.stringify({ trace_rate: "1", trace_count: "2", trace_file: counted }),
        });
        assert.equal(response.status, 200, await response.text());
        for (let i = 0; i < 5; i++) await infer(triton, `c${i}`);
        const after = await (await fetch(`${triton.urls.http}/v2/trace/setting`)).json();
        assert.equal(after.trace_count, "0");
      } finally {
        await triton.stop();
      }
      const rate = [...traces(recordsOf(rated)).values()].map((records) => records[0]!.request_id);
      assert.deepEqual(rate, ["r2", "r5", "r8"]);
      const countFiles = (await Array.fromAsync(Deno.readDir(dir))).map((entry) => entry.name)
        .sort();
      assert.deepEqual(countFiles, ["count.json.0", "rate.json"]);
      const count = [...traces(recordsOf(counted)).values()].map((records) =>
        records[0]!.request_id
      );
      assert.deepEqual(count, ["c0", "c1"]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("traceConfig entries that do not parse fail new Triton() naming them", () => {
  assert.throws(() => new Triton({ config: { traceConfig: ["rate=0"] } }), {
    name: "TritonValidationError",
    message: "Invalid traceConfig entry 'rate=0': expected a value in [1, 4294967295]",
  });
  assert.throws(() => new Triton({ config: { traceConfig: ["level=TIMESTAMPS"] } }), {
    message:
      "Invalid traceConfig: tracing is on in mode triton but no trace file is given (add triton,file=<path>)",
  });
  assert.throws(() => new Triton({ config: { traceConfig: ["zipkin,url=http://x"] } }), {
    message:
      "Invalid traceConfig entry 'zipkin,url=http://x': unknown trace mode 'zipkin' (triton, opentelemetry)",
  });
});
