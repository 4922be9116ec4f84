// DenoTriton as a user reaches it: a project of their own outside this repository, importing
// `@denotriton/triton` by the README's local route, serving with exactly the README's permission
// flags on each engine. A client gets the right answer; without any one of the flags the program
// ends with one line naming it, a non-zero exit code and no stack trace. The project's own code
// and tests type-check and pass under Deno's default compiler options and under the strict ones
// users turn on, and a PyTriton deployment's environment serves.

import assert from "node:assert/strict";
import { dirname } from "node:path";
import { ModelClient } from "../src/client/mod.ts";
import { ndarray } from "../mod.ts";
import { defaultTritonHome } from "../src/setup/install.ts";
import { GRPC_CLIENT_ENV_VARIABLES, tempDirectory } from "../src/permissions.ts";
import { ENGINES } from "./_helpers.ts";
import {
  decoder,
  hasStackTrace,
  linesOf,
  type ProgramOutput,
  REPO_ROOT,
  type RunningProgram,
  UserProject,
} from "./_user_project.ts";

const SERVER = `// Serves Double (y = 2x) on the engine and front ends named by the arguments.
import { ndarray, Triton, TritonUnrecoverableError } from "@denotriton/triton";

const [engine, ...parts] = Deno.args;
const triton = new Triton({
  engine: engine as "auto" | "builtin" | "triton",
  config: {
    httpAddress: "127.0.0.1", httpPort: 0,
    allowGrpc: parts.includes("grpc"), grpcAddress: "127.0.0.1", grpcPort: 0,
    allowMetrics: parts.includes("metrics"), metricsAddress: "127.0.0.1", metricsPort: 0,
  },
});
triton.bind({
  modelName: "Double",
  inferFunc: (requests) =>
    requests.map(({ data: { x } }) => {
      const values = x!.data as Float32Array;
      if (values.some((v) => v < 0)) throw new TritonUnrecoverableError("GPU lost");
      return { y: ndarray(values.map((v) => v * 2), x!.shape) };
    }),
  inputs: [{ name: "x", dtype: "float32", shape: [-1] }],
  outputs: [{ name: "y", dtype: "float32", shape: [-1] }],
  config: { maxBatchSize: 4 },
});
await triton.run();
console.log("READY " + JSON.stringify(triton.urls));
await triton.serve();
`;

const CLIENT = `// Calls Double at the URL given with the client, prints y.
import { ModelClient, ndarray } from "@denotriton/triton/client";

await using client = new ModelClient(Deno.args[0]!, "Double", { initTimeoutS: 30 });
const { y } = await client.inferBatch({ x: ndarray(new Float32Array([1, 2]), [1, 2]) });
console.log(Array.from(y!.data as Float32Array));
`;

const GRPC_CLIENT_ENV = GRPC_CLIENT_ENV_VARIABLES.join(",");
const TMP = tempDirectory();
const HOME_VARIABLES = Deno.env.get("DENOTRITON_HOME") ? "HOME,DENOTRITON_HOME" : "HOME";

interface Row {
  readonly name: string;
  readonly args: readonly string[];
  /** The README's flags for this row. */
  readonly flags: readonly string[];
  /** The one line each flag's absence ends in. */
  readonly without: Readonly<Record<string, string>>;
}

function rows(): Row[] {
  const netNeeded = "DenoTriton needs --allow-net=127.0.0.1 for the HTTP front end";
  const list: Row[] = [
    {
      name: "built-in engine, HTTP only",
      args: ["builtin"],
      flags: ["--allow-net"],
      without: { "--allow-net": netNeeded },
    },
    {
      // The gRPC front end runs on our own HTTP/2 server: it needs no variable.
      name: "built-in engine, HTTP + gRPC + metrics",
      args: ["builtin", "grpc", "metrics"],
      flags: ["--allow-net"],
      without: { "--allow-net": netNeeded },
    },
  ];
  if (ENGINES.includes("triton")) {
    const home = defaultTritonHome();
    // The README grants ~/.cache/denotriton; a DENOTRITON_HOME elsewhere is granted itself.
    const read = Deno.env.get("DENOTRITON_HOME") ? home : dirname(home);
    const env = `--allow-env=${HOME_VARIABLES}`;
    list.push({
      name: "Triton engine, HTTP + gRPC + metrics",
      args: ["triton", "grpc", "metrics"],
      flags: ["--allow-net", "--allow-ffi", env, `--allow-read=${read}`, `--allow-write=${TMP}`],
      without: {
        "--allow-net": netNeeded,
        "--allow-ffi": "DenoTriton needs --allow-ffi for the Triton core",
        [env]:
          "DenoTriton needs --allow-env=HOME (or --allow-env=DENOTRITON_HOME) for finding the Triton core in ~/.cache/denotriton",
        [`--allow-read=${read}`]:
          `DenoTriton needs --allow-read=${home} for the Triton core's files`,
        [`--allow-write=${TMP}`]:
          `DenoTriton needs --allow-write=${TMP} for the Triton core's temporary model repository`,
      },
    });
  }
  return list;
}

