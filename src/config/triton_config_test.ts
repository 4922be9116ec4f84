import assert from "node:assert/strict";
import { TritonValidationError } from "../errors.ts";
import { resolveTritonConfig, TRITON_CONFIG_FIELD_USES } from "./triton_config.ts";
import type { TritonConfig } from "./triton_config_fields.ts";

const P = "DENOTRITON_TRITON_CONFIG_";

/** Writes `text` to a temporary YAML file, runs `body` with its path, then removes it. */
async function withYaml(text: string, body: (path: string) => void | Promise<void>): Promise<void> {
  const path = await Deno.makeTempFile({ suffix: ".yaml" });
  try {
    await Deno.writeTextFile(path, text);
    await body(path);
  } finally {
    await Deno.remove(path);
  }
}

function rejects(run: () => unknown, message: string | RegExp): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof TritonValidationError, `not a TritonValidationError: ${error}`);
    if (typeof message === "string") assert.equal(error.message, message);
    else assert.match(error.message, message);
    return true;
  });
}

Deno.test("resolveTritonConfig() applies every default", () => {
  assert.deepEqual(resolveTritonConfig({ env: {} }), {
    id: "triton",
    modelRepository: undefined,
    httpAddress: "0.0.0.0",
    httpPort: 8000,
    httpThreadCount: 1,
    httpCorsOrigins: [],
    httpCorsAllowCredentials: false,
    httpCorsMaxAge: 600,
    httpDocs: true,
    grpcAddress: "0.0.0.0",
    grpcPort: 8001,
    metricsAddress: "0.0.0.0",
    metricsPort: 8002,
    allowHttp: true,
    allowGrpc: true,
    allowMetrics: true,
    allowCpuMetrics: false,
    allowGpuMetrics: undefined,
    metricsIntervalMs: 2000,
    metricsConfig: [],
    logVerbose: 0,
    logFile: undefined,
    logFormat: "default",
    exitTimeoutSecs: 30,
    exitOnError: true,
    strictReadiness: true,
    httpHeaderForwardPattern: undefined,
    grpcHeaderForwardPattern: undefined,
    pinnedMemoryPoolByteSize: undefined,
    responseCacheByteSize: 0,
    cacheConfig: [],
    traceConfig: [],
    maxRequestBytes: 67108864,
    grpcMaxMessageBytes: 67108864,
    grpcInferResponseCompressionLevel: "none",
    grpcKeepaliveTime: 7200000,
    grpcKeepaliveTimeout: 20000,
    grpcKeepalivePermitWithoutCalls: true,
    grpcUseSsl: false,
    grpcUseSslMutual: false,
    grpcServerCert: undefined,
    grpcServerKey: undefined,
    grpcRootCert: undefined,
  });
});

Deno.test("resolveTritonConfig() returns a frozen config", () => {
  const config = resolveTritonConfig({ env: {}, config: { cacheConfig: ["local,size=8"] } });
  assert.ok(Object.isFrozen(config));
  assert.ok(Object.isFrozen(config.cacheConfig));
  assert.ok(Object.isFrozen(config.traceConfig));
});

Deno.test("resolveTritonConfig() merges argument > env > file > default field by field", async () => {
  await withYaml(
    "id: from-file\nhttpPort: 1001\ngrpcPort: 1002\nmetricsPort: 1003\nlogVerbose: 1\n",
    (path) => {
      const config = resolveTritonConfig({
        configFile: path,
        env: { [`${P}GRPC_PORT`]: "2002", [`${P}METRICS_PORT`]: "2003", [`${P}LOG_VERBOSE`]: "2" },
        config: { metricsPort: 3003, exitTimeoutSecs: 5 },
      });
      assert.equal(config.id, "from-file");
      assert.equal(config.httpPort, 1001);
      assert.equal(config.grpcPort, 2002);
      assert.equal(config.metricsPort, 3003);
      assert.equal(config.logVerbose, 2);
      assert.equal(config.exitTimeoutSecs, 5);
      assert.equal(config.strictReadiness, true);
    },
  );
});

Deno.test("resolveTritonConfig() skips undefined argument fields", () => {
  const config = resolveTritonConfig({
    env: { [`${P}HTTP_PORT`]: "9000" },
    config: { httpPort: undefined } as unknown as TritonConfig,
  });
  assert.equal(config.httpPort, 9000);
});

