/**
 * Installs Triton 2.51's in-process core from the `nvidia-pytriton` 0.7.0 wheel and compiles
 * DenoTriton's C backend against it, into `~/.cache/denotriton/triton-2.51.0` (or
 * `$DENOTRITON_HOME`). Run it once per machine:
 *
 * ```sh
 * deno run -A jsr:@denotriton/triton/setup      # from any project (or one linking a checkout)
 * deno task setup:triton                        # in a checkout of DenoTriton
 * ```
 *
 * Options: `--force` rebuilds the backend, `--wheel <file>` uses a downloaded wheel. From code,
 * call {@linkcode setupTriton}.
 *
 * Steps, each skipped when already done:
 * 1. get the wheel: a local file (`wheel` option or `$DENOTRITON_WHEEL`), else
 *    `pip download --no-deps`, else a direct download from the PEP 691/503 simple index in
 *    `$DENOTRITON_PYPI_INDEX_URL` or `$PIP_INDEX_URL`;
 * 2. extract only the core, its bundled dependency closure (read from the ELF `DT_NEEDED`
 *    entries) and the local response-cache library into the versioned home directory;
 * 3. compile the backend's C sources (`ffi/dt_*.c`) with the system C compiler (`$CC`, default `cc`),
 *    linked to the hashed core file so its `DT_NEEDED` binds to the already loaded core;
 * 4. write `install.json`.
 *
 * Over 500 lines for a reason: the wheel download, its checks, the compile and the fingerprint
 * are one sequence a user runs once, read top to bottom.
 *
 * @module
 */

import { unzipSync } from "fflate";
import { dirname, join } from "node:path";
import { TritonError, TritonPermissionError } from "../errors.ts";
import { deniedPermission } from "../permissions.ts";
import { loadOrder, readElfDynamic } from "./elf.ts";
import {
  BACKEND_NAME,
  defaultTritonHome,
  findTritonInstall,
  PYTRITON_WHEEL,
  TRITON_VERSION,
  type TritonInstall,
  writeManifest,
} from "./install.ts";

export type { TritonInstall } from "./install.ts";

/** Options of {@linkcode setupTriton}. */
export interface SetupTritonOptions {
  /**
   * Where to install.
   *
   * @default {defaultTritonHome()}
   */
  home?: string;
  /**
   * A local `nvidia_pytriton-0.7.0-*.whl` to use instead of downloading one.
   *
   * @default {Deno.env.get("DENOTRITON_WHEEL")}
   */
  wheel?: string;
  /**
   * A PEP 691/503 simple index to download the wheel from when pip is not available.
   *
   * @default {Deno.env.get("DENOTRITON_PYPI_INDEX_URL") ?? Deno.env.get("PIP_INDEX_URL")}
   */
  indexUrl?: string;
  /**
   * The C compiler.
   *
   * @default {Deno.env.get("CC") ?? "cc"}
   */
  compiler?: string;
  /**
   * Progress messages (one line each).
   *
   * @default {(line) => console.error(line)}
   */
  log?: (line: string) => void;
  /**
   * Rebuild the backend even when it is up to date.
   *
   * @default {false}
   */
  force?: boolean;
}

const LIBS = "nvidia_pytriton.libs/";
const CACHE_LIBRARY = "pytriton/tritonserver/caches/local/libtritoncache_local.so";

/**
 * The C sources of the backend, next to this module in the package: the ABI header, then the
 * files compiled together (see `ffi/README.md`).
 */
const BACKEND_SOURCES: readonly string[] = [
  "dt_abi.h",
  "dt_json.c",
  "dt_pack.c",
  "dt_backend.c",
  "dt_client.c",
  "dt_server.c",
];

/** The backend's sources by file name, in {@linkcode BACKEND_SOURCES} order. */
type BackendSources = ReadonlyMap<string, string>;

async function readBackendSources(): Promise<BackendSources> {
  const sources = new Map<string, string>();
  for (const name of BACKEND_SOURCES) {
    const url = new URL(`../../ffi/${name}`, import.meta.url);
    if (url.protocol === "file:") {
      sources.set(name, await Deno.readTextFile(url));
      continue;
    }
    const response = await fetch(url);
    if (!response.ok) {
      throw new TritonError(`Cannot read the backend source ${url}: HTTP ${response.status}`);
    }
    sources.set(name, await response.text());
  }
  return sources;
}