async function double(url: string, values: number[]): Promise<number[]> {
  await using client = new ModelClient(url, "Double", { initTimeoutS: 30 });
  const { y } = await client.inferBatch({
    x: ndarray(new Float32Array(values), [1, values.length]),
  });
  return Array.from(y!.data as Float32Array);
}

async function ready(
  program: RunningProgram,
): Promise<{ http: string; grpc?: string; metrics?: string }> {
  return JSON.parse(await program.waitForLine("READY "));
}

Deno.test("a user project: import, serve with the README's flags, one line per missing flag", async (t) => {
  await using project = await UserProject.create();
  await project.write("server.ts", SERVER);
  await project.write(
    "main.ts",
    'import * as triton from "@denotriton/triton";\nconsole.log(typeof triton.Triton);\n',
  );
  await project.write(
    "client.ts",
    'import { ModelClient } from "@denotriton/triton/client";\nconsole.log(typeof ModelClient);\n',
  );

  await t.step("importing mod.ts or ./client needs no permission", async () => {
    for (const file of ["main.ts", "client.ts"]) {
      const out = await project.run(["run", "--no-prompt", file]);
      assert.equal(out.code, 0, out.stderr);
      assert.equal(out.stdout, "function\n");
      assert.doesNotMatch(out.stderr, /NotCapable|error/);
    }
  });

  for (const row of rows()) {
    const shown = (flags: readonly string[]): string => flags.join(" ");
    await t.step(`${row.name}: ${shown(row.flags)}`, async () => {
      const server = project.spawn(["run", "--no-prompt", ...row.flags, "server.ts", ...row.args]);
      await using _ = server;
      const urls = await ready(server);
      assert.deepEqual(await double(urls.http, [1, 2]), [2, 4]);
      // The docs page's files come with the npm package as text imports: no more flags.
      const bundle = await fetch(`${urls.http}/docs/swagger-ui-bundle.js`);
      assert.equal(bundle.status, 200);
      assert.ok((await bundle.text()).includes("SwaggerUIBundle"));
      const described = await fetch(`${urls.http}/v2/openapi.json`);
      assert.equal(described.status, 200);
      assert.ok((await described.json()).paths["/v2/models/Double/infer"] !== undefined);
      if (urls.grpc) assert.deepEqual(await double(urls.grpc, [3]), [6]);
      if (urls.metrics) {
        const response = await fetch(`${urls.metrics}/metrics`);
        assert.equal(response.status, 200);
        assert.match(
          await response.text(),
          /nv_inference_request_success\{model="Double",version="1"\} 2/,
        );
      }
      server.kill("SIGTERM");
      const out = await server.exited();
      assert.equal(out.code, 0, out.stderr);
      assert.ok(!hasStackTrace(out.stderr), out.stderr);
      assert.doesNotMatch(out.stderr, /request\.signal aborts/);
      assert.match(out.stderr, /Server stopped/);
    });
    for (const [flag, line] of Object.entries(row.without)) {
      await t.step(`${row.name} without ${shown([flag])}`, async () => {
        const flags = row.flags.filter((f) => f !== flag);
        const out = await project.run(["run", "--no-prompt", ...flags, "server.ts", ...row.args]);
        assert.equal(out.code, 1, out.stderr);
        assert.equal(
          linesOf(out.stderr).at(-1),
          `error: Uncaught (in promise) TritonPermissionError: ${line}`,
        );
        assert.ok(!hasStackTrace(out.stderr), out.stderr);
        assert.doesNotMatch(out.stderr, /Server stopped/);
      });
    }
  }
});