Deno.test("resolveTritonConfig() finds the file through DENOTRITON_CONFIG_FILE", async () => {
  await withYaml("httpPort: 1001\n", async (first) => {
    await withYaml("httpPort: 1002\n", (second) => {
      assert.equal(resolveTritonConfig({ env: { DENOTRITON_CONFIG_FILE: first } }).httpPort, 1001);
      assert.equal(
        resolveTritonConfig({ configFile: second, env: { DENOTRITON_CONFIG_FILE: first } })
          .httpPort,
        1002,
      );
      assert.equal(resolveTritonConfig({ env: { DENOTRITON_CONFIG_FILE: "" } }).httpPort, 8000);
    });
  });
});

Deno.test("resolveTritonConfig() parses env booleans", () => {
  const cases: [string, boolean][] = [
    ["true", true],
    ["TRUE", true],
    ["1", true],
    ["yes", true],
    ["On", true],
    ["false", false],
    ["False", false],
    ["0", false],
    ["no", false],
    ["OFF", false],
  ];
  for (const [text, expected] of cases) {
    const config = resolveTritonConfig({ env: { [`${P}ALLOW_METRICS`]: text } });
    assert.equal(config.allowMetrics, expected, text);
  }
  rejects(
    () => resolveTritonConfig({ env: { [`${P}STRICT_READINESS`]: "maybe" } }),
    `Invalid TritonConfig from environment variable ${P}STRICT_READINESS: strictReadiness must be a boolean (true, false, 1, 0, yes, no, on or off), got "maybe"`,
  );
  rejects(
    () => resolveTritonConfig({ env: { [`${P}ALLOW_HTTP`]: "" } }),
    /ALLOW_HTTP: allowHttp must be a boolean .*, got ""$/,
  );
});

Deno.test("resolveTritonConfig() parses env integers strictly", () => {
  assert.equal(resolveTritonConfig({ env: { [`${P}HTTP_PORT`]: " 0 " } }).httpPort, 0);
  assert.equal(resolveTritonConfig({ env: { [`${P}LOG_VERBOSE`]: "+3" } }).logVerbose, 3);
  for (const text of ["abc", "8000.5", "1e3", "0x10", "", "80 00"]) {
    rejects(
      () => resolveTritonConfig({ env: { [`${P}HTTP_PORT`]: text } }),
      `Invalid TritonConfig from environment variable ${P}HTTP_PORT: httpPort must be an integer between 0 and 65535, got ${
        JSON.stringify(text)
      }`,
    );
  }
  rejects(
    () => resolveTritonConfig({ env: { [`${P}GRPC_PORT`]: "-1" } }),
    `Invalid TritonConfig from environment variable ${P}GRPC_PORT: grpcPort must be an integer between 0 and 65535, got -1`,
  );
  rejects(
    () => resolveTritonConfig({ env: { [`${P}MAX_REQUEST_BYTES`]: "0" } }),
    `Invalid TritonConfig from environment variable ${P}MAX_REQUEST_BYTES: maxRequestBytes must be an integer >= 1, got 0`,
  );
});

Deno.test("resolveTritonConfig() reads env strings as they are", () => {
  const config = resolveTritonConfig({
    env: { [`${P}ID`]: "my server", [`${P}HTTP_ADDRESS`]: "127.0.0.1", [`${P}LOG_FILE`]: "/t/x" },
  });
  assert.equal(config.id, "my server");
  assert.equal(config.httpAddress, "127.0.0.1");
  assert.equal(config.metricsAddress, "127.0.0.1");
  assert.equal(config.logFile, "/t/x");
  rejects(
    () => resolveTritonConfig({ env: { [`${P}ID`]: "" } }),
    `Invalid TritonConfig from environment variable ${P}ID: id must be a non-empty string, got ""`,
  );
});

Deno.test("resolveTritonConfig() reads comma-separated env lists", () => {
  const config = resolveTritonConfig({
    env: {
      [`${P}CACHE_CONFIG`]: "local,size=1048576, redis,host=h,redis,port=6379",
      [`${P}METRICS_CONFIG`]: "counter_latencies=false,summary_latencies=true",
      [`${P}TRACE_CONFIG`]: "",
    },
  });
  assert.deepEqual(config.cacheConfig, ["local,size=1048576", "redis,host=h", "redis,port=6379"]);
  assert.deepEqual(config.metricsConfig, ["counter_latencies=false", "summary_latencies=true"]);
  assert.deepEqual(config.traceConfig, []);
});

