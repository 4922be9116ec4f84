/**
 * Finding and opening the CUDA libraries the GPU examples call through Deno FFI (cuBLAS for
 * linear_gpu and text_direction, NVRTC for text_direction), on hosts where they live in a CUDA
 * toolkit or in NVIDIA's Python wheels. Each is looked for, in order:
 *
 * 1. the path given by the caller (then nothing else), else `$CUBLAS_LIBRARY` / `$NVRTC_LIBRARY`;
 * 2. by the dynamic loader's search (`libcublas.so.12`, `.13`; `libnvrtc.so.13`, `.12`);
 * 3. in the CUDA toolkits (`/usr/local/cuda`, then `/usr/local/cuda-13.0` and the like);
 * 4. in Python environments with NVIDIA's wheels (`nvidia-cublas-cu12`, `nvidia-cuda-nvrtc-cu12`:
 *    `…/site-packages/nvidia/cublas/lib`, `…/nvidia/cuda_nvrtc/lib`; the CUDA 13 wheels:
 *    `…/nvidia/cu13/lib`).
 *
 * Examples may call `Deno.dlopen` themselves; the library's own single call site is for `src/`.
 *
 * @module
 */

/** The libraries this module finds. */
export type GpuLibraryKind = "cublas" | "nvrtc";

interface LibrarySpec {
  /** The name used in messages. */
  name: string;
  /** The variable naming a path. */
  variable: string;
  /** Names the dynamic loader searches for, in order. */
  sonames: string[];
  /** Folders inside `site-packages` where NVIDIA's wheels put the library. */
  wheelFolders: string[];
  /** What to install when it is missing. */
  install: string;
}

const SPECS: Record<GpuLibraryKind, LibrarySpec> = {
  cublas: {
    name: "cuBLAS",
    variable: "CUBLAS_LIBRARY",
    sonames: ["libcublas.so.12", "libcublas.so.13"],
    wheelFolders: ["nvidia/cublas/lib", "nvidia/cu13/lib"],
    install: "pip install nvidia-cublas-cu12",
  },
  nvrtc: {
    name: "NVRTC",
    variable: "NVRTC_LIBRARY",
    sonames: ["libnvrtc.so.13", "libnvrtc.so.12"],
    wheelFolders: ["nvidia/cuda_nvrtc/lib", "nvidia/cu13/lib"],
    install: "pip install nvidia-cuda-nvrtc-cu12",
  },
};

function envValue(name: string): string | undefined {
  const granted = Deno.permissions.querySync({ name: "env", variable: name }).state === "granted";
  return granted ? Deno.env.get(name) : undefined;
}

function listDir(path: string): string[] {
  try {
    return [...Deno.readDirSync(path)].map((entry) => entry.name);
  } catch {
    return [];
  }
}

/** `lib/python3.X/{site,dist}-packages` under the usual Python roots. */
function sitePackages(): string[] {
  const home = envValue("HOME");
  const roots = [
    envValue("VIRTUAL_ENV"),
    envValue("CONDA_PREFIX"),
    home === undefined ? undefined : `${home}/.local`,
    "/usr/local",
    "/usr",
    "/opt/conda",
  ].filter((root): root is string => root !== undefined).map((root) => `${root}/lib`);
  return roots.flatMap((lib) =>
    listDir(lib).filter((name) => /^python3\.\d+$/.test(name)).flatMap((python) =>
      ["site-packages", "dist-packages"].map((packages) => `${lib}/${python}/${packages}`)
    )
  );
}

/** The CUDA toolkits' library folders: `/usr/local/cuda`, then versioned installs. */
function toolkitFolders(): string[] {
  const roots = [
    "/usr/local/cuda",
    ...listDir("/usr/local").filter((name) => /^cuda-\d+(\.\d+)*$/.test(name)).sort().reverse()
      .map((name) => `/usr/local/${name}`),
  ];
  return roots.flatMap((root) =>
    ["lib64", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"].map((dir) => `${root}/${dir}`)
  );
}

/**
 * Where a library may be, in the order tried.
 *
 * @param kind `"cublas"` or `"nvrtc"`.
 * @param path The caller's choice: the only candidate when given.
 * @returns Library names (for the loader's search) and absolute paths.
 */
export function gpuLibraryCandidates(kind: GpuLibraryKind, path?: string): string[] {
  if (path !== undefined) return [path];
  const spec = SPECS[kind];
  const explicit = envValue(spec.variable);
  const folders = [
    ...toolkitFolders(),
    ...sitePackages().flatMap((site) => spec.wheelFolders.map((folder) => `${site}/${folder}`)),
  ];
  return [
    ...(explicit === undefined || explicit === "" ? [] : [explicit]),
    ...spec.sonames,
    ...folders.flatMap((folder) => spec.sonames.map((name) => `${folder}/${name}`)),
  ];
}

/** An opened library and where it was found. */
export interface OpenedGpuLibrary<S extends Deno.ForeignLibraryInterface> {
  /** The library. */
  readonly library: Deno.DynamicLibrary<S>;
  /** The name or path it was opened by. */
  readonly path: string;
}

/**
 * Opens the first candidate that loads with the given symbols (`Deno.dlopen` fails on a missing
 * non-optional symbol, so a library of the wrong kind is skipped).
 *
 * @param kind `"cublas"` or `"nvrtc"`.
 * @param symbols The FFI symbol table.
 * @param path The library to open, instead of searching.
 * @returns The library and its path.
 * @throws {Error} `cuBLAS not found (...)` / `NVRTC not found (...)`: one line, naming what was
 *   tried and what to set or install.
 */
export function openGpuLibrary<S extends Deno.ForeignLibraryInterface>(
  kind: GpuLibraryKind,
  symbols: S,
  path?: string,
): OpenedGpuLibrary<S> {
  const spec = SPECS[kind];
  const failures: string[] = [];
  let absent = 0;
  for (const candidate of gpuLibraryCandidates(kind, path)) {
    if (candidate.startsWith("/")) {
      try {
        Deno.statSync(candidate);
      } catch {
        absent++;
        continue;
      }
    }
    try {
      if (kind === "nvrtc") preloadNvrtcBuiltins(candidate);
      return { library: Deno.dlopen(candidate, symbols), path: candidate };
    } catch (error) {
      const message = (error as Error).message.split("\n")[0];
      failures.push(`${candidate}: ${message}`);
    }
  }
  const tried = failures.length > 0 ? `: ${failures.join("; ")}` : "";
  if (path !== undefined) throw new Error(`${spec.name} not found at ${path}${tried}`);
  throw new Error(
    `${spec.name} not found (${
      spec.sonames.join(", ")
    } and ${absent} other paths absent; set ${spec.variable}, or ${spec.install})${tried}`,
  );
}

/**
 * NVRTC loads `libnvrtc-builtins.so.X.Y` by name when it compiles. A toolkit's loader path finds
 * it; a Python wheel's folder is on no search path, and NVRTC has no run path. Opening the file
 * from NVRTC's own folder first makes the later lookup by that name find the loaded copy.
 */
function preloadNvrtcBuiltins(nvrtc: string): void {
  if (!nvrtc.startsWith("/")) return;
  const folder = nvrtc.slice(0, nvrtc.lastIndexOf("/"));
  const major = nvrtc.match(/libnvrtc\.so\.(\d+)$/)?.[1];
  if (major === undefined) return;
  for (const name of listDir(folder)) {
    if (new RegExp(`^libnvrtc-builtins\\.so\\.${major}\\.\\d+$`).test(name)) {
      // Never closed: NVRTC keeps using it.
      Deno.dlopen(`${folder}/${name}`, {});
    }
  }
}