Deno.test("a user project: the client with the README's flags, one line per missing flag", async (t) => {
  await using project = await UserProject.create();
  await project.write("server.ts", SERVER);
  await project.write("client.ts", CLIENT);
  const server = project.spawn(["run", "--no-prompt", "-A", "server.ts", "builtin", "grpc"]);
  await using _ = server;
  const urls = await ready(server);
  const port = (url: string): string => new URL(url.replace(/^grpc:/, "http:")).port;
  const cases = [
    { url: urls.http, flags: ["--allow-net"], without: {} },
    {
      url: urls.grpc!,
      flags: ["--allow-net", `--allow-env=${GRPC_CLIENT_ENV}`],
      without: {
        [`--allow-env=${GRPC_CLIENT_ENV}`]:
          `DenoTriton needs --allow-env=${GRPC_CLIENT_ENV} for the gRPC client`,
      } as Record<string, string>,
    },
  ];
  for (const { url, flags, without } of cases) {
    const all: Record<string, string> = {
      "--allow-net": `DenoTriton needs --allow-net=127.0.0.1:${port(url)} for the client`,
      ...without,
    };
    await t.step(`${url.split(":")[0]} client`, async () => {
      const out = await project.run(["run", "--no-prompt", ...flags, "client.ts", url]);
      assert.equal(out.code, 0, out.stderr);
      assert.equal(out.stdout, "[ 2, 4 ]\n");
      for (const [flag, line] of Object.entries(all)) {
        const denied = await project.run([
          "run",
          "--no-prompt",
          ...flags.filter((f) => f !== flag),
          "client.ts",
          url,
        ]);
        assert.equal(denied.code, 1, denied.stderr);
        assert.equal(
          linesOf(denied.stderr).at(-1),
          `error: Uncaught (in promise) ClientPermissionError: ${line}`,
        );
        assert.ok(!hasStackTrace(denied.stderr), denied.stderr);
      }
    });
  }
});

for (const engine of ENGINES) {
  Deno.test(`a user project: serve() rejects after an unrecoverable error, exit code 1 [${engine}]`, async () => {
    await using project = await UserProject.create();
    await project.write("server.ts", SERVER);
    const server = project.spawn(["run", "--no-prompt", "-A", "server.ts", engine]);
    await using _ = server;
    const urls = await ready(server);
    await assert.rejects(double(urls.http, [-1]), /GPU lost/);
    const out = await server.exited();
    assert.equal(out.code, 1, out.stderr);
    assert.match(
      out.stderr,
      /^error: Uncaught \(in promise\) TritonUnrecoverableError: GPU lost$/m,
    );
    // Logged once, by the server (not once more by the engine).
    assert.deepEqual(out.stderr.match(/Unrecoverable error.*/g), [
      "Unrecoverable error in a model, stopping the server: GPU lost",
    ]);
  });
}

Deno.test("a user project: the setup entry point and the hints that name it", async (t) => {
  await using project = await UserProject.create();
  await project.write("server.ts", SERVER);
  await project.write("not-a-wheel.whl", "not a zip file\n");
  const env = { DENOTRITON_HOME: `${project.dir}/home` };

  await t.step("deno run -A jsr:@denotriton/triton/setup runs the setup", async () => {
    const out = await project.run(
      ["run", "-A", "jsr:@denotriton/triton/setup", "--wheel", "not-a-wheel.whl"],
      env,
    );
    assert.equal(out.code, 1, out.stderr);
    assert.deepEqual(linesOf(out.stderr).slice(-2), [
      "Extracting the Triton core from not-a-wheel.whl",
      "Cannot read the wheel not-a-wheel.whl: invalid zip data",
    ]);
  });

  await t.step("without the core, 'auto' names the setup command and serves", async () => {
    const server = project.spawn(["run", "--no-prompt", "-A", "server.ts", "auto"], env);
    await using _ = server;
    const urls = await ready(server);
    assert.deepEqual(await double(urls.http, [5]), [10]);
    server.kill("SIGTERM");
    const out = await server.exited();
    assert.match(
      out.stderr,
      /Using the built-in engine: the Triton core is not installed \(run deno run -A jsr:@denotriton\/triton\/setup to use it\)/,
    );
  });

  await t.step("without the core, 'triton' fails naming the setup command", async () => {
    const out = await project.run(["run", "--no-prompt", "-A", "server.ts", "triton"], env);
    assert.equal(out.code, 1);
    assert.match(
      out.stderr,
      /Cannot use the Triton engine: the Triton core is not installed \(run: deno run -A jsr:@denotriton\/triton\/setup\)/,
    );
  });
});