Deno.test("resolveTritonConfig() orders indexed env lists by index and prefers them", () => {
  const config = resolveTritonConfig({
    env: {
      [`${P}METRICS_CONFIG_10`]: "summary_quantiles=0.5:0.05,0.9:0.01",
      [`${P}METRICS_CONFIG_2`]: "summary_latencies=true",
      [`${P}METRICS_CONFIG`]: "histogram_latencies=true",
      [`${P}METRICS_CONFIG_0`]: "counter_latencies=false",
    },
  });
  assert.deepEqual(config.metricsConfig, [
    "counter_latencies=false",
    "summary_latencies=true",
    "summary_quantiles=0.5:0.05,0.9:0.01",
  ]);
  rejects(
    () =>
      resolveTritonConfig({
        env: { [`${P}CACHE_CONFIG_1`]: "a,b=1", [`${P}CACHE_CONFIG_01`]: "a,b=2" },
      }),
    /^Invalid TritonConfig from environment variable DENOTRITON_TRITON_CONFIG_CACHE_CONFIG_0?1: index 1 of cacheConfig is given twice \(also by DENOTRITON_TRITON_CONFIG_CACHE_CONFIG_0?1\)$/,
  );
});

Deno.test("resolveTritonConfig() names the indexed variable of a bad list element", () => {
  rejects(
    () =>
      resolveTritonConfig({
        env: { [`${P}CACHE_CONFIG_0`]: "local,size=8", [`${P}CACHE_CONFIG_5`]: "local" },
      }),
    `Invalid TritonConfig from environment variable ${P}CACHE_CONFIG_5: cacheConfig[1] must be a "<group>,<setting>=<value>" or "<setting>=<value>" string, got "local"`,
  );
});

Deno.test("resolveTritonConfig() rejects unknown DENOTRITON_TRITON_CONFIG_ variables", () => {
  rejects(
    () => resolveTritonConfig({ env: { [`${P}HTPP_PORT`]: "1" } }),
    `Invalid TritonConfig from environment variable ${P}HTPP_PORT: unknown field (names are ${P} followed by a field in upper snake case, e.g. ${P}HTTP_PORT)`,
  );
  rejects(
    () => resolveTritonConfig({ env: { [`${P}HTTP_PORT_0`]: "1" } }),
    `Invalid TritonConfig from environment variable ${P}HTTP_PORT_0: httpPort is not a list, so it takes no index`,
  );
  // Other variables, including other DENOTRITON_ ones, are not ours to judge.
  const config = resolveTritonConfig({ env: { HOME: "/root", DENOTRITON_OTHER: "x" } });
  assert.equal(config.httpPort, 8000);
});

Deno.test("resolveTritonConfig() lists problems from several variables", () => {
  rejects(
    () => resolveTritonConfig({ env: { [`${P}HTTP_PORT`]: "x", [`${P}ALLOW_GRPC`]: "nope" } }),
    `Invalid TritonConfig: from environment variable ${P}HTTP_PORT: httpPort must be an integer between 0 and 65535, got "x"; from environment variable ${P}ALLOW_GRPC: allowGrpc must be a boolean (true, false, 1, 0, yes, no, on or off), got "nope"`,
  );
});

Deno.test("resolveTritonConfig() reads YAML files with camelCase and snake_case keys", async () => {
  await withYaml(
    [
      "http_port: 9000",
      "allowGrpc: false",
      "grpc_header_forward_pattern: ^x-.*",
      "cache_config:",
      "  - local,size=1024",
      "log_file: null",
      "",
    ].join("\n"),
    (path) => {
      const config = resolveTritonConfig({ configFile: path, env: {} });
      assert.equal(config.httpPort, 9000);
      assert.equal(config.allowGrpc, false);
      assert.equal(config.grpcHeaderForwardPattern, "^x-.*");
      assert.deepEqual(config.cacheConfig, ["local,size=1024"]);
      assert.equal(config.responseCacheByteSize, 1024);
      assert.equal(config.logFile, undefined);
    },
  );
  await withYaml("", (path) => {
    assert.equal(resolveTritonConfig({ configFile: path, env: {} }).httpPort, 8000);
  });
});

