/**
 * The three CUDA libraries the GPU backend calls through Deno FFI, with the signatures of CUDA
 * 12/13's headers: the driver (`libcuda.so.1`: memory, modules, launches), cuBLAS (SGEMM) and
 * NVRTC (the kernels, compiled for the GPU at hand). Each is opened by {@linkcode openCuda}, which
 * says in one line which is missing.
 *
 * Device pointers and handles travel as `u64`/`pointer`; every call's status is checked and an
 * error names the call and the status (`cuLaunchKernel failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)`).
 *
 * @module
 */

import { CUBLAS_SGEMM_SYMBOLS } from "../_gpu/cublas.ts";
import { openGpuLibrary } from "../_gpu/libraries.ts";

const DRIVER_SYMBOLS = {
  cuInit: { parameters: ["u32"], result: "i32" },
  cuDriverGetVersion: { parameters: ["buffer"], result: "i32" },
  cuGetErrorName: { parameters: ["i32", "buffer"], result: "i32" },
  cuDeviceGet: { parameters: ["buffer", "i32"], result: "i32" },
  cuDeviceGetAttribute: { parameters: ["buffer", "i32", "i32"], result: "i32" },
  cuDevicePrimaryCtxRetain: { parameters: ["buffer", "i32"], result: "i32" },
  cuDevicePrimaryCtxRelease_v2: { parameters: ["i32"], result: "i32" },
  cuCtxGetCurrent: { parameters: ["buffer"], result: "i32" },
  cuCtxSetCurrent: { parameters: ["pointer"], result: "i32" },
  cuCtxGetDevice: { parameters: ["buffer"], result: "i32" },
  cuCtxSynchronize: { parameters: [], result: "i32" },
  cuMemAlloc_v2: { parameters: ["buffer", "usize"], result: "i32" },
  cuMemFree_v2: { parameters: ["u64"], result: "i32" },
  cuMemcpyHtoD_v2: { parameters: ["u64", "buffer", "usize"], result: "i32" },
  cuMemcpyDtoH_v2: { parameters: ["buffer", "u64", "usize"], result: "i32" },
  cuModuleLoadData: { parameters: ["buffer", "buffer"], result: "i32" },
  cuModuleUnload: { parameters: ["pointer"], result: "i32" },
  cuModuleGetFunction: { parameters: ["buffer", "pointer", "buffer"], result: "i32" },
  cuLaunchKernel: {
    parameters: [
      "pointer", // f
      "u32", // gridDimX
      "u32", // gridDimY
      "u32", // gridDimZ
      "u32", // blockDimX
      "u32", // blockDimY
      "u32", // blockDimZ
      "u32", // sharedMemBytes
      "pointer", // hStream (NULL: the legacy default stream, which cuBLAS uses too)
      "buffer", // kernelParams: one pointer per parameter, to its value
      "pointer", // extra
    ],
    result: "i32",
  },
} as const;

// The handle and SGEMM are shared with linear_gpu (`examples/_gpu/cublas.ts`).
const CUBLAS_SYMBOLS = {
  ...CUBLAS_SGEMM_SYMBOLS,
  // Only for the log line: optional, so that no cuBLAS is refused for lacking it.
  cublasGetVersion_v2: { parameters: ["pointer", "buffer"], result: "i32", optional: true },
  cublasSgemmStridedBatched: {
    parameters: [
      "pointer", // handle
      "i32", // transa
      "i32", // transb
      "i32", // m
      "i32", // n
      "i32", // k
      "buffer", // alpha (host)
      "u64", // A
      "i32", // lda
      "i64", // strideA
      "u64", // B
      "i32", // ldb
      "i64", // strideB
      "buffer", // beta (host)
      "u64", // C
      "i32", // ldc
      "i64", // strideC
      "i32", // batchCount
    ],
    result: "i32",
  },
} as const;

