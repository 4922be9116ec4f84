/**
 * Shared test helpers: which engines the conformance suite runs on, whether optional peers are
 * required, and a server factory on ephemeral ports.
 *
 * @module
 */

import { type BindOptions, type GpuInventory, Triton } from "../mod.ts";
import type { EngineKind } from "../src/engine/engine.ts";
import type { SecurityConfig } from "../src/config/security_config.ts";
import type { TritonConfig } from "../src/config/triton_config_fields.ts";

/**
 * Whether missing peers (Python clients, perf_analyzer, the Triton core) fail tests instead of
 * skipping them: in CI (`CI=true`) or with `DENOTRITON_REQUIRE_PEERS=1`.
 */
export const PEERS_REQUIRED: boolean = Deno.env.get("CI") === "true" ||
  Deno.env.get("DENOTRITON_REQUIRE_PEERS") === "1";

async function tritonCoreInstalled(): Promise<boolean> {
  try {
    const install = await import("../src/setup/install.ts");
    return (await install.findTritonInstall()) !== undefined;
  } catch {
    return false;
  }
}

/**
 * The engines every conformance test runs on: both when the Triton core is installed, else the
 * built-in one. `DENOTRITON_TEST_ENGINES` (a comma-separated list, e.g. `triton`) narrows them,
 * and then each one listed must be available.
 */
export const ENGINES: readonly EngineKind[] = await (async () => {
  const asked = Deno.env.get("DENOTRITON_TEST_ENGINES");
  if (asked !== undefined && asked !== "") {
    const engines = asked.split(",").map((name) => name.trim()) as EngineKind[];
    for (const engine of engines) {
      if (engine !== "builtin" && engine !== "triton") {
        throw new Error(`DENOTRITON_TEST_ENGINES: unknown engine '${engine}'`);
      }
      if (engine === "triton" && !await tritonCoreInstalled()) {
        throw new Error("DENOTRITON_TEST_ENGINES asks for the Triton core, which is not installed");
      }
    }
    return engines;
  }
  const engines: EngineKind[] = ["builtin"];
  if (await tritonCoreInstalled()) engines.push("triton");
  else if (PEERS_REQUIRED) {
    throw new Error(
      "The Triton core is not installed but CI requires it: run `deno task setup:triton` first",
    );
  }
  return engines;
})();

/** Options of {@linkcode startServer}. */
export interface StartServerOptions {
  /** Engine to run. */
  engine: EngineKind;
  /** Models to bind before start. */
  models?: readonly BindOptions[];
  /** Extra server configuration (ports default to 0 = ephemeral). */
  config?: TritonConfig;
  /**
   * Access restriction; by default nothing is restricted (like Triton's own default), so the
   * protocol suites reach every endpoint without a token.
   */
  securityConfig?: SecurityConfig;
  /** The GPUs the engine places instances on (default: what the CUDA driver reports). */
  gpus?: GpuInventory;
}

/**
 * Starts a server on ephemeral ports with the given models; dispose it with `await using`.
 *
 * @param options Engine, models and config.
 * @returns The running server.
 */
export async function startServer(options: StartServerOptions): Promise<Triton> {
  const triton = new Triton({
    engine: options.engine,
    ...(options.gpus === undefined ? {} : { gpus: options.gpus }),
    securityConfig: options.securityConfig ?? { restrictedEndpoints: [] },
    config: {
      httpPort: 0,
      grpcPort: 0,
      metricsPort: 0,
      httpAddress: "127.0.0.1",
      grpcAddress: "127.0.0.1",
      ...options.config,
    },
  });
  try {
    for (const model of options.models ?? []) await triton.bind(model);
    await triton.run();
  } catch (error) {
    await triton.stop();
    throw error;
  }
  return triton;
}

/**
 * Settles like `promise`, or rejects once `ms` pass first: a watchdog for tests that wait on a
 * stream, an event or a process, so that a regression fails the test instead of hanging CI. It
 * bounds a wait generously; it is not a timing assertion.
 *
 * @param promise What the test waits for.
 * @param what What that is, for the failure message.
 * @param ms How long to wait at most.
 * @returns The outcome of `promise`.
 */
export function watchdog<T>(promise: Promise<T>, what: string, ms = 60_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`Watchdog: gave up waiting for ${what} after ${ms / 1000} s`)),
      ms,
    );
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

/** A server a test runs as a subprocess (`spawnServer`). */
export interface ServerProcess {
  readonly child: Deno.ChildProcess;
  /** Its first line of output (without the newline). */
  readonly firstLine: string;
  /** The rest of its output, read after the first line. */
  readonly lines: ReadableStreamDefaultReader<string>;
  /** Its standard error, whole once it exited. */
  readonly log: Promise<string>;
}

/**
 * Starts `deno <args>` with piped standard streams and waits (under a watchdog) for its first
 * line of output: servers print their URL there once they serve.
 *
 * @param args Deno's arguments (`run`, flags, the script and its arguments).
 * @returns The process, its first line and the rest of its output.
 * @throws {Error} When it exits before a line, with its standard error.
 */
export async function spawnServer(args: string[]): Promise<ServerProcess> {
  const child = new Deno.Command(Deno.execPath(), {
    args,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const log = new Response(child.stderr).text();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await watchdog(lines.read(), "the server's first line");
    if (done) throw new Error(`The server exited before it served: ${await log}`);
    text += value;
  }
  return { child, firstLine: text.slice(0, text.indexOf("\n")), lines, log };
}

/** Set in the process {@linkcode testInOwnProcess} starts: the name of the test it runs. */
const OWN_PROCESS = "DENOTRITON_TEST_OWN_PROCESS";

/** What {@linkcode testInOwnProcess} runs. */
export interface OwnProcessTest {
  /** The test's name, unique in its file. */
  readonly name: string;
  /** The file that defines it: `import.meta.url`. */
  readonly file: string;
  /** Whether it is skipped. */
  readonly ignore?: boolean;
  /**
   * Whether it runs in a process of its own; false runs it here, as `Deno.test` does (e.g. on
   * the built-in engine, which keeps nothing once per process).
   *
   * @default {true}
   */
  readonly ownProcess?: boolean;
  /** The test. */
  readonly fn: () => Promise<void>;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

/**
 * Defines a test that runs in a process of its own: `deno test` of its file, filtered to it.
 * For tests of what the Triton core keeps once per process (its one response cache, its metrics
 * configuration), which every other core server of the process shares: the other files of
 * `deno test --parallel` run in the same process (ffi/README.md, "Several engines in one
 * process").
 *
 * @param test Name, defining file, whether it is skipped, and the test.
 */
export function testInOwnProcess(test: OwnProcessTest): void {
  const { name, file, fn } = test;
  const ignore = test.ignore ?? false;
  if (test.ownProcess === false || Deno.env.get(OWN_PROCESS) === name) {
    Deno.test({ name, ignore, fn });
    return;
  }
  Deno.test({ name, ignore }, async () => {
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: [
        "test",
        "-A",
        "--no-check",
        `--filter=/^${escapeRegExp(name)}$/`,
        new URL(file).pathname,
      ],
      env: { [OWN_PROCESS]: name, NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(300_000),
    }).output();
    const decoder = new TextDecoder();
    const output = decoder.decode(stdout) + decoder.decode(stderr);
    if (code !== 0) throw new Error(`The test failed in its own process:\n${output}`);
    // Exactly this test ran and passed (a filter that matched nothing would pass too).
    if (!/^ok \| 1 passed \| 0 failed/m.test(output)) {
      throw new Error(`The test did not run in its own process:\n${output}`);
    }
  });
}