Deno.test("resolveTritonConfig() names the file in YAML errors", async () => {
  await withYaml("httpPort: [1,\n", (path) => {
    rejects(
      () => resolveTritonConfig({ configFile: path, env: {} }),
      new RegExp(
        `^Invalid TritonConfig from ${
          RegExp.escape(path)
        }: cannot parse YAML: .+\\(line \\d+, column \\d+\\)$`,
      ),
    );
  });
  await withYaml("htpPort: 9000\n", (path) => {
    rejects(
      () => resolveTritonConfig({ configFile: path, env: {} }),
      `Invalid TritonConfig from ${path}: unknown field "htpPort"`,
    );
  });
  await withYaml("httpPort: '9000'\nallowHttp: 1\n", (path) => {
    rejects(
      () => resolveTritonConfig({ configFile: path, env: {} }),
      `Invalid TritonConfig from ${path}: httpPort must be an integer between 0 and 65535, got "9000"; allowHttp must be a boolean, got 1`,
    );
  });
  await withYaml("- httpPort: 9000\n", (path) => {
    rejects(
      () => resolveTritonConfig({ configFile: path, env: {} }),
      `Invalid TritonConfig from ${path}: the file must hold a mapping of TritonConfig fields, got a list`,
    );
  });
  await withYaml("httpPort: 1\nhttp_port: 2\n", (path) => {
    rejects(
      () => resolveTritonConfig({ configFile: path, env: {} }),
      `Invalid TritonConfig from ${path}: field "httpPort" is given twice (as "httpPort" and "http_port")`,
    );
  });
  await withYaml("__proto__: {httpPort: 1}\n", (path) => {
    rejects(
      () => resolveTritonConfig({ configFile: path, env: {} }),
      `Invalid TritonConfig from ${path}: unknown field "__proto__"`,
    );
  });
});

Deno.test("resolveTritonConfig() reports a missing file", () => {
  const path = "/nonexistent/denotriton/config.yaml";
  rejects(
    () => resolveTritonConfig({ configFile: path, env: {} }),
    /^Cannot read TritonConfig file \/nonexistent\/denotriton\/config\.yaml: NotFound: /,
  );
});

Deno.test("resolveTritonConfig() names the field and the argument source", () => {
  rejects(
    () =>
      resolveTritonConfig({
        env: {},
        config: { htpPort: 1, grpcPort: 70000 } as unknown as TritonConfig,
      }),
    'Invalid TritonConfig from the config argument: grpcPort must be an integer between 0 and 65535, got 70000; unknown field "htpPort"',
  );
  rejects(
    () => resolveTritonConfig({ env: {}, config: { logVerbose: 1.5 } }),
    "Invalid TritonConfig from the config argument: logVerbose must be an integer >= 0, got 1.5",
  );
  rejects(
    () =>
      resolveTritonConfig({
        env: {},
        config: { grpcInferResponseCompressionLevel: "max" } as unknown as TritonConfig,
      }),
    'Invalid TritonConfig from the config argument: grpcInferResponseCompressionLevel must be one of "none", "low", "medium", "high", got "max"',
  );
  rejects(
    () => resolveTritonConfig({ env: {}, config: { cacheConfig: "local,size=1" } as never }),
    'Invalid TritonConfig from the config argument: cacheConfig must be a list of strings, got "local,size=1"',
  );
  rejects(
    () => resolveTritonConfig({ env: {}, config: 5 as never }),
    "Invalid TritonConfig from the config argument: expected an object, got 5",
  );
});

Deno.test("resolveTritonConfig() keeps at least one of HTTP and gRPC", async () => {
  assert.equal(resolveTritonConfig({ env: {}, config: { allowHttp: false } }).allowGrpc, true);
  assert.equal(resolveTritonConfig({ env: {}, config: { allowGrpc: false } }).allowHttp, true);
  rejects(
    () => resolveTritonConfig({ env: {}, config: { allowHttp: false, allowGrpc: false } }),
    "Invalid TritonConfig: allowHttp (from the config argument) and allowGrpc (from the config argument) are both false: at least one of HTTP and gRPC must stay on",
  );
  await withYaml("allowHttp: false\n", (path) => {
    rejects(
      () => resolveTritonConfig({ configFile: path, env: { [`${P}ALLOW_GRPC`]: "0" } }),
      `Invalid TritonConfig: allowHttp (from ${path}) and allowGrpc (from environment variable ${P}ALLOW_GRPC) are both false: at least one of HTTP and gRPC must stay on`,
    );
    // A higher source turning one back on resolves the conflict.
    const config = resolveTritonConfig({
      configFile: path,
      env: { [`${P}ALLOW_GRPC`]: "0" },
      config: { allowHttp: true },
    });
    assert.equal(config.allowHttp, true);
    assert.equal(config.allowGrpc, false);
  });
});

Deno.test("resolveTritonConfig() checks header forward patterns compile", () => {
  const config = resolveTritonConfig({
    env: { [`${P}HTTP_HEADER_FORWARD_PATTERN`]: "^x-(trace|user)-.*$" },
  });
  assert.equal(config.httpHeaderForwardPattern, "^x-(trace|user)-.*$");
  rejects(
    () => resolveTritonConfig({ env: {}, config: { httpHeaderForwardPattern: "(" } }),
    'Invalid TritonConfig from the config argument: httpHeaderForwardPattern must be a valid regular expression, got "(": Invalid regular expression: /(/: Unterminated group',
  );
  rejects(
    () => resolveTritonConfig({ env: { [`${P}GRPC_HEADER_FORWARD_PATTERN`]: "[a-" } }),
    /^Invalid TritonConfig from environment variable DENOTRITON_TRITON_CONFIG_GRPC_HEADER_FORWARD_PATTERN: grpcHeaderForwardPattern must be a valid regular expression, got "\[a-": Invalid regular expression/,
  );
});