/** Deno's defaults, and the strict options users turn on beside them. */
const COMPILER_OPTIONS: readonly [string, Readonly<Record<string, boolean>> | undefined][] = [
  ["Deno's default compiler options", undefined],
  [
    "exactOptionalPropertyTypes, noUncheckedIndexedAccess, noImplicitOverride, noPropertyAccessFromIndexSignature",
    {
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
      noImplicitOverride: true,
      noPropertyAccessFromIndexSignature: true,
    },
  ],
];

/** A user's typed model: the README's patterns, and types that must stay as precise as they are. */
const TYPED_MODEL = `import {
  batch,
  type BindOptions,
  getModelConfig,
  type InferFunc,
  type LogSink,
  type ResolvedTritonConfig,
  type TensorsOf,
  TritonError,
  zip,
} from "@denotriton/triton";
import type { ModelClientOptions } from "@denotriton/triton/client";
import type { SetupTritonOptions } from "@denotriton/triton/setup";

export const inputs = [
  { name: "a", dtype: "float32", shape: [-1] },
  { name: "b", dtype: "float32", shape: [-1] },
] as const;
export const outputs = [{ name: "add", dtype: "float32", shape: [-1] }] as const;
type Inputs = TensorsOf<typeof inputs>;
type Outputs = TensorsOf<typeof outputs>;

export const add: InferFunc<Inputs, Outputs> = batch(({ a, b }, context) => {
  if (getModelConfig(context).config.maxBatchSize < 1) throw new ModelError("not batched");
  return { add: zip(a, b, (x, y) => x + y) };
});
// @ts-expect-error: "c" is not an input
export const misspelled: InferFunc<Inputs, Outputs> = batch(({ c }) => ({ add: c }));
// @ts-expect-error: "add" is float32
export const wrongDtype: InferFunc<Inputs, Outputs> = batch(({ a }) => ({ add: zip(a, a, (x, y) => BigInt(x + y)) }));

export const addModel = {
  modelName: "Add",
  inferFunc: add,
  inputs,
  outputs,
  config: { maxBatchSize: 8 },
} satisfies BindOptions<typeof inputs, typeof outputs>;

export class ModelError extends TritonError {
  override readonly name = "ModelError";
}

/** Fields with a default are set; the nine without one may be undefined. */
export function describe(config: ResolvedTritonConfig): string {
  const port: number = config.httpPort;
  const format: "default" | "ISO8601" = config.logFormat;
  const logFile: string | undefined = config.logFile;
  // @ts-expect-error: logFile may be unset
  const file: string = config.logFile;
  return [port, format, logFile, file].join(" ");
}

export const quiet: LogSink = { error() {}, warn() {}, info() {}, debug() {} };
export const clientOptions: ModelClientOptions = { maxConcurrency: 4, maxQueueSize: 16 };
export const setupOptions: SetupTritonOptions = {};
`;

/** The user's tests of that model: the README's unit-test pattern, then served and called. */
const TYPED_MODEL_TEST = `import assert from "node:assert/strict";
import {
  inferContext,
  inferRequest,
  type InferResult,
  ndarray,
  type TensorsOf,
  Triton,
} from "@denotriton/triton";
import { ModelClient } from "@denotriton/triton/client";
import { add, addModel, clientOptions, describe, inputs, outputs, quiet } from "./model.ts";

Deno.test("the model, unit-tested", () => {
  const a = ndarray(new Float32Array([1, 2]), [1, 2]);
  const context = inferContext({ inputs, outputs, config: { maxBatchSize: 8 } });
  const results = add([inferRequest({ a, b: a })], context) as InferResult<TensorsOf<typeof outputs>>[];
  assert.deepEqual(Array.from(results[0]!.add.data), [2, 4]);
});

Deno.test("the model, served and called", async () => {
  await using triton = await Triton.start({
    engine: "builtin",
    logger: quiet,
    config: { httpAddress: "127.0.0.1", httpPort: 0, allowGrpc: false, allowMetrics: false },
    models: [addModel],
  });
  assert.equal(describe(triton.config).split(" ")[1], "default");
  await using client = new ModelClient(triton.urls.http!, "Add", clientOptions);
  const a = ndarray(new Float32Array([1, 2]), [1, 2]);
  const { add: sum } = await client.inferBatch({ a, b: a });
  assert.deepEqual(Array.from(sum!.data as Float32Array), [2, 4]);
});
`;

