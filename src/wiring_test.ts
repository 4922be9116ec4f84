import assert from "node:assert/strict";
import {
  resolveTritonConfig,
  TRITON_CONFIG_FIELD_USES,
  type TritonConfigConsumer,
} from "./config/triton_config.ts";
import { CONSUMER_OPTIONS, engineOptionsOf, facadeOptionsOf, grpcOptionsOf } from "./wiring.ts";
import type { ResolvedTritonConfig } from "./config/triton_config_fields.ts";

/** Runs `read` on a config that records which of its fields were read. */
function fieldsRead(
  config: ResolvedTritonConfig,
  read: (config: ResolvedTritonConfig) => unknown,
): Set<string> {
  const seen = new Set<string>();
  const recording = new Proxy(config, {
    get(target, property, receiver): unknown {
      if (typeof property === "string") seen.add(property);
      return Reflect.get(target, property, receiver);
    },
  });
  read(recording);
  return seen;
}

// TLS on, so the TLS fields are read too (they matter only then); CORS on for the same reason.
const CONFIG = resolveTritonConfig({
  env: {},
  config: {
    grpcUseSslMutual: true,
    grpcServerCert: "c.pem",
    grpcServerKey: "k.pem",
    grpcRootCert: "ca.pem",
    logFile: "/tmp/x.log",
    httpHeaderForwardPattern: "^x-",
    grpcHeaderForwardPattern: "^x-",
    httpCorsOrigins: ["http://app.test"],
  },
});

Deno.test("each consumer's options read every field TRITON_CONFIG_FIELD_USES gives it", () => {
  const wanted = new Map<TritonConfigConsumer, string[]>();
  for (const [field, use] of Object.entries(TRITON_CONFIG_FIELD_USES)) {
    if ("refused" in use) continue;
    for (const consumer of use.consumers) {
      wanted.set(consumer, [...(wanted.get(consumer) ?? []), field]);
    }
  }
  assert.deepEqual(
    [...wanted.keys()].sort(),
    Object.keys(CONSUMER_OPTIONS).sort(),
    "every consumer has fields and an options function",
  );
  for (const [consumer, fields] of wanted) {
    const read = fieldsRead(CONFIG, CONSUMER_OPTIONS[consumer]);
    const unread = fields.filter((field) => !read.has(field));
    assert.deepEqual(unread, [], `${consumer} does not read ${unread.join(", ")}`);
  }
});

Deno.test("no options function reads a refused field", () => {
  const refused = Object.entries(TRITON_CONFIG_FIELD_USES)
    .filter(([, use]) => "refused" in use).map(([field]) => field);
  for (const [consumer, options] of Object.entries(CONSUMER_OPTIONS)) {
    const read = fieldsRead(CONFIG, options);
    assert.deepEqual(refused.filter((field) => read.has(field)), [], consumer);
  }
});

Deno.test("engineOptionsOf() hands the metrics, cache and exit settings to the engine", () => {
  const options = engineOptionsOf(resolveTritonConfig({
    env: {},
    config: {
      allowCpuMetrics: true,
      allowGpuMetrics: true,
      metricsIntervalMs: 500,
      metricsConfig: ["counter_latencies=false"],
      exitOnError: false,
      cacheConfig: ["local,size=4096"],
    },
  }));
  assert.equal(options.metrics, true);
  assert.equal(options.cpuMetrics, true);
  assert.equal(options.gpuMetrics, true);
  assert.equal(options.metricsIntervalMs, 500);
  assert.deepEqual(options.metricsConfig, ["counter_latencies=false"]);
  assert.equal(options.exitOnError, false);
  assert.deepEqual(options.cacheConfig, { name: "local", config: { size: "4096" } });
  assert.equal(options.responseCacheByteSize, 4096);
  // Metrics not served are not kept.
  const off = engineOptionsOf(resolveTritonConfig({ env: {}, config: { allowMetrics: false } }));
  assert.equal(off.metrics, false);
});

Deno.test("engineOptionsOf(): GPU metrics and the pinned pool are left to the engine unless set", () => {
  const unset = engineOptionsOf(resolveTritonConfig({ env: {} }));
  assert.equal("gpuMetrics" in unset, false);
  assert.equal("pinnedMemoryPoolByteSize" in unset, false);
  const set = engineOptionsOf(resolveTritonConfig({
    env: {},
    config: { allowGpuMetrics: false, pinnedMemoryPoolByteSize: 0 },
  }));
  assert.equal(set.gpuMetrics, false);
  assert.equal(set.pinnedMemoryPoolByteSize, 0);
  const fromEnv = engineOptionsOf(resolveTritonConfig({
    env: { DENOTRITON_TRITON_CONFIG_PINNED_MEMORY_POOL_BYTE_SIZE: "1048576" },
  }));
  assert.equal(fromEnv.pinnedMemoryPoolByteSize, 1048576);
});

Deno.test("grpcOptionsOf() maps keepalive and TLS; facadeOptionsOf() knows when there is a cache", () => {
  const plan = grpcOptionsOf(CONFIG);
  assert.equal(plan.keepaliveTimeMs, 7200000);
  assert.equal(plan.keepaliveTimeoutMs, 20000);
  assert.deepEqual(plan.tlsFiles, {
    certChain: "c.pem",
    privateKey: "k.pem",
    rootCerts: "ca.pem",
    checkClientCertificate: true,
  });
  assert.equal(grpcOptionsOf(resolveTritonConfig({ env: {} })).tlsFiles, undefined);
  const cached = (cacheConfig: string[]): boolean =>
    facadeOptionsOf(resolveTritonConfig({ env: {}, config: { cacheConfig } })).responseCache;
  assert.equal(cached([]), false);
  assert.equal(cached(["local,size=0"]), false);
  assert.equal(cached(["local,size=1"]), true);
  assert.equal(cached(["redis,host=h"]), true);
});