Deno.test("resolveTritonConfig() takes the response cache size from cacheConfig", () => {
  const fromList = resolveTritonConfig({
    env: {},
    config: { cacheConfig: ["local,size=1048576"] },
  });
  assert.equal(fromList.responseCacheByteSize, 1048576);
  assert.deepEqual(fromList.cacheConfig, ["local,size=1048576"]);

  const lastWins = resolveTritonConfig({
    env: {},
    config: { cacheConfig: ["local,size=1", "redis,host=h", "local,size=2"] },
  });
  assert.equal(lastWins.responseCacheByteSize, 2);

  const otherCache = resolveTritonConfig({ env: {}, config: { cacheConfig: ["redis,host=h"] } });
  assert.equal(otherCache.responseCacheByteSize, 0);

  const fromSize = resolveTritonConfig({ env: {}, config: { responseCacheByteSize: 4096 } });
  assert.deepEqual(fromSize.cacheConfig, ["local,size=4096"]);

  const agree = resolveTritonConfig({
    env: {},
    config: { responseCacheByteSize: 8, cacheConfig: ["local,size=8"] },
  });
  assert.deepEqual(agree.cacheConfig, ["local,size=8"]);

  rejects(
    () => resolveTritonConfig({ env: {}, config: { cacheConfig: ["local,size=big"] } }),
    'Invalid TritonConfig from the config argument: cacheConfig[0] "local,size=big": the local cache size must be an integer >= 0',
  );
  rejects(
    () =>
      resolveTritonConfig({
        env: {},
        config: { responseCacheByteSize: 5, cacheConfig: ["local,size=7"] },
      }),
    "Invalid TritonConfig from the config argument: responseCacheByteSize 5 disagrees with cacheConfig size 7",
  );
});

Deno.test("resolveTritonConfig() lets the higher source settle the cache size", async () => {
  await withYaml('cacheConfig: ["local,size=7", "redis,host=h"]\n', (path) => {
    const argument = resolveTritonConfig({
      configFile: path,
      env: {},
      config: { responseCacheByteSize: 5 },
    });
    assert.equal(argument.responseCacheByteSize, 5);
    assert.deepEqual(argument.cacheConfig, ["redis,host=h", "local,size=5"]);

    const off = resolveTritonConfig({
      configFile: path,
      env: { [`${P}RESPONSE_CACHE_BYTE_SIZE`]: "0" },
    });
    assert.equal(off.responseCacheByteSize, 0);
    assert.deepEqual(off.cacheConfig, ["redis,host=h"]);
  });
  await withYaml("responseCacheByteSize: 5\n", (path) => {
    const config = resolveTritonConfig({
      configFile: path,
      env: { [`${P}CACHE_CONFIG`]: "local,size=9" },
    });
    assert.equal(config.responseCacheByteSize, 9);
    assert.deepEqual(config.cacheConfig, ["local,size=9"]);
  });
});

Deno.test("resolveTritonConfig() gives metricsAddress the HTTP address unless set", () => {
  const config = resolveTritonConfig({ env: {}, config: { httpAddress: "127.0.0.1" } });
  assert.equal(config.metricsAddress, "127.0.0.1");
  const own = resolveTritonConfig({
    env: { [`${P}METRICS_ADDRESS`]: "10.0.0.1" },
    config: { httpAddress: "127.0.0.1" },
  });
  assert.equal(own.metricsAddress, "10.0.0.1");
});

Deno.test("resolveTritonConfig() needs certificates for gRPC TLS", () => {
  rejects(
    () => resolveTritonConfig({ env: { [`${P}GRPC_USE_SSL`]: "yes" } }),
    `Invalid TritonConfig: grpcUseSsl (from environment variable ${P}GRPC_USE_SSL) needs grpcServerCert and grpcServerKey`,
  );
  rejects(
    () =>
      resolveTritonConfig({
        env: {},
        config: { grpcUseSslMutual: true, grpcServerCert: "c.pem", grpcServerKey: "k.pem" },
      }),
    "Invalid TritonConfig: grpcUseSslMutual (from the config argument) needs grpcRootCert",
  );
  const config = resolveTritonConfig({
    env: {},
    config: { grpcUseSsl: true, grpcServerCert: "c.pem", grpcServerKey: "k.pem" },
  });
  assert.equal(config.grpcUseSsl, true);
});