/** The package's modules under `options`, those no export reaches (Workers' entries) included. */
async function checkPackageModules(
  options: Readonly<Record<string, boolean>> | undefined,
): Promise<ProgramOutput> {
  const config = JSON.parse(await Deno.readTextFile(`${REPO_ROOT}/deno.json`));
  const dir = await Deno.makeTempDir({ prefix: "denotriton-check-" });
  try {
    await Deno.writeTextFile(
      `${dir}/deno.json`,
      JSON.stringify({
        imports: config.imports,
        compilerOptions: options ?? {},
        nodeModulesDir: config.nodeModulesDir,
      }),
    );
    // The repository's package.json holds npm overrides the lockfile records: the same ones here
    // keep the frozen lockfile up to date.
    await Deno.copyFile(`${REPO_ROOT}/package.json`, `${dir}/package.json`);
    const modules = ["mod.ts"];
    for await (const entry of walk(`${REPO_ROOT}/src`)) {
      if (entry.endsWith(".ts") && !entry.endsWith("_test.ts")) modules.push(entry);
    }
    const output = await new Deno.Command(Deno.execPath(), {
      args: [
        "check",
        `--config=${dir}/deno.json`,
        `--lock=${REPO_ROOT}/deno.lock`,
        "--frozen",
        ...modules,
      ],
      cwd: REPO_ROOT,
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    return {
      code: output.code,
      stdout: decoder.decode(output.stdout),
      stderr: decoder.decode(output.stderr),
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function* walk(dir: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(dir)) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) yield* walk(path);
    else if (entry.isFile) yield path;
  }
}

for (const [name, options] of COMPILER_OPTIONS) {
  Deno.test(`a user project type-checks and tests with ${name}`, async (t) => {
    await using project = await UserProject.create(options);
    await project.write("model.ts", TYPED_MODEL);
    await project.write("model_test.ts", TYPED_MODEL_TEST);
    await project.write("server.ts", SERVER);
    await project.write("client.ts", CLIENT);

    await t.step("deno check", async () => {
      const out = await project.run([
        "check",
        "model.ts",
        "model_test.ts",
        "server.ts",
        "client.ts",
      ]);
      assert.equal(out.code, 0, out.stderr);
      assert.doesNotMatch(out.stderr, /TS\d+/);
    });
    await t.step("deno test", async () => {
      const out = await project.run(["test", "--allow-net", "model_test.ts"]);
      assert.equal(out.code, 0, out.stdout + out.stderr);
      assert.match(out.stdout, /^ok \| 2 passed \| 0 failed/m);
    });
    await t.step("the package's modules no export reaches", async () => {
      const out = await checkPackageModules(options);
      assert.equal(out.code, 0, out.stderr);
    });
  });
}

Deno.test("a user project: a PyTriton deployment's environment serves, with one warning per variable DenoTriton lacks", async () => {
  await using project = await UserProject.create();
  await project.write("server.ts", SERVER);
  const server = project.spawn(["run", "--no-prompt", "-A", "server.ts", "builtin"], {
    PYTRITON_TRITON_CONFIG_ALLOW_VERTEX_AI: "true",
    PYTRITON_TRITON_CONFIG_CACHE_DIRECTORY: "/opt/tritonserver/caches",
    PYTRITON_TRITON_CONFIG_BACKEND_DIRECTORY: "/opt/tritonserver/backends",
    PYTRITON_TRITON_CONFIG_LOG_VERBOSITY: "1",
    PYTRITON_TRITON_CONFIG_LOG_FORMAT: "ISO8601",
  });
  await using _ = server;
  const urls = await ready(server);
  assert.deepEqual(await double(urls.http, [1, 2]), [2, 4]);
  server.kill("SIGTERM");
  const out = await server.exited();
  assert.equal(out.code, 0, out.stderr);
  const warnings = linesOf(out.stderr).filter((line) => / W triton\] /.test(line))
    .map((line) => line.replace(/^\S+ W triton\] /, ""));
  assert.deepEqual(warnings.sort(), [
    ...["ALLOW_VERTEX_AI", "BACKEND_DIRECTORY", "CACHE_DIRECTORY"].map((name) =>
      `Ignoring environment variable PYTRITON_TRITON_CONFIG_${name}: DenoTriton has no such field (PyTriton, too, ignores the names it does not know)`
    ),
    // LOG_VERBOSITY is logVerbose; LOG_FORMAT laid this line out (an ISO 8601 time first).
    "Verbose logging is on (logVerbose=1): it costs inference throughput",
  ]);
  assert.ok(
    linesOf(out.stderr).filter((line) => / W triton\] /.test(line)).every((line) =>
      /^\d{4}-\d\d-\d\dT[\d:.]+Z W triton\] /.test(line)
    ),
    out.stderr,
  );
});
