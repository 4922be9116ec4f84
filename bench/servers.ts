/**
 * The servers the benchmarks compare and what they need: PyTriton's Python (a venv made on
 * demand), the Triton core, perf_analyzer, and the command that starts each server with the
 * benchmark models (`bench/pytriton/server.py`, `bench/denotriton/server.ts`).
 *
 * @module
 */

import { findPerfAnalyzer, type PerfAnalyzerPeer } from "../tests/_peers.ts";
import { ensureVenv, runCommand as run, type VenvResult } from "./venv.ts";
import type { Ports, ServerCommand } from "./process.ts";
import type { ServerName } from "./report.ts";

/** The repository's root. */
export const ROOT: string = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
/** PyTriton's venv, made when missing. */
export const VENV = `${ROOT}/bench/.venv`;
/** The servers' logs and other scratch files. */
export const WORK = `${ROOT}/bench/.work`;
const PACKAGES = ["nvidia-pytriton==0.7.0", "tritonclient[http,grpc]==2.51.0"];

/** Whether a path exists. */
export async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

const PYTRITON_PROBE = "import pytriton, tritonclient.grpc";

/**
 * The Python with PyTriton and perf_analyzer: `DENOTRITON_PYTRITON_PYTHON` when it has both (as
 * the tests use), else `bench/.venv`, created and filled when missing.
 */
export async function pytritonPython(): Promise<VenvResult> {
  const named = Deno.env.get("DENOTRITON_PYTRITON_PYTHON");
  if (named !== undefined && named !== "") {
    const probe = await run(named, ["-c", PYTRITON_PROBE]);
    if (probe.ok) return { python: named };
    console.log(`bench: DENOTRITON_PYTRITON_PYTHON=${named} lacks PyTriton, using ${VENV}`);
  }
  return await ensureVenv({ dir: VENV, packages: PACKAGES, probe: PYTRITON_PROBE });
}

/** Installs the Triton core (`deno task setup:triton`) when it is missing. */
export async function ensureTritonCore(): Promise<void> {
  const { defaultTritonHome } = await import("../src/engine/native/install.ts");
  if (await exists(`${defaultTritonHome()}/install.json`)) return;
  console.log("bench: installing the Triton core (deno task setup:triton) ...");
  const setup = await run(Deno.execPath(), ["task", "setup:triton"]);
  if (!setup.ok) throw new Error(`deno task setup:triton failed: ${setup.text}`);
}

/** perf_analyzer: the venv's when it has one, else one the interop tests would find. */
export async function perfAnalyzer(python: string | undefined): Promise<PerfAnalyzerPeer> {
  const candidates = [];
  if (python !== undefined) {
    const bin = python.slice(0, python.lastIndexOf("/"));
    candidates.push({ python, tritonclientVersion: "2.51.0", scriptDirs: [bin] });
  }
  const { PYTHON } = await import("../tests/_peers.ts");
  candidates.push(PYTHON);
  let reason = "";
  for (const candidate of candidates) {
    const found = await findPerfAnalyzer(candidate);
    if (!("missing" in found)) return found;
    reason = found.missing;
  }
  if (python === undefined) {
    // Last resort: the venv (tritonclient brings perf_analyzer).
    const venv = await pytritonPython();
    if ("python" in venv) return perfAnalyzer(venv.python);
    reason += `; ${venv.missing}`;
  }
  throw new Error(`No runnable perf_analyzer: ${reason}`);
}

/** Where the venv Python's libpython lives, so PyTriton's backend stub loads the same one. */
export async function pythonLibDir(python: string): Promise<string | undefined> {
  const probe = await run(python, [
    "-c",
    "import sysconfig; print(sysconfig.get_config_var('LIBDIR') or '')",
  ]);
  return probe.ok && probe.text !== "" ? probe.text.split("\n").at(-1) : undefined;
}

/** Both servers' port options. */
function portArgs(ports: Ports): string[] {
  return [
    "--http-port",
    String(ports.http),
    "--grpc-port",
    String(ports.grpc),
    "--metrics-port",
    String(ports.metrics),
  ];
}

/** Options of {@linkcode serverCommand}. */
export interface ServerCommandOptions {
  /** The models that must be ready before the server counts as started. */
  readonly models: readonly string[];
  /** PyTriton's Python (needed for `pytriton`). */
  readonly python?: string | undefined;
  /** {@linkcode pythonLibDir} of that Python. */
  readonly libDir?: string | undefined;
  /** A port for DenoTriton's `--inspect` (to profile it). */
  readonly inspect?: number | undefined;
}

/**
 * How to start one server of the comparison with every benchmark model bound; its log goes to
 * `bench/.work/<server>.log`.
 *
 * @param server Which server.
 * @param options The models to wait for, PyTriton's Python, and an inspector port.
 * @returns The command for {@linkcode startServer}.
 */
export function serverCommand(server: ServerName, options: ServerCommandOptions): ServerCommand {
  const { python, libDir, inspect, models } = options;
  const logFile = `${WORK}/${server}.log`;
  if (server === "pytriton") {
    const previous = Deno.env.get("LD_LIBRARY_PATH");
    return {
      command: python!,
      args: (ports) => [`${ROOT}/bench/pytriton/server.py`, ...portArgs(ports)],
      env: libDir === undefined
        ? {}
        : { LD_LIBRARY_PATH: previous ? `${libDir}:${previous}` : libDir },
      models,
      logFile,
    };
  }
  return {
    command: Deno.execPath(),
    args: (ports) => [
      "run",
      "-A",
      ...(inspect === undefined ? [] : [`--inspect=127.0.0.1:${inspect}`]),
      `${ROOT}/bench/denotriton/server.ts`,
      "--engine",
      server,
      ...portArgs(ports),
    ],
    models,
    logFile,
  };
}