const NVRTC_SYMBOLS = {
  nvrtcVersion: { parameters: ["buffer", "buffer"], result: "i32" },
  nvrtcGetErrorString: { parameters: ["i32"], result: "pointer" },
  nvrtcGetNumSupportedArchs: { parameters: ["buffer"], result: "i32" },
  nvrtcGetSupportedArchs: { parameters: ["buffer"], result: "i32" },
  nvrtcCreateProgram: {
    parameters: ["buffer", "buffer", "buffer", "i32", "pointer", "pointer"],
    result: "i32",
  },
  nvrtcDestroyProgram: { parameters: ["buffer"], result: "i32" },
  nvrtcCompileProgram: { parameters: ["pointer", "i32", "buffer"], result: "i32" },
  nvrtcGetProgramLogSize: { parameters: ["pointer", "buffer"], result: "i32" },
  nvrtcGetProgramLog: { parameters: ["pointer", "buffer"], result: "i32" },
  nvrtcGetCUBINSize: { parameters: ["pointer", "buffer"], result: "i32" },
  nvrtcGetCUBIN: { parameters: ["pointer", "buffer"], result: "i32" },
  nvrtcGetPTXSize: { parameters: ["pointer", "buffer"], result: "i32" },
  nvrtcGetPTX: { parameters: ["pointer", "buffer"], result: "i32" },
} as const;

/** The driver's functions. */
export type Driver = Deno.DynamicLibrary<typeof DRIVER_SYMBOLS>["symbols"];
/** cuBLAS's functions. */
export type Cublas = Deno.DynamicLibrary<typeof CUBLAS_SYMBOLS>["symbols"];
/** NVRTC's functions. */
export type Nvrtc = Deno.DynamicLibrary<typeof NVRTC_SYMBOLS>["symbols"];

export { CUBLAS_OP_N, CUBLAS_OP_T } from "../_gpu/cublas.ts";

const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
const encoder = new TextEncoder();

/** A NUL-terminated copy of a string, for a `const char*` parameter. */
export function cString(text: string): Uint8Array {
  return encoder.encode(`${text}\0`);
}

function readCString(pointer: Deno.PointerValue): string | undefined {
  return pointer === null ? undefined : Deno.UnsafePointerView.getCString(pointer);
}

/** Where the libraries are; each falls back to the usual search when not given. */
export interface CudaLibraryPaths {
  /**
   * The CUDA driver.
   *
   * @default {"libcuda.so.1"}
   */
  driver?: string;
  /** cuBLAS (else `$CUBLAS_LIBRARY` and the search of `examples/_gpu/libraries.ts`). */
  cublas?: string;
  /** NVRTC (else `$NVRTC_LIBRARY` and the same search). */
  nvrtc?: string;
}

/** The three libraries, opened. */
export interface Cuda {
  readonly driver: Driver;
  readonly cublas: Cublas;
  readonly nvrtc: Nvrtc;
  /** Where each was found. */
  readonly paths: { driver: string; cublas: string; nvrtc: string };
}

/**
 * Opens the driver, cuBLAS and NVRTC.
 *
 * @param paths Where they are, where not in the usual places.
 * @returns The libraries.
 * @throws {Error} One line naming the first that is missing: `no CUDA driver (...)`,
 *   `no cuBLAS: cuBLAS not found (...)`, `no NVRTC: NVRTC not found (...)`.
 */
export function openCuda(paths: CudaLibraryPaths = {}): Cuda {
  const driverPath = paths.driver ?? "libcuda.so.1";
  let driver: Driver;
  try {
    driver = Deno.dlopen(driverPath, DRIVER_SYMBOLS).symbols;
  } catch (error) {
    throw new Error(`no CUDA driver (${driverPath}: ${(error as Error).message.split("\n")[0]})`);
  }
  let cublas;
  try {
    cublas = openGpuLibrary("cublas", CUBLAS_SYMBOLS, paths.cublas);
  } catch (error) {
    throw new Error(`no cuBLAS: ${(error as Error).message}`);
  }
  let nvrtc;
  try {
    nvrtc = openGpuLibrary("nvrtc", NVRTC_SYMBOLS, paths.nvrtc);
  } catch (error) {
    throw new Error(`no NVRTC: ${(error as Error).message}`);
  }
  return {
    driver,
    cublas: cublas.library.symbols,
    nvrtc: nvrtc.library.symbols,
    paths: { driver: driverPath, cublas: cublas.path, nvrtc: nvrtc.path },
  };
}