/** Runs `resolveTritonConfig()` without `env` in a child process with the given flags. */
async function resolveInChild(
  flags: string[],
  env: Record<string, string>,
  options = "{}",
): Promise<{ code: number; stdout: string; stderr: string }> {
  const script = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    const module = new URL("./triton_config.ts", import.meta.url).href;
    await Deno.writeTextFile(
      script,
      `import { resolveTritonConfig } from ${JSON.stringify(module)};\n` +
        `const c = resolveTritonConfig(${options});\n` +
        `console.log(JSON.stringify([c.httpPort, c.grpcPort]));\n`,
    );
    const config = new URL("../../deno.json", import.meta.url).pathname;
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--no-prompt", "--config", config, ...flags, script],
      env,
      stdout: "piped",
      stderr: "piped",
    }).output();
    const decoder = new TextDecoder();
    return {
      code: output.code,
      stdout: decoder.decode(output.stdout).trim(),
      stderr: decoder.decode(output.stderr),
    };
  } finally {
    await Deno.remove(script);
  }
}

Deno.test("resolveTritonConfig() reads the process environment as far as allowed", async () => {
  const env = { [`${P}HTTP_PORT`]: "9000", [`${P}GRPC_PORT`]: "9001" };
  const none = await resolveInChild(["--allow-read"], env);
  assert.equal(none.stdout, "[8000,8001]", none.stderr);

  const one = await resolveInChild(["--allow-read", `--allow-env=${P}HTTP_PORT`], env);
  assert.equal(one.stdout, "[9000,8001]", one.stderr);

  const all = await resolveInChild(["--allow-read", "--allow-env"], env);
  assert.equal(all.stdout, "[9000,9001]", all.stderr);
});

Deno.test("resolveTritonConfig() names the read and env permissions a config file needs", async () => {
  await withYaml("httpPort: 7000\n", async (path) => {
    const denied = await resolveInChild(
      ["--allow-read"],
      {},
      `{ configFile: ${JSON.stringify(path)} }`,
    );
    assert.notEqual(denied.code, 0);
    assert.match(
      denied.stderr,
      /TritonPermissionError: DenoTriton needs --allow-env=LOG_TOKENS,LOG_STREAM for the TritonConfig file \(the YAML parser reads them\)\n$/,
    );
    assert.doesNotMatch(denied.stderr, /^\s+at /m);
    const unreadable = await resolveInChild([], {}, `{ configFile: ${JSON.stringify(path)} }`);
    assert.notEqual(unreadable.code, 0);
    assert.match(
      unreadable.stderr,
      new RegExp(
        `TritonPermissionError: DenoTriton needs --allow-read=${path} for the TritonConfig file\\n$`,
      ),
    );
    const granted = await resolveInChild(
      ["--allow-read", "--allow-env=LOG_TOKENS,LOG_STREAM"],
      {},
      `{ configFile: ${JSON.stringify(path)} }`,
    );
    assert.equal(granted.stdout, "[7000,8001]", granted.stderr);
  });
});

Deno.test("TRITON_CONFIG_FIELD_USES names every field of the schema", () => {
  const fields = Object.keys(resolveTritonConfig({ env: {} })).sort();
  assert.deepEqual(Object.keys(TRITON_CONFIG_FIELD_USES).sort(), fields);
  // Every listed field is one the schema takes (an unknown one would be refused as such).
  for (const field of fields) {
    const use = TRITON_CONFIG_FIELD_USES[field as keyof TritonConfig];
    if ("refused" in use) continue;
    assert.ok(use.consumers.length > 0, `${field} has no consumer`);
  }
});

// A value each refused field refuses; a new refused field needs one here.
const REFUSED_SAMPLES: Partial<Record<keyof TritonConfig, unknown>> = {
  modelRepository: "/models",
  grpcInferResponseCompressionLevel: "high",
  grpcKeepalivePermitWithoutCalls: false,
};

