/**
 * Builds the stand-ins for the CUDA libraries, for tests on hosts without a GPU:
 *
 * - the CUDA driver (`cuda_stand_in.c`: devices and contexts; `cuda_stand_in_memory.c`: device
 *   memory as host memory with guard checks, each allocation a shared-memory object, copies
 *   counted; `cuda_stand_in_module.c`: modules and launches that run the kernels' own CUDA C on
 *   the CPU through `kernel_emulation.h`; `cuda_stand_in_ipc.c`: CUDA IPC handles naming those
 *   objects, so a client process and the server share device memory);
 * - cuBLAS (`cublas_stand_in.c`, column-major SGEMM, linked against the driver stand-in);
 * - NVRTC (`nvrtc_stand_in.c`, which hands the source on for the driver stand-in to compile).
 *
 * They check DenoTriton's FFI marshalling and plumbing (discovery, the Worker's current device,
 * the GPU examples' launches, layouts and buffer sizes); the real driver path needs a GPU host.
 *
 * @module
 */

const HERE = new URL(".", import.meta.url).pathname;
const DRIVER_SOURCES = [
  "cuda_stand_in.c",
  "cuda_stand_in_memory.c",
  "cuda_stand_in_module.c",
  "cuda_stand_in_ipc.c",
];
const built = new Map<string, Promise<string | undefined>>();
let directory: Promise<string> | undefined;

/** Options of {@linkcode buildStandInDriver}. */
export interface StandInOptions {
  /** How many devices it reports. */
  gpus?: number;
  /** A `CUresult` that `cuInit` fails with (0: it succeeds). */
  initError?: number;
}

/** Why a stand-in cannot be built here, or `undefined` when it can. */
export let standInMissing: string | undefined;

/** One temporary directory per process for the libraries and the modules the driver compiles. */
function workDirectory(): Promise<string> {
  directory ??= (async () => {
    const path = await Deno.makeTempDir({ prefix: "denotriton-cuda-stand-in-" });
    // A loaded library may lose its file: the directory goes when the test process ends.
    globalThis.addEventListener("unload", () => Deno.removeSync(path, { recursive: true }));
    return path;
  })();
  return directory;
}

function compile(
  key: string,
  compiler: string,
  args: (path: string, dir: string) => string[],
): Promise<string | undefined> {
  let library = built.get(key);
  if (library === undefined) {
    library = (async () => {
      const dir = await workDirectory();
      // Not named libcuda.so.1 and without a SONAME: the core's CUDA runtime looks for the real
      // driver by that name and must never find this one.
      const path = `${dir}/libdenotriton_${key}.so`;
      try {
        const { code, stderr } = await new Deno.Command(compiler, {
          args: ["-shared", "-fPIC", "-O1", "-Wall", "-o", path, ...args(path, dir)],
          stdout: "null",
          stderr: "piped",
        }).output();
        if (code !== 0) {
          standInMissing = `${compiler} failed: ${new TextDecoder().decode(stderr)}`;
          return undefined;
        }
      } catch (error) {
        standInMissing = `no C compiler (${compiler}): ${(error as Error).message}`;
        return undefined;
      }
      return path;
    })();
    built.set(key, library);
  }
  return library;
}

/**
 * Compiles the stand-in driver with `cc` (once per variant and process). Its cuModuleLoadData
 * compiles kernels with `c++` when a test loads a module.
 *
 * @param options Devices and `cuInit`'s result.
 * @returns The library's path, or `undefined` when no C compiler runs here (see
 *   {@linkcode standInMissing}).
 */
export function buildStandInDriver(options: StandInOptions = {}): Promise<string | undefined> {
  const gpus = options.gpus ?? 2;
  const initError = options.initError ?? 0;
  return compile(`cuda_stand_in_${gpus}_${initError}`, "cc", (_, dir) => [
    `-DSTAND_IN_GPUS=${gpus}`,
    `-DSTAND_IN_INIT_ERROR=${initError}`,
    `-DSTAND_IN_MODULE_DIR="${dir}"`,
    `-DSTAND_IN_EMULATION_HEADER="${HERE}kernel_emulation.h"`,
    `-DSTAND_IN_CXX="c++"`,
    ...DRIVER_SOURCES.map((source) => `${HERE}${source}`),
    "-lpthread",
    "-ldl",
  ]);
}

/** The three stand-ins' paths. */
export interface StandInLibraries {
  /** The driver (2 devices). */
  driver: string;
  /** cuBLAS, linked against that driver. */
  cublas: string;
  /** NVRTC. */
  nvrtc: string;
}

/**
 * Builds the driver, cuBLAS and NVRTC stand-ins, and checks that `c++` runs (the driver needs it
 * to load modules).
 *
 * @returns Their paths, or `undefined` (see {@linkcode standInMissing}).
 */
export async function buildStandInLibraries(): Promise<StandInLibraries | undefined> {
  const driver = await buildStandInDriver();
  if (driver === undefined) return undefined;
  try {
    const { success } = await new Deno.Command("c++", { args: ["--version"], stdout: "null" })
      .output();
    if (!success) throw new Error("c++ --version failed");
  } catch (error) {
    standInMissing = `no C++ compiler (c++) for the kernels: ${(error as Error).message}`;
    return undefined;
  }
  // Linked by the driver's absolute path (it has no SONAME), so both are one library in memory.
  const cublas = await compile("cublas_stand_in", "cc", () => [
    `${HERE}cublas_stand_in.c`,
    driver,
  ]);
  const nvrtc = await compile("nvrtc_stand_in", "cc", () => [`${HERE}nvrtc_stand_in.c`]);
  if (cublas === undefined || nvrtc === undefined) return undefined;
  return { driver, cublas, nvrtc };
}
