/**
 * Finds the official peers the interop tests drive: a Python with `tritonclient[http]`,
 * `perf_analyzer` with the shared libraries it needs, and h2spec.
 *
 * - Python: `DENOTRITON_PYTHON`, else `python3` on the `PATH`.
 * - perf_analyzer: `DENOTRITON_PERF_ANALYZER`, else `perf_analyzer` on the `PATH`, else the
 *   scripts folders of that Python (the `tritonclient==2.51.0` wheel ships it there).
 * - Its libraries: `libb64.so.0d` and `libcudart.so.12` are not on a plain system; the Triton core
 *   install (`deno task setup:triton`, in `defaultTritonHome()`: `DENOTRITON_HOME`, default
 *   `~/.cache/denotriton/triton-2.51.0`) holds them with hashed names (`libb64-<hash>.so.0d`), as
 *   may `DENOTRITON_PEER_LIBS`. A temporary folder of symlinks under the plain names goes on
 *   `LD_LIBRARY_PATH`.
 * - h2spec: `DENOTRITON_H2SPEC`, else `h2spec` on the `PATH`, else Go's bin folders
 *   ({@linkcode findH2spec}).
 *
 * {@linkcode runPerfAnalyzer} runs perf_analyzer the way the interop tests check it.
 *
 * @module
 */

import assert from "node:assert/strict";

/** A Python interpreter that imports `tritonclient.http`. */
export interface PythonPeer {
  /** The interpreter to run. */
  readonly python: string;
  /** `tritonclient.__version__`, e.g. `"2.51.0"`. */
  readonly tritonclientVersion: string;
  /** The folders its console scripts go to (`sys.prefix/bin`, the scripts and user scripts). */
  readonly scriptDirs: readonly string[];
}

/** A runnable `perf_analyzer`. */
export interface PerfAnalyzerPeer {
  /** The binary. */
  readonly path: string;
  /** Environment to run it with (`LD_LIBRARY_PATH` when libraries had to be provided). */
  readonly env: Readonly<Record<string, string>>;
  /** What `perf_analyzer --version` printed. */
  readonly version: string;
}

const decoder = new TextDecoder();

async function output(
  command: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ ok: boolean; text: string }> {
  try {
    const result = await new Deno.Command(command, {
      args,
      env,
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(60_000),
    }).output();
    return {
      ok: result.success,
      text: (decoder.decode(result.stdout) + decoder.decode(result.stderr)).trim(),
    };
  } catch (error) {
    return { ok: false, text: String(error) };
  }
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}

async function onPath(name: string): Promise<string | undefined> {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (dir !== "" && await isFile(`${dir}/${name}`)) return `${dir}/${name}`;
  }
  return undefined;
}

const PROBE = `
import json, os, sys, sysconfig
import tritonclient, tritonclient.http
dirs = [os.path.join(sys.prefix, "bin"), sysconfig.get_path("scripts")]
try:
    dirs.append(sysconfig.get_path("scripts", os.name + "_user"))
except Exception:
    pass
try:
    from importlib.metadata import version
    v = version("tritonclient")
except Exception:
    v = getattr(tritonclient, "__version__", "unknown")
print(json.dumps({"version": v, "dirs": dirs}))
`;

/**
 * Finds a Python with `tritonclient.http`.
 *
 * @returns The peer, or `undefined` when there is none.
 */
export async function findPython(): Promise<PythonPeer | undefined> {
  const python = Deno.env.get("DENOTRITON_PYTHON") ?? await onPath("python3");
  if (python === undefined) return undefined;
  const probe = await output(python, ["-c", PROBE]);
  if (!probe.ok) return undefined;
  const { version, dirs } = JSON.parse(probe.text.split("\n").at(-1)!) as {
    version: string;
    dirs: string[];
  };
  return { python, tritonclientVersion: version, scriptDirs: [...new Set(dirs)] };
}

