/**
 * Where the Triton core lives on disk: the versioned home directory that the setup
 * ({@linkcode setupCommand}) fills, and its manifest (`install.json`). The layout mirrors the
 * `nvidia-pytriton` wheel so the bundled libraries' relative run paths stay valid:
 *
 * ```
 * <home>/install.json
 * <home>/nvidia_pytriton.libs/libtritonserver-<hash>.so (+ its bundled dependencies)
 * <home>/pytriton/tritonserver/caches/local/libtritoncache_local.so
 * <home>/backends/denotriton/libtriton_denotriton.so   (compiled from ffi/dt_*.c)
 * ```
 *
 * @module
 */

import { join } from "node:path";
import { TritonPermissionError } from "../errors.ts";
import { readEnv } from "../permissions.ts";

/** The Triton release the setup installs (from `nvidia-pytriton==0.7.0`). */
export const TRITON_VERSION = "2.51.0";

/** The wheel that carries it. */
export const PYTRITON_WHEEL = { name: "nvidia-pytriton", version: "0.7.0" } as const;

/** An installed Triton core, as recorded in `<home>/install.json`. */
export interface TritonInstall {
  /** The home directory. */
  readonly home: string;
  /** Triton's version, e.g. `"2.51.0"`. */
  readonly version: string;
  /** Directory of the core and its bundled dependencies. */
  readonly libDirectory: string;
  /** Absolute path of `libtritonserver-<hash>.so`. */
  readonly coreLibrary: string;
  /** Absolute paths of the core's bundled dependencies, leaves first (loaded before the core). */
  readonly preload: readonly string[];
  /** Cache directory (`SetCacheDirectory`), holding `local/libtritoncache_local.so`. */
  readonly cacheDirectory: string;
  /** Backend directory (`SetBackendDirectory`), holding `denotriton/libtriton_denotriton.so`. */
  readonly backendDirectory: string;
  /** Absolute path of the compiled backend and bridge. */
  readonly backendLibrary: string;
  /** SHA-256 of the C source and core file name the backend was built from. */
  readonly backendSourceHash: string;
}

/** What `install.json` records (paths relative to the home directory). */
export interface TritonManifest {
  /** Triton version. */
  version: string;
  /** Core file name. */
  coreLibrary: string;
  /** Bundled dependency file names, leaves first. */
  preload: string[];
  /** Hash of the backend source and core name. */
  backendSourceHash: string;
}

type Manifest = TritonManifest;

/** The package root (where `deno.json` is), in a checkout or on JSR. */
const PACKAGE_ROOT = new URL("../../", import.meta.url);

/**
 * The command that installs the Triton core for whoever runs this process: `deno task
 * setup:triton` when the program runs from this package's own checkout (its tasks are there),
 * else the package's `./setup` entry point, which works from a JSR import and from a project
 * that links a checkout (`"links"` in its `deno.json`).
 *
 * @returns A command line to print in hints.
 *
 * @example The setup command in this repository or from JSR
 * ```ts
 * import { setupCommand } from "./install.ts";
 * import assert from "node:assert/strict";
 *
 * assert.match(setupCommand(), /^deno (task setup:triton|run -A jsr:@denotriton\/triton\/setup)$/);
 * ```
 */
export function setupCommand(): string {
  const inCheckout = PACKAGE_ROOT.protocol === "file:" &&
    Deno.mainModule.startsWith(PACKAGE_ROOT.href);
  return inCheckout ? "deno task setup:triton" : "deno run -A jsr:@denotriton/triton/setup";
}

/** The backend name used in model configs (`backend` field). */
export const BACKEND_NAME = "denotriton";

/**
 * The default home directory: `$DENOTRITON_HOME`, else `~/.cache/denotriton/triton-2.51.0`
 * (`$XDG_CACHE_HOME/denotriton/...` when set). Variables that `--allow-env` does not grant are
 * skipped without prompting.
 *
 * @returns An absolute path.
 * @throws {TritonPermissionError} When neither `HOME` nor `DENOTRITON_HOME` may be read.
 *
 * @example From DENOTRITON_HOME, else under the cache directory
 * ```ts
 * import { defaultTritonHome } from "./install.ts";
 * import assert from "node:assert/strict";
 *
 * Deno.env.set("DENOTRITON_HOME", "/opt/denotriton");
 * assert.equal(defaultTritonHome(), "/opt/denotriton");
 * Deno.env.delete("DENOTRITON_HOME");
 * assert.match(defaultTritonHome(), /denotriton\/triton-2\.51\.0$/);
 * ```
 */