Deno.test("resolveTritonConfig() refuses values of fields DenoTriton cannot honour", () => {
  const refused = Object.entries(TRITON_CONFIG_FIELD_USES)
    .filter(([, use]) => "refused" in use).map(([field]) => field).sort();
  assert.deepEqual(Object.keys(REFUSED_SAMPLES).sort(), refused);
  for (const [field, value] of Object.entries(REFUSED_SAMPLES)) {
    const use = TRITON_CONFIG_FIELD_USES[field as keyof TritonConfig] as { refused: string };
    rejects(
      () => resolveTritonConfig({ env: {}, config: { [field]: value } as TritonConfig }),
      `Invalid TritonConfig from the config argument: ${field} is not supported: ${use.refused} (got ${
        JSON.stringify(value)
      })`,
    );
  }
  // The accepted value (the default) passes from any source.
  const config = resolveTritonConfig({
    env: { [`${P}GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS`]: "true" },
    config: { traceConfig: [], grpcInferResponseCompressionLevel: "none" },
  });
  assert.equal(config.grpcKeepalivePermitWithoutCalls, true);
  // traceConfig is honoured now (issue 36), from the environment too.
  assert.deepEqual(
    resolveTritonConfig({ env: { [`${P}TRACE_CONFIG`]: "rate=1,level=TIMESTAMPS" } }).traceConfig,
    ["rate=1", "level=TIMESTAMPS"],
  );
  // A higher source giving the accepted value overrides a refused one below it.
  assert.equal(
    resolveTritonConfig({
      env: { [`${P}GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS`]: "false" },
      config: { grpcKeepalivePermitWithoutCalls: true },
    }).grpcKeepalivePermitWithoutCalls,
    true,
  );
});

Deno.test("resolveTritonConfig() takes PyTriton's PYTRITON_TRITON_CONFIG_* variables as aliases", () => {
  const config = resolveTritonConfig({
    env: {
      PYTRITON_TRITON_CONFIG_HTTP_PORT: "9000",
      PYTRITON_TRITON_CONFIG_GRPC_PORT: "9001",
      PYTRITON_TRITON_CONFIG_ALLOW_METRICS: "false",
      PYTRITON_TRITON_CONFIG_CACHE_CONFIG_0: "local,size=64",
      [`${P}GRPC_PORT`]: "9101",
    },
  });
  assert.equal(config.httpPort, 9000);
  assert.equal(config.grpcPort, 9101, "DENOTRITON_ variables win over PYTRITON_ ones");
  assert.equal(config.allowMetrics, false);
  assert.equal(config.responseCacheByteSize, 64);
  assert.equal(
    resolveTritonConfig({ env: { PYTRITON_TRITON_CONFIG_HTTP_THREAD_COUNT: "8" } }).httpThreadCount,
    8,
  );
  rejects(
    () => resolveTritonConfig({ env: { PYTRITON_TRITON_CONFIG_HTTP_PORT: "x" } }),
    'Invalid TritonConfig from environment variable PYTRITON_TRITON_CONFIG_HTTP_PORT: httpPort must be an integer between 0 and 65535, got "x"',
  );
  rejects(
    () => resolveTritonConfig({ env: { PYTRITON_TRITON_CONFIG_MODEL_REPOSITORY: "/ws/models" } }),
    /^Invalid TritonConfig from environment variable PYTRITON_TRITON_CONFIG_MODEL_REPOSITORY: modelRepository is not supported: /,
  );
});

Deno.test("resolveTritonConfig() warns once about each PyTriton variable naming a field DenoTriton lacks, and ignores it", () => {
  const warnings: string[] = [];
  // PyTriton's documented names: two are fields of ours, under another name or as they are.
  const config = resolveTritonConfig({
    env: {
      PYTRITON_TRITON_CONFIG_LOG_VERBOSITY: "2",
      PYTRITON_TRITON_CONFIG_LOG_FORMAT: "ISO8601",
      PYTRITON_TRITON_CONFIG_ALLOW_VERTEX_AI: "true",
      PYTRITON_TRITON_CONFIG_CACHE_DIRECTORY: "/opt/tritonserver/caches",
      PYTRITON_TRITON_CONFIG_BACKEND_DIRECTORY: "/opt/tritonserver/backends",
      PYTRITON_TRITON_CONFIG_VERTEX_AI_PORT_0: "8080",
      PYTRITON_TRITON_CONFIG_HTTP_PORT: "9000",
    },
    onWarning: (message) => warnings.push(message),
  });
  assert.equal(config.logVerbose, 2);
  assert.equal(config.logFormat, "ISO8601");
  assert.equal(config.httpPort, 9000);
  const ignoring = (name: string): string =>
    `Ignoring environment variable PYTRITON_TRITON_CONFIG_${name}: DenoTriton has no such field (PyTriton, too, ignores the names it does not know)`;
  assert.deepEqual(warnings.sort(), [
    ignoring("ALLOW_VERTEX_AI"),
    ignoring("BACKEND_DIRECTORY"),
    ignoring("CACHE_DIRECTORY"),
    ignoring("VERTEX_AI_PORT_0"),
  ]);

  // The field's own name wins over PyTriton's documented one, with a warning.
  warnings.length = 0;
  const both = resolveTritonConfig({
    env: {
      PYTRITON_TRITON_CONFIG_LOG_VERBOSITY: "2",
      PYTRITON_TRITON_CONFIG_LOG_VERBOSE: "1",
    },
    onWarning: (message) => warnings.push(message),
  });
  assert.equal(both.logVerbose, 1);
  assert.deepEqual(warnings, [
    "Ignoring environment variable PYTRITON_TRITON_CONFIG_LOG_VERBOSITY: PYTRITON_TRITON_CONFIG_LOG_VERBOSE sets logVerbose already",
  ]);
  rejects(
    () => resolveTritonConfig({ env: { PYTRITON_TRITON_CONFIG_LOG_VERBOSITY: "loud" } }),
    'Invalid TritonConfig from environment variable PYTRITON_TRITON_CONFIG_LOG_VERBOSITY: logVerbose must be an integer >= 0, got "loud"',
  );

  // DENOTRITON_ names stay strict, PyTriton's alias included.
  for (const name of ["ALLOW_VERTEX_AI", "LOG_VERBOSITY"]) {
    rejects(
      () => resolveTritonConfig({ env: { [`${P}${name}`]: "1" }, onWarning: () => {} }),
      `Invalid TritonConfig from environment variable ${P}${name}: unknown field (names are ${P} followed by a field in upper snake case, e.g. ${P}HTTP_PORT)`,
    );
  }
});