/** What the built backend depends on: its sources and the core it links. */
function backendFingerprint(sources: BackendSources, core: string): string {
  return [...sources].map(([name, text]) => `${name}\0${text}`).join("\0") + "\0" + core;
}

async function sha256Hex(data: string | Uint8Array): Promise<string> {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function commandWorks(command: string, args: string[]): Promise<boolean> {
  try {
    const { success } = await new Deno.Command(command, { args, stdout: "null", stderr: "null" })
      .output();
    return success;
  } catch {
    return false;
  }
}

function wheelPlatformTag(): string {
  return Deno.build.arch === "aarch64" ? "aarch64" : "x86_64";
}

async function pipDownload(directory: string, log: (line: string) => void): Promise<string> {
  const spec = `${PYTRITON_WHEEL.name}==${PYTRITON_WHEEL.version}`;
  log(`Downloading ${spec} with pip`);
  const pip = await commandWorks("pip", ["--version"]) ? "pip" : "pip3";
  // pip prints its own progress bar on the inherited stderr.
  const { success } = await new Deno.Command(pip, {
    args: ["download", "--no-deps", "--only-binary=:all:", "--dest", directory, spec],
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  if (!success) throw new TritonError(`Cannot download ${spec}: pip download failed`);
  for await (const entry of Deno.readDir(directory)) {
    if (entry.name.endsWith(".whl")) return join(directory, entry.name);
  }
  throw new TritonError(`Cannot download ${spec}: pip wrote no wheel`);
}

interface IndexFile {
  filename: string;
  url: string;
  sha256?: string;
}

async function listIndexFiles(indexUrl: string): Promise<IndexFile[]> {
  const base = indexUrl.endsWith("/") ? indexUrl : `${indexUrl}/`;
  const project = new URL(`${PYTRITON_WHEEL.name}/`, base);
  const response = await fetch(project, {
    headers: { accept: "application/vnd.pypi.simple.v1+json, text/html;q=0.1" },
  });
  if (!response.ok) {
    await response.body?.cancel();
    throw new TritonError(
      `Cannot list ${PYTRITON_WHEEL.name} on the index ${project}: HTTP ${response.status}`,
    );
  }
  const type = response.headers.get("content-type") ?? "";
  if (type.includes("json")) {
    const body = await response.json() as {
      files?: { filename: string; url: string; hashes?: Record<string, string> }[];
    };
    return (body.files ?? []).map((file) => {
      const entry: IndexFile = { filename: file.filename, url: new URL(file.url, project).href };
      if (file.hashes?.["sha256"]) entry.sha256 = file.hashes["sha256"];
      return entry;
    });
  }
  const html = await response.text();
  const files: IndexFile[] = [];
  for (const match of html.matchAll(/<a\s[^>]*href="([^"]+)"[^>]*>([^<]+)<\/a>/gi)) {
    const href = match[1]!.replaceAll("&amp;", "&");
    const url = new URL(href, project);
    const entry: IndexFile = { filename: match[2]!.trim(), url: url.href.split("#")[0]! };
    const hash = /sha256=([0-9a-f]{64})/.exec(url.hash);
    if (hash) entry.sha256 = hash[1]!;
    files.push(entry);
  }
  return files;
}

async function indexDownload(
  indexUrl: string,
  directory: string,
  log: (line: string) => void,
): Promise<string> {
  const prefix = `nvidia_pytriton-${PYTRITON_WHEEL.version}-`;
  const arch = wheelPlatformTag();
  const file = (await listIndexFiles(indexUrl)).find((f) =>
    f.filename.startsWith(prefix) && f.filename.endsWith(".whl") && f.filename.includes(arch)
  );
  if (!file) {
    throw new TritonError(
      `Cannot find ${prefix}*${arch}.whl on the index ${indexUrl}`,
    );
  }
  log(`Downloading ${file.filename}`);
  const response = await fetch(file.url);
  if (!response.ok || !response.body) {
    await response.body?.cancel();
    throw new TritonError(`Cannot download ${file.url}: HTTP ${response.status}`);
  }
  const total = Number(response.headers.get("content-length") ?? 0);
  const chunks: Uint8Array[] = [];
  let received = 0;
  let shown = -1;
  for await (const chunk of response.body) {
    chunks.push(chunk);
    received += chunk.byteLength;
    const percent = total > 0 ? Math.floor((received / total) * 100) : -1;
    const step = total > 0 ? Math.floor(percent / 10) : Math.floor(received / 10_000_000);
    if (step !== shown) {
      shown = step;
      const mb = (received / 1e6).toFixed(1);
      log(total > 0 ? `  ${percent}% (${mb} of ${(total / 1e6).toFixed(1)} MB)` : `  ${mb} MB`);
    }
  }
  const data = new Uint8Array(received);
  let offset = 0;
  for (const chunk of chunks) {
    data.set(chunk, offset);
    offset += chunk.byteLength;
  }
  if (file.sha256 && await sha256Hex(data) !== file.sha256) {
    throw new TritonError(`Cannot use ${file.filename}: its SHA-256 does not match the index`);
  }
  const path = join(directory, file.filename);
  await Deno.writeFile(path, data);
  return path;
}

async function obtainWheel(
  options: SetupTritonOptions,
  directory: string,
  log: (line: string) => void,
): Promise<string> {
  const local = options.wheel ?? Deno.env.get("DENOTRITON_WHEEL");
  if (local) return local;
  if (await commandWorks("pip", ["--version"]) || await commandWorks("pip3", ["--version"])) {
    return await pipDownload(directory, log);
  }
  const index = options.indexUrl ?? Deno.env.get("DENOTRITON_PYPI_INDEX_URL") ??
    Deno.env.get("PIP_INDEX_URL");
  if (index) return await indexDownload(index, directory, log);
  throw new TritonError(
    `Cannot download ${PYTRITON_WHEEL.name}==${PYTRITON_WHEEL.version}: pip is not installed and no package index is set (set DENOTRITON_PYPI_INDEX_URL or PIP_INDEX_URL to a PEP 503 simple index, or DENOTRITON_WHEEL to a downloaded wheel)`,
  );
}

interface Extracted {
  core: string;
  preload: string[];
}

/** Extracts the core, its bundled dependency closure and the cache library into `home`. */
async function extractWheel(
  wheel: string,
  home: string,
  log: (line: string) => void,
): Promise<Extracted> {
  log(`Extracting the Triton core from ${wheel}`);
  let zip: Uint8Array;
  try {
    zip = await Deno.readFile(wheel);
  } catch (error) {
    if (deniedPermission(error) !== undefined) throw error;
    throw new TritonError(`Cannot read the wheel ${wheel}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const isCore = (name: string): boolean =>
    name.startsWith(`${LIBS}libtritonserver-`) && name.endsWith(".so");
  // libb64 is not the core's dependency: perf_analyzer (a test peer) needs it beside libcudart.
  const isPeerLibrary = (name: string): boolean =>
    name.startsWith(`${LIBS}libb64-`) && name.endsWith(".so.0d");
  let first: Record<string, Uint8Array>;
  try {
    first = unzipSync(zip, {
      filter: (file) =>
        isCore(file.name) || file.name === CACHE_LIBRARY || isPeerLibrary(file.name),
    });
  } catch (error) {
    throw new TritonError(`Cannot read the wheel ${wheel}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const coreEntry = Object.keys(first).find(isCore);
  if (!coreEntry || !first[CACHE_LIBRARY]) {
    throw new TritonError(
      `Cannot install the Triton core: ${wheel} has no ${LIBS}libtritonserver-*.so or ${CACHE_LIBRARY}`,
    );
  }
  const files = new Map<string, Uint8Array>(Object.entries(first));
  const graph = new Map<string, string[]>();
  const inWheel = new Set(listZipNames(zip).filter((name) => name.startsWith(LIBS)));
  // Walk DT_NEEDED from the core and the cache library, extracting bundled libraries as found.
  const queue = [coreEntry, CACHE_LIBRARY];
  while (queue.length > 0) {
    const entry = queue.shift()!;
    const bytes = files.get(entry)!;
    const needed = readElfDynamic(bytes).needed;
    const bundled = needed.filter((name) => inWheel.has(LIBS + name));
    if (entry.startsWith(LIBS)) graph.set(entry.slice(LIBS.length), bundled);
    const missing = bundled.filter((name) => !files.has(LIBS + name));
    if (missing.length > 0) {
      const wanted = new Set(missing.map((name) => LIBS + name));
      for (
        const [name, data] of Object.entries(unzipSync(zip, { filter: (f) => wanted.has(f.name) }))
      ) {
        files.set(name, data);
        queue.push(name);
      }
    }
  }
  for (const [name, data] of files) {
    const path = join(home, name);
    await Deno.mkdir(dirname(path), { recursive: true });
    await Deno.writeFile(`${path}.tmp`, data, { mode: 0o755 });
    await Deno.rename(`${path}.tmp`, path);
  }
  const core = coreEntry.slice(LIBS.length);
  const order = loadOrder(graph, [core]).filter((name) => name !== core);
  log(`Installed ${core} and ${order.length} bundled libraries into ${home}`);
  return { core, preload: order };
}

/** The entry names of a zip file, from its central directory. */
function listZipNames(zip: Uint8Array): string[] {
  const view = new DataView(zip.buffer, zip.byteOffset, zip.byteLength);
  let end = zip.byteLength - 22;
  while (end >= 0 && view.getUint32(end, true) !== 0x06054b50) end--;
  if (end < 0) throw new TritonError("Cannot read the wheel: it is not a zip file");
  const count = view.getUint16(end + 10, true);
  let at = view.getUint32(end + 16, true);
  const decoder = new TextDecoder();
  const names: string[] = [];
  for (let i = 0; i < count; i++) {
    const nameLength = view.getUint16(at + 28, true);
    const extra = view.getUint16(at + 30, true);
    const comment = view.getUint16(at + 32, true);
    names.push(decoder.decode(zip.subarray(at + 46, at + 46 + nameLength)));
    at += 46 + nameLength + extra + comment;
  }
  return names;
}

async function compileBackend(
  home: string,
  core: string,
  sources: BackendSources,
  compiler: string,
  log: (line: string) => void,
): Promise<void> {
  if (!await commandWorks(compiler, ["--version"])) {
    throw new TritonError(
      `Cannot compile the DenoTriton backend: no C compiler '${compiler}' found (install gcc or clang, or set CC)`,
    );
  }
  const libDirectory = join(home, "nvidia_pytriton.libs");
  const output = join(home, "backends", BACKEND_NAME, `libtriton_${BACKEND_NAME}.so`);
  await Deno.mkdir(dirname(output), { recursive: true });
  const sourcePaths: string[] = [];
  for (const [name, text] of sources) {
    const path = join(dirname(output), name);
    await Deno.writeTextFile(path, text);
    if (name.endsWith(".c")) sourcePaths.push(path);
  }
  log(`Compiling ${output}`);
  const { success, stderr } = await new Deno.Command(compiler, {
    args: [
      "-std=c11",
      "-O2",
      "-fPIC",
      "-shared",
      "-fvisibility=hidden",
      "-Wall",
      "-o",
      `${output}.tmp`,
      ...sourcePaths,
      `-L${libDirectory}`,
      `-l:${core}`,
      `-Wl,-rpath,${libDirectory}`,
      "-Wl,--no-undefined",
      "-lpthread",
    ],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!success) {
    throw new TritonError(
      `Cannot compile the DenoTriton backend with ${compiler}: ${new TextDecoder().decode(stderr)}`,
    );
  }
  await Deno.rename(`${output}.tmp`, output);
}

async function isCurrent(
  home: string,
  existing: TritonInstall | undefined,
  sources: Awaited<ReturnType<typeof readBackendSources>>,
): Promise<boolean> {
  const coreName = existing?.coreLibrary.split("/").pop();
  if (existing === undefined || coreName === undefined) return false;
  const wanted = await sha256Hex(backendFingerprint(sources, coreName));
  return existing.backendSourceHash === wanted && await findTritonInstall({ home }) !== undefined;
}

/**
 * Whether the install in `home` holds the core and a bridge built from this module's own `ffi/`
 * sources, so {@linkcode setupTriton} would have nothing to do there. Reads, never writes: a
 * checkout whose bridge differs can ask without rebuilding an install others use.
 *
 * @param home The install's directory.
 * @returns `true` when the install is complete and its bridge is current.
 *
 * @example A directory without an install
 * ```ts
 * import { tritonInstallIsCurrent } from "./setup.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(await tritonInstallIsCurrent("/nonexistent"), false);
 * ```
 */
export async function tritonInstallIsCurrent(home: string): Promise<boolean> {
  const existing = await findTritonInstall({ home, requireBackend: false });
  return await isCurrent(home, existing, await readBackendSources());
}

/**
 * Installs the Triton core and builds the backend; does nothing when both are up to date.
 *
 * @param options Home directory, wheel source, compiler and logging.
 * @returns The install.
 * @throws {TritonError} With a clear message when the wheel cannot be obtained (no pip and no
 *   index), the core is missing from it, or no C compiler is found.
 *
 * @example Install the core from a program (downloads the wheel the first time)
 * ```ts ignore
 * import { setupTriton } from "jsr:@denotriton/triton/setup";
 * import assert from "node:assert/strict";
 *
 * const install = await setupTriton();
 * assert.equal(install.version, "2.51.0");
 * ```
 */
export async function setupTriton(options: SetupTritonOptions = {}): Promise<TritonInstall> {
  const home = options.home ?? defaultTritonHome();
  const log = options.log ?? ((line: string) => console.error(line));
  const compiler = options.compiler ?? Deno.env.get("CC") ?? "cc";
  const sources = await readBackendSources();
  const existing = await findTritonInstall({ home, requireBackend: false });
  const coreName = existing?.coreLibrary.split("/").pop();
  if (!options.force && await isCurrent(home, existing, sources)) {
    log(`Triton ${existing!.version} is installed in ${home}; nothing to do`);
    return existing!;
  }
  await Deno.mkdir(home, { recursive: true });
  let core: string;
  let preload: string[];
  if (existing) {
    core = coreName!;
    preload = existing.preload.map((path) => path.split("/").pop()!);
  } else {
    const scratch = await Deno.makeTempDir({ prefix: "denotriton-wheel-" });
    try {
      const wheel = await obtainWheel(options, scratch, log);
      ({ core, preload } = await extractWheel(wheel, home, log));
    } finally {
      await Deno.remove(scratch, { recursive: true });
    }
    // Recorded before compiling, so a failed compile does not cost another download.
    await writeManifest(home, {
      version: TRITON_VERSION,
      coreLibrary: core,
      preload,
      backendSourceHash: "",
    });
  }
  await compileBackend(home, core, sources, compiler, log);
  const install = await writeManifest(home, {
    version: TRITON_VERSION,
    coreLibrary: core,
    preload,
    backendSourceHash: await sha256Hex(backendFingerprint(sources, core)),
  });
  log(`Triton ${TRITON_VERSION} is ready in ${home}`);
  return install;
}

if (import.meta.main) {
  try {
    const args = Deno.args;
    const force = args.includes("--force");
    const wheelIndex = args.indexOf("--wheel");
    const options: SetupTritonOptions = { force };
    if (wheelIndex >= 0 && args[wheelIndex + 1]) options.wheel = args[wheelIndex + 1]!;
    const install = await setupTriton(options);
    console.log(install.home);
  } catch (error) {
    const denied = deniedPermission(error);
    const refused = denied !== undefined
      ? `DenoTriton's setup needs ${denied.flag}`
      : error instanceof TritonPermissionError
      ? error.message
      : undefined;
    if (refused !== undefined) {
      // Setup downloads, runs pip and the C compiler, and writes the install: -A is its grant.
      console.error(`${refused}: run the setup with -A`);
    } else {
      console.error(error instanceof TritonError ? error.message : error);
    }
    Deno.exit(1);
  }
}