/** Finds the first file under `root` (depth-limited) whose name matches each pattern. */
async function findFiles(
  root: string,
  patterns: readonly RegExp[],
  depth = 6,
): Promise<(string | undefined)[]> {
  const found: (string | undefined)[] = patterns.map(() => undefined);
  const walk = async (dir: string, level: number): Promise<void> => {
    let entries: Deno.DirEntry[];
    try {
      entries = await Array.fromAsync(Deno.readDir(dir));
    } catch {
      return;
    }
    for (const entry of entries) {
      const path = `${dir}/${entry.name}`;
      if (entry.isFile || entry.isSymlink) {
        patterns.forEach((pattern, i) => {
          if (found[i] === undefined && pattern.test(entry.name)) found[i] = path;
        });
      } else if (entry.isDirectory && level < depth) {
        await walk(path, level + 1);
      }
      if (found.every((f) => f !== undefined)) return;
    }
  };
  await walk(root, 0);
  return found;
}

/** The libraries perf_analyzer links against that a plain system lacks: plain name → pattern. */
const PERF_ANALYZER_LIBS: readonly [string, RegExp][] = [
  ["libb64.so.0d", /^libb64([-.].*)?\.so\.0d$/],
  ["libcudart.so.12", /^libcudart([-.].*)?\.so\.12(\.[\d.]+)?$/],
];

async function libraryRoots(): Promise<string[]> {
  const roots: string[] = [];
  const explicit = Deno.env.get("DENOTRITON_PEER_LIBS");
  if (explicit) roots.push(explicit);
  try {
    const install = await import("../src/setup/install.ts");
    roots.push(install.defaultTritonHome());
  } catch {
    roots.push(
      Deno.env.get("DENOTRITON_HOME") ??
        `${Deno.env.get("HOME") ?? "."}/.cache/denotriton/triton-2.51.0`,
    );
  }
  return roots;
}

let linkDir: string | undefined;

/** Makes (once per process) a folder of symlinks with the plain library names. */
async function linkLibraries(): Promise<string | undefined> {
  if (linkDir !== undefined) return linkDir;
  const found = new Map<string, string>();
  for (const root of await libraryRoots()) {
    const paths = await findFiles(root, PERF_ANALYZER_LIBS.map(([, pattern]) => pattern));
    paths.forEach((path, i) => {
      const name = PERF_ANALYZER_LIBS[i]![0];
      if (path !== undefined && !found.has(name)) found.set(name, path);
    });
  }
  if (found.size === 0) return undefined;
  const dir = await Deno.makeTempDir({ prefix: "denotriton_pa_libs_" });
  for (const [name, target] of found) await Deno.symlink(target, `${dir}/${name}`);
  globalThis.addEventListener("unload", () => {
    try {
      Deno.removeSync(dir, { recursive: true });
    } catch {
      // Best effort: a temp folder of symlinks.
    }
  });
  return linkDir = dir;
}

/**
 * Finds a `perf_analyzer` that runs (`--version` succeeds), providing its libraries when needed.
 *
 * @param python The Python peer whose scripts folders may hold it.
 * @returns The peer, or `undefined` with the reason.
 */
export async function findPerfAnalyzer(
  python: PythonPeer | undefined,
): Promise<PerfAnalyzerPeer | { missing: string }> {
  const candidates = [
    Deno.env.get("DENOTRITON_PERF_ANALYZER"),
    await onPath("perf_analyzer"),
    ...(python?.scriptDirs ?? []).map((dir) => `${dir}/perf_analyzer`),
  ].filter((c): c is string => c !== undefined);
  let path: string | undefined;
  for (const candidate of candidates) {
    if (await isFile(candidate)) {
      path = candidate;
      break;
    }
  }
  if (path === undefined) {
    return {
      missing: "perf_analyzer not found (pip install 'tritonclient[http,grpc]==2.51.0' ships it)",
    };
  }
  const bare = await output(path, ["--version"]);
  if (bare.ok) return { path, env: {}, version: bare.text };
  const libs = await linkLibraries();
  if (libs === undefined) {
    return {
      missing: `${path} does not run (${bare.text.split("\n")[0]}) and no libb64/libcudart ` +
        "were found: run `deno task setup:triton` or set DENOTRITON_PEER_LIBS",
    };
  }
  const previous = Deno.env.get("LD_LIBRARY_PATH");
  const env = { LD_LIBRARY_PATH: previous ? `${libs}:${previous}` : libs };
  const linked = await output(path, ["--version"], env);
  if (!linked.ok) {
    return { missing: `${path} does not run with ${libs}: ${linked.text.split("\n")[0]}` };
  }
  return { path, env, version: linked.text };
}