/**
 * Opens NVRTC alone (it needs no GPU): to compile kernels on any host.
 *
 * @param path The library, instead of the search of `examples/_gpu/libraries.ts`.
 * @returns NVRTC's functions.
 * @throws {Error} `NVRTC not found ...`.
 */
export function openNvrtc(path?: string): Nvrtc {
  return openGpuLibrary("nvrtc", NVRTC_SYMBOLS, path).library.symbols;
}

/** Throws for a driver status other than `CUDA_SUCCESS`, naming the call and the status. */
export function checkCuda(driver: Driver, call: string, status: number): void {
  if (status === 0) return;
  const slot = new BigUint64Array(1);
  const named = driver.cuGetErrorName(status, slot) === 0 && slot[0] !== 0n
    ? readCString(Deno.UnsafePointer.create(slot[0]!))
    : undefined;
  throw new Error(`${call} failed: ${named ?? "CUDA error"} (${status})`);
}

const CUBLAS_STATUS: Record<number, string> = {
  1: "CUBLAS_STATUS_NOT_INITIALIZED",
  3: "CUBLAS_STATUS_ALLOC_FAILED",
  7: "CUBLAS_STATUS_INVALID_VALUE",
  8: "CUBLAS_STATUS_ARCH_MISMATCH",
  11: "CUBLAS_STATUS_MAPPING_ERROR",
  13: "CUBLAS_STATUS_EXECUTION_FAILED",
  14: "CUBLAS_STATUS_INTERNAL_ERROR",
  15: "CUBLAS_STATUS_NOT_SUPPORTED",
};

/** Throws for a cuBLAS status other than `CUBLAS_STATUS_SUCCESS`. */
export function checkCublas(call: string, status: number): void {
  if (status !== 0) {
    throw new Error(`${call} failed: ${CUBLAS_STATUS[status] ?? "cuBLAS status"} (${status})`);
  }
}

function checkNvrtc(nvrtc: Nvrtc, call: string, status: number, log = ""): void {
  if (status === 0) return;
  const name = readCString(nvrtc.nvrtcGetErrorString(status)) ?? "NVRTC error";
  throw new Error(`${call} failed: ${name} (${status})${log === "" ? "" : `:\n${log}`}`);
}

/** The compute capability of the device current on this thread, as `[major, minor]`. */
export function currentComputeCapability(driver: Driver): [number, number] {
  const device = new Int32Array(1);
  checkCuda(driver, "cuCtxGetDevice", driver.cuCtxGetDevice(device));
  const attribute = (which: number, name: string): number => {
    const value = new Int32Array(1);
    checkCuda(driver, name, driver.cuDeviceGetAttribute(value, which, device[0]!));
    return value[0]!;
  };
  return [
    attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cuDeviceGetAttribute (major)"),
    attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cuDeviceGetAttribute (minor)"),
  ];
}

/** What {@linkcode compileKernels} made. */
export interface CompiledKernels {
  /** The image for `cuModuleLoadData`: a CUBIN, or NUL-terminated PTX. */
  readonly image: Uint8Array;
  /** `sm_90` (a CUBIN for that GPU) or `compute_90` (PTX the driver compiles when loading). */
  readonly target: string;
  /** NVRTC's version, `major.minor`. */
  readonly nvrtcVersion: string;
  /** NVRTC's log (warnings), usually empty. */
  readonly log: string;
}