export function defaultTritonHome(): string {
  const explicit = readEnv("DENOTRITON_HOME");
  if (explicit) return explicit;
  const cache = readEnv("XDG_CACHE_HOME");
  if (cache) return join(cache, "denotriton", `triton-${TRITON_VERSION}`);
  const user = readEnv("HOME") ?? readEnv("USERPROFILE");
  if (
    user === undefined &&
    Deno.permissions.querySync({ name: "env", variable: "HOME" }).state !== "granted"
  ) {
    throw new TritonPermissionError(
      "DenoTriton needs --allow-env=HOME (or --allow-env=DENOTRITON_HOME) for finding the Triton core in ~/.cache/denotriton",
    );
  }
  const base = join(user ?? ".", ".cache");
  return join(base, "denotriton", `triton-${TRITON_VERSION}`);
}

/**
 * The install in `home` described by the given manifest fields.
 *
 * @param home The home directory.
 * @param manifest What `install.json` records (paths relative to `home`).
 * @returns The absolute install description.
 */
function fromManifest(home: string, manifest: Manifest): TritonInstall {
  const libDirectory = join(home, "nvidia_pytriton.libs");
  const backendDirectory = join(home, "backends");
  return {
    home,
    version: manifest.version,
    libDirectory,
    coreLibrary: join(libDirectory, manifest.coreLibrary),
    preload: manifest.preload.map((name) => join(libDirectory, name)),
    cacheDirectory: join(home, "pytriton", "tritonserver", "caches"),
    backendDirectory,
    backendLibrary: join(backendDirectory, BACKEND_NAME, `libtriton_${BACKEND_NAME}.so`),
    backendSourceHash: manifest.backendSourceHash,
  };
}

/**
 * Writes the manifest of an install.
 *
 * @param home The home directory.
 * @param manifest Version, core file name, preload names (relative), backend source hash.
 * @returns The install description.
 */
export async function writeManifest(home: string, manifest: Manifest): Promise<TritonInstall> {
  const path = join(home, "install.json");
  await Deno.writeTextFile(`${path}.tmp`, JSON.stringify(manifest, null, 2) + "\n");
  await Deno.rename(`${path}.tmp`, path);
  return fromManifest(home, manifest);
}

/** Options of {@linkcode findTritonInstall}. */
export interface FindTritonInstallOptions {
  /**
   * The home directory to look in.
   *
   * @default {defaultTritonHome()}
   */
  home?: string;
  /**
   * Whether the compiled backend must be present too.
   *
   * @default {true}
   */
  requireBackend?: boolean;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

/**
 * Finds a complete install (manifest, core, dependencies and, by default, the backend).
 *
 * @param options Where to look.
 * @returns The install, or `undefined` when setup has not run (or is incomplete).
 *
 * @example Nothing installed in an empty directory
 * ```ts
 * import { findTritonInstall } from "./install.ts";
 * import assert from "node:assert/strict";
 *
 * const home = await Deno.makeTempDir();
 * assert.equal(await findTritonInstall({ home }), undefined);
 * await Deno.remove(home);
 * ```
 */
export async function findTritonInstall(
  options: FindTritonInstallOptions = {},
): Promise<TritonInstall | undefined> {
  const home = options.home ?? defaultTritonHome();
  let manifest: Manifest;
  try {
    manifest = JSON.parse(await Deno.readTextFile(join(home, "install.json")));
  } catch (error) {
    if (error instanceof Deno.errors.NotFound || error instanceof SyntaxError) return undefined;
    throw error;
  }
  if (
    typeof manifest?.coreLibrary !== "string" || !Array.isArray(manifest.preload) ||
    typeof manifest.version !== "string"
  ) {
    return undefined;
  }
  const install = fromManifest(home, manifest);
  const files = [install.coreLibrary, ...install.preload];
  if (options.requireBackend ?? true) files.push(install.backendLibrary);
  for (const file of files) {
    if (!await exists(file)) return undefined;
  }
  return install;
}