/** A runnable h2spec (github.com/summerwind/h2spec). */
export interface H2specPeer {
  /** The binary. */
  readonly path: string;
}

/**
 * Finds h2spec: `DENOTRITON_H2SPEC`, else `h2spec` on the `PATH`, else where `go install` puts
 * it (`$GOBIN`, `$GOPATH/bin`, `~/go/bin`). `.ci/run` installs it with `go install`.
 *
 * @returns The peer, or `undefined` with the reason.
 */
export async function findH2spec(): Promise<H2specPeer | { missing: string }> {
  const home = Deno.env.get("HOME");
  const gopath = Deno.env.get("GOPATH")?.split(":")[0];
  const candidates = [
    Deno.env.get("DENOTRITON_H2SPEC"),
    await onPath("h2spec"),
    ...[Deno.env.get("GOBIN"), gopath && `${gopath}/bin`, home && `${home}/go/bin`]
      .filter((dir) => dir !== undefined && dir !== "")
      .map((dir) => `${dir}/h2spec`),
  ].filter((c): c is string => c !== undefined);
  for (const path of candidates) {
    if (!await isFile(path)) continue;
    const probe = await output(path, ["--version"]);
    if (!probe.ok) return { missing: `${path} does not run: ${probe.text.split("\n")[0]}` };
    return { path };
  }
  return {
    missing: "h2spec not found (go install " +
      "github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible, or set DENOTRITON_H2SPEC)",
  };
}

/** The Python peer, found once at load. */
export const PYTHON: PythonPeer | undefined = await findPython();

/** Options of {@linkcode runPerfAnalyzer}. */
export interface PerfAnalyzerRun {
  /** The highest concurrency level (from 1). */
  readonly maxConcurrency: number;
  /** `--max-trials`: how many windows a level may take to agree. */
  readonly maxTrials: number;
  /** `--stability-percentage`: how far windows may disagree. */
  readonly stabilityPercentage: number;
}

/**
 * Runs perf_analyzer with count windows of 50 requests per concurrency level and checks the run:
 * exit 0, a throughput line per level, no error in its output.
 *
 * @param peer The perf_analyzer to run.
 * @param args The model, URL, protocol and data arguments.
 * @param run The concurrency range and how steady the windows must be.
 * @returns perf_analyzer's stdout and stderr.
 */
export async function runPerfAnalyzer(
  peer: PerfAnalyzerPeer,
  args: readonly string[],
  run: PerfAnalyzerRun,
): Promise<string> {
  const result = await new Deno.Command(peer.path, {
    args: [
      ...args,
      "--concurrency-range",
      `1:${run.maxConcurrency}`,
      "--measurement-mode",
      "count_windows",
      "--measurement-request-count",
      "50",
      "--max-trials",
      String(run.maxTrials),
      "--stability-percentage",
      String(run.stabilityPercentage),
    ],
    env: peer.env,
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(120_000),
  }).output();
  const output = decoder.decode(result.stdout) + decoder.decode(result.stderr);
  assert.equal(result.code, 0, `perf_analyzer failed:\n${output}`);
  for (let concurrency = 1; concurrency <= run.maxConcurrency; concurrency++) {
    assert.match(
      output,
      new RegExp(`Concurrency: ${concurrency}, throughput: [\\d.]+ infer/sec`),
      `No throughput line for concurrency ${concurrency}:\n${output}`,
    );
  }
  assert.doesNotMatch(output, /error/i, `perf_analyzer reported errors:\n${output}`);
  return output;
}
