import assert from "node:assert/strict";
import {
  envNameOf,
  parseEnvBoolean,
  parseEnvInteger,
  readTritonConfigEnv,
  splitEnvSettings,
} from "./triton_config_env.ts";

Deno.test("envNameOf() writes fields in upper snake case", () => {
  assert.equal(envNameOf("id"), "DENOTRITON_TRITON_CONFIG_ID");
  assert.equal(envNameOf("allowCpuMetrics"), "DENOTRITON_TRITON_CONFIG_ALLOW_CPU_METRICS");
});

Deno.test("parseEnvBoolean() knows eight words and nothing else", () => {
  for (const word of ["true", "1", "yes", "on", " TRUE "]) {
    assert.equal(parseEnvBoolean(word), true);
  }
  for (const word of ["false", "0", "no", "off", "No"]) assert.equal(parseEnvBoolean(word), false);
  for (const word of ["", "y", "2", "enabled"]) assert.equal(parseEnvBoolean(word), word);
});

Deno.test("parseEnvInteger() takes decimal digits only", () => {
  assert.equal(parseEnvInteger("-12"), -12);
  assert.equal(parseEnvInteger("007"), 7);
  for (const text of ["", " ", "1.0", "0b1", "Infinity", "1_000"]) {
    assert.equal(parseEnvInteger(text), text);
  }
});

Deno.test("splitEnvSettings() pairs a group with the setting after it", () => {
  assert.deepEqual(splitEnvSettings("local,size=1,redis,host=h,redis,port=6379"), [
    "local,size=1",
    "redis,host=h",
    "redis,port=6379",
  ]);
  assert.deepEqual(splitEnvSettings("opentelemetry,resource=service.name=x"), [
    "opentelemetry,resource=service.name=x",
  ]);
  // Parts that fit no pattern are kept for the schema to reject with a clear message.
  assert.deepEqual(splitEnvSettings("local"), ["local"]);
  assert.deepEqual(splitEnvSettings("a,b,c=1"), ["a", "b,c=1"]);
  assert.deepEqual(splitEnvSettings("   "), []);
});

Deno.test("readTritonConfigEnv() reports where each field came from", () => {
  const result = readTritonConfigEnv(
    {
      DENOTRITON_TRITON_CONFIG_ALLOW_HTTP: "off",
      DENOTRITON_TRITON_CONFIG_TRACE_CONFIG_3: "b=2",
      DENOTRITON_TRITON_CONFIG_TRACE_CONFIG_1: "a=1",
    },
    { allowHttp: "boolean", traceConfig: "settings" },
  );
  assert.deepEqual(result.values, { allowHttp: false, traceConfig: ["a=1", "b=2"] });
  assert.deepEqual(result.variables, {
    allowHttp: "DENOTRITON_TRITON_CONFIG_ALLOW_HTTP",
    traceConfig: [
      "DENOTRITON_TRITON_CONFIG_TRACE_CONFIG_1",
      "DENOTRITON_TRITON_CONFIG_TRACE_CONFIG_3",
    ],
  });
});
