/**
 * The servers the benchmarks compare and what they need: PyTriton's Python (a venv made on
 * demand), the Triton core, perf_analyzer, and the command that starts each server with the
 * benchmark models (`bench/pytriton/server.py`, `bench/denotriton/server.ts`).
 *
 * @module
 */

import { findPerfAnalyzer, type PerfAnalyzerPeer } from "../tests/_peers.ts";
import { ensureVenv, exists, runCommand as run, type VenvResult } from "./venv.ts";
import type { Ports, ServerCommand } from "./process.ts";
import type { ServerName } from "./report.ts";

/** The repository's root. */
export const ROOT: string = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
/** PyTriton's venv, made when missing. */
const VENV = `${ROOT}/bench/.venv`;
/** The servers' logs and other scratch files. */
const WORK = `${ROOT}/bench/.work`;
const PACKAGES = ["nvidia-pytriton==0.7.0", "tritonclient[http,grpc]==2.51.0"];

const PYTRITON_PROBE = "import pytriton, tritonclient.grpc";

/**
 * The Python with PyTriton and perf_analyzer: `DENOTRITON_PYTRITON_PYTHON` when it has both (as
 * the tests use), else `bench/.venv`, created and filled when missing.
 */
async function pytritonPython(): Promise<VenvResult> {
  const named = Deno.env.get("DENOTRITON_PYTRITON_PYTHON");
  if (named !== undefined && named !== "") {
    const probe = await run(named, ["-c", PYTRITON_PROBE]);
    if (probe.ok) return { python: named };
    console.log(`bench: DENOTRITON_PYTRITON_PYTHON=${named} lacks PyTriton, using ${VENV}`);
  }
  return await ensureVenv({ dir: VENV, packages: PACKAGES, probe: PYTRITON_PROBE });
}

/** Installs the Triton core (`deno task setup:triton`) when it is missing. */
async function ensureTritonCore(): Promise<void> {
  const { defaultTritonHome } = await import("../src/setup/install.ts");
  if (await exists(`${defaultTritonHome()}/install.json`)) return;
  console.log("bench: installing the Triton core (deno task setup:triton) ...");
  const setup = await run(Deno.execPath(), ["task", "setup:triton"]);
  if (!setup.ok) throw new Error(`deno task setup:triton failed: ${setup.text}`);
}

/** perf_analyzer: the venv's when it has one, else one the interop tests would find. */
async function perfAnalyzer(python: string | undefined): Promise<PerfAnalyzerPeer> {
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
async function pythonLibDir(python: string): Promise<string | undefined> {
  const probe = await run(python, [
    "-c",
    "import sysconfig; print(sysconfig.get_config_var('LIBDIR') or '')",
  ]);
  return probe.ok && probe.text !== "" ? probe.text.split("\n").at(-1) : undefined;
}

/** What a comparison needs besides the servers themselves. */
export interface BenchTools {
  /** PyTriton's Python; when PyTriton is not compared, the venv's if there is one. */
  readonly python: string | undefined;
  /** Where that Python's libpython lives (PyTriton's backend stub loads the same one). */
  readonly libDir: string | undefined;
  /** perf_analyzer. */
  readonly perfAnalyzer: PerfAnalyzerPeer;
}

/**
 * Finds what comparing `servers` needs: PyTriton's Python when it is among them (the venv is made
 * when missing), the Triton core when `triton` is (installed when missing), and perf_analyzer.
 *
 * @param servers The servers compared (names other than PyTriton's and the engines' are ignored).
 * @returns The tools, or why PyTriton cannot run.
 * @throws {Error} When no perf_analyzer runs or the Triton core cannot be installed.
 */
export async function benchTools(
  servers: readonly string[],
): Promise<BenchTools | { readonly missing: string }> {
  let python: string | undefined;
  if (servers.includes("pytriton")) {
    const venv = await pytritonPython();
    if ("missing" in venv) return venv;
    python = venv.python;
  } else if (await exists(`${VENV}/bin/python`)) {
    python = `${VENV}/bin/python`;
  }
  if (servers.includes("triton")) await ensureTritonCore();
  return {
    python,
    libDir: python === undefined ? undefined : await pythonLibDir(python),
    perfAnalyzer: await perfAnalyzer(python),
  };
}

/** The load averages over 1, 5 and 15 minutes, as `/proc/loadavg` gives them ("" without it). */
export async function loadAverage(): Promise<string> {
  const text = await Deno.readTextFile("/proc/loadavg").catch(() => "");
  return text.split(" ").slice(0, 3).join(" ");
}

/** The checked-out commit, short, marked when tracked files have uncommitted changes. */
export async function commitOfTree(): Promise<string> {
  const commit = await run("git", ["-C", ROOT, "rev-parse", "--short", "HEAD"]);
  const dirty = await run("git", ["-C", ROOT, "status", "--porcelain", "--untracked-files=no"]);
  return `${commit.text}${dirty.text === "" ? "" : " (+ uncommitted changes)"}`;
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
  /** Where that Python's libpython lives (PyTriton's backend stub loads the same one). */
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
