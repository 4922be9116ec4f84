/**
 * Builds the stand-in CUDA driver (`cuda_stand_in.c`) for tests on hosts without a GPU. It
 * checks DenoTriton's FFI marshalling and plumbing (discovery, the Worker's current device); the
 * real driver path needs a GPU host.
 *
 * @module
 */

const SOURCE = new URL("./cuda_stand_in.c", import.meta.url).pathname;
const built = new Map<string, Promise<string | undefined>>();

/** Options of {@linkcode buildStandInDriver}. */
export interface StandInOptions {
  /** How many devices it reports. */
  gpus?: number;
  /** A `CUresult` that `cuInit` fails with (0: it succeeds). */
  initError?: number;
}

/** Why the stand-in cannot be built here, or `undefined` when it can. */
export let standInMissing: string | undefined;

/**
 * Compiles the stand-in with `cc` into a temporary directory (once per variant and process).
 *
 * @param options Devices and `cuInit`'s result.
 * @returns The library's path, or `undefined` when no C compiler runs here (see
 *   {@linkcode standInMissing}).
 */
export function buildStandInDriver(options: StandInOptions = {}): Promise<string | undefined> {
  const gpus = options.gpus ?? 2;
  const initError = options.initError ?? 0;
  const key = `${gpus}_${initError}`;
  let library = built.get(key);
  if (library === undefined) {
    library = (async () => {
      const directory = await Deno.makeTempDir({ prefix: "denotriton-cuda-stand-in-" });
      // A loaded library may lose its file: the directory goes when the test process ends.
      globalThis.addEventListener("unload", () => Deno.removeSync(directory, { recursive: true }));
      // Not named libcuda.so.1 and without a SONAME: the core's CUDA runtime looks for the real
      // driver by that name and must never find this one.
      const path = `${directory}/libdenotriton_cuda_stand_in_${key}.so`;
      try {
        const { code, stderr } = await new Deno.Command("cc", {
          args: [
            "-shared",
            "-fPIC",
            "-O1",
            "-Wall",
            `-DSTAND_IN_GPUS=${gpus}`,
            `-DSTAND_IN_INIT_ERROR=${initError}`,
            "-o",
            path,
            SOURCE,
          ],
          stdout: "null",
          stderr: "piped",
        }).output();
        if (code !== 0) {
          standInMissing = `cc failed: ${new TextDecoder().decode(stderr)}`;
          return undefined;
        }
      } catch (error) {
        standInMissing = `no C compiler (cc): ${(error as Error).message}`;
        return undefined;
      }
      return path;
    })();
    built.set(key, library);
  }
  return library;
}