/**
 * Compiles CUDA C with NVRTC for a GPU: a CUBIN for its exact architecture when NVRTC knows it,
 * else PTX for the newest architecture NVRTC knows below it (which the driver compiles for the
 * GPU when it loads the module).
 *
 * @param nvrtc NVRTC.
 * @param source The CUDA C source.
 * @param computeCapability The GPU's `[major, minor]`.
 * @param name The program's name in messages.
 * @returns The image.
 * @throws {Error} When NVRTC supports no architecture up to the GPU's, or compilation fails
 *   (with NVRTC's log).
 */
export function compileKernels(
  nvrtc: Nvrtc,
  source: string,
  computeCapability: readonly [number, number],
  name = "kernels.cu",
): CompiledKernels {
  const major = new Int32Array(1);
  const minor = new Int32Array(1);
  checkNvrtc(nvrtc, "nvrtcVersion", nvrtc.nvrtcVersion(major, minor));
  const count = new Int32Array(1);
  checkNvrtc(nvrtc, "nvrtcGetNumSupportedArchs", nvrtc.nvrtcGetNumSupportedArchs(count));
  const archs = new Int32Array(count[0]!);
  checkNvrtc(nvrtc, "nvrtcGetSupportedArchs", nvrtc.nvrtcGetSupportedArchs(archs));
  const wanted = computeCapability[0] * 10 + computeCapability[1];
  const below = [...archs].filter((arch) => arch <= wanted);
  const version = `${major[0]}.${minor[0]}`;
  if (below.length === 0) {
    throw new Error(
      `NVRTC ${version} cannot compile for sm_${wanted} (it knows ${[...archs].join(", ")})`,
    );
  }
  const cubin = archs.includes(wanted);
  const target = cubin ? `sm_${wanted}` : `compute_${Math.max(...below)}`;

  const program = new BigUint64Array(1);
  checkNvrtc(
    nvrtc,
    "nvrtcCreateProgram",
    nvrtc.nvrtcCreateProgram(program, cString(source), cString(name), 0, null, null),
  );
  const handle = Deno.UnsafePointer.create(program[0]!);
  try {
    const options = [cString(`--gpu-architecture=${target}`)];
    const pointers = BigUint64Array.from(
      options,
      (option) => BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(option))),
    );
    const status = nvrtc.nvrtcCompileProgram(handle, options.length, pointers);
    const logSize = new BigUint64Array(1);
    checkNvrtc(nvrtc, "nvrtcGetProgramLogSize", nvrtc.nvrtcGetProgramLogSize(handle, logSize));
    const logBytes = new Uint8Array(Number(logSize[0]));
    if (logBytes.length > 0) {
      checkNvrtc(nvrtc, "nvrtcGetProgramLog", nvrtc.nvrtcGetProgramLog(handle, logBytes));
    }
    const log = new TextDecoder().decode(logBytes).replace(/\0+$/, "").trim();
    checkNvrtc(nvrtc, `nvrtcCompileProgram (${name}, ${target})`, status, log);
    const size = new BigUint64Array(1);
    let image: Uint8Array;
    if (cubin) {
      checkNvrtc(nvrtc, "nvrtcGetCUBINSize", nvrtc.nvrtcGetCUBINSize(handle, size));
      image = new Uint8Array(Number(size[0]));
      checkNvrtc(nvrtc, "nvrtcGetCUBIN", nvrtc.nvrtcGetCUBIN(handle, image));
    } else {
      // The size counts the terminating NUL, which cuModuleLoadData needs.
      checkNvrtc(nvrtc, "nvrtcGetPTXSize", nvrtc.nvrtcGetPTXSize(handle, size));
      image = new Uint8Array(Number(size[0]));
      checkNvrtc(nvrtc, "nvrtcGetPTX", nvrtc.nvrtcGetPTX(handle, image));
    }
    return { image, target, nvrtcVersion: version, log };
  } finally {
    nvrtc.nvrtcDestroyProgram(program);
  }
}