Deno.test("resolveTritonConfig() takes logFormat as Triton's --log-format does", () => {
  assert.equal(resolveTritonConfig({ env: {} }).logFormat, "default");
  assert.equal(
    resolveTritonConfig({ env: { [`${P}LOG_FORMAT`]: "ISO8601" } }).logFormat,
    "ISO8601",
  );
  rejects(
    // @ts-expect-error: not a log format
    () => resolveTritonConfig({ env: {}, config: { logFormat: "json" } }),
    'Invalid TritonConfig from the config argument: logFormat must be "default" or "ISO8601", got "json"',
  );
});

Deno.test("resolveTritonConfig() accepts only the metrics settings the core reads", () => {
  const config = resolveTritonConfig({
    env: {},
    config: {
      metricsConfig: [
        "counter_latencies=false",
        "histogram_latencies=true",
        "summary_latencies=true",
        "summary_quantiles=0.5:0.05,0.99:0.001",
      ],
    },
  });
  assert.equal(config.metricsConfig.length, 4);
  rejects(
    () => resolveTritonConfig({ env: {}, config: { metricsConfig: ["counter_latencies=no"] } }),
    'Invalid TritonConfig from the config argument: metricsConfig[0] "counter_latencies=no": counter_latencies must be true or false',
  );
  rejects(
    () =>
      resolveTritonConfig({
        env: {},
        config: { metricsConfig: ["summary_latencies=true", "prometheus,summary_latencies=true"] },
      }),
    'Invalid TritonConfig from the config argument: metricsConfig[1] "prometheus,summary_latencies=true": prometheus,summary_latencies is not supported: the Triton core reads only counter_latencies, histogram_latencies, summary_latencies, summary_quantiles, without a group',
  );
  rejects(
    () => resolveTritonConfig({ env: {}, config: { metricsConfig: ["summary_quantiles=0.5"] } }),
    /summary_quantiles must be <quantile>:<error> pairs in \[0, 1\] separated by commas/,
  );
});

Deno.test("resolveTritonConfig() reads CORS origins from a comma-separated variable and checks them", () => {
  const config = resolveTritonConfig({
    env: { DENOTRITON_TRITON_CONFIG_HTTP_CORS_ORIGINS: "https://a.test,http://b.test:8080" },
  });
  assert.deepEqual(config.httpCorsOrigins, ["https://a.test", "http://b.test:8080"]);
  assert.throws(
    () => resolveTritonConfig({ env: {}, config: { httpCorsOrigins: ["https://a.test/app"] } }),
    (error: Error) => {
      assert.equal(
        error.message,
        'Invalid TritonConfig from the config argument: httpCorsOrigins[0] "https://a.test/app": not an origin: expected "*" or scheme://host[:port], without a path or a final slash',
      );
      return true;
    },
  );
  assert.throws(
    () =>
      resolveTritonConfig({
        env: { DENOTRITON_TRITON_CONFIG_HTTP_CORS_ALLOW_CREDENTIALS: "true" },
        config: { httpCorsOrigins: ["*"] },
      }),
    /httpCorsAllowCredentials \(from environment variable DENOTRITON_TRITON_CONFIG_HTTP_CORS_ALLOW_CREDENTIALS\) needs exact origins in httpCorsOrigins \(from the config argument\), not "\*"/,
  );
});
