/**
 * The stand-ins of tests/_gpu/ checked for themselves, so that the GPU tests that run on them
 * mean something: the stand-in cuBLAS computes what cuBLAS computes (column-major SGEMM) and
 * refuses what it refuses; the stand-in driver runs a kernel's own CUDA C (the text_direction
 * example's, compiled by the stand-in NVRTC) and fails the launches a GPU would fault on or that it
 * cannot emulate.
 *
 * @module
 */

import assert from "node:assert/strict";
import { buildStandInLibraries, standInMissing } from "./_gpu/stand_in.ts";
import { download, openStandInDriver, upload } from "./_gpu/driver_calls.ts";
import { compileKernels, cString, openCuda } from "../examples/text_direction/cuda.ts";
import { KERNELS_SOURCE } from "../examples/text_direction/gpu.ts";

const LIBS = await buildStandInLibraries();
const STAND_IN = LIBS === undefined ? ` (skipped: stand-ins not built: ${standInMissing})` : "";
const SOURCE = Deno.readTextFileSync(KERNELS_SOURCE);

const TEST_CUBLAS = {
  cublasCreate_v2: { parameters: ["buffer"], result: "i32" },
  cublasSgemmStridedBatched: {
    parameters: [
      "pointer",
      "i32",
      "i32",
      "i32",
      "i32",
      "i32",
      "buffer",
      "u64",
      "i32",
      "i64",
      "u64",
      "i32",
      "i64",
      "buffer",
      "u64",
      "i32",
      "i64",
      "i32",
    ],
    result: "i32",
  },
} as const;

Deno.test({
  name:
    `text_direction: the stand-in cuBLAS computes column-major SGEMM (transposes, leading dimensions, batch strides, beta) and refuses what cuBLAS refuses${STAND_IN}`,
  ignore: LIBS === undefined,
  fn(): void {
    const driver = openStandInDriver(LIBS!.driver);
    const cublas = Deno.dlopen(LIBS!.cublas, TEST_CUBLAS).symbols;
    const slot = new BigUint64Array(1);
    assert.equal(cublas.cublasCreate_v2(slot), 0);
    const handle = Deno.UnsafePointer.create(slot[0]!);
    const gemm = (
      ta: number,
      tb: number,
      m: number,
      n: number,
      k: number,
      alpha: number,
      a: bigint,
      lda: number,
      sa: number,
      b: bigint,
      ldb: number,
      sb: number,
      beta: number,
      c: bigint,
      ldc: number,
      sc: number,
      batch: number,
    ): number =>
      cublas.cublasSgemmStridedBatched(
        handle,
        ta,
        tb,
        m,
        n,
        k,
        new Float32Array([alpha]),
        a,
        lda,
        BigInt(sa),
        b,
        ldb,
        BigInt(sb),
        new Float32Array([beta]),
        c,
        ldc,
        BigInt(sc),
        batch,
      );

    // A = [[1, 2, 3], [4, 5, 6]] and B = [[7, 8], [9, 10], [11, 12]], stored by columns.
    const a = upload(driver, new Float32Array([1, 4, 2, 5, 3, 6]));
    const b = upload(driver, new Float32Array([7, 9, 11, 8, 10, 12]));
    const c = upload(driver, new Float32Array(0), 4);
    assert.equal(gemm(0, 0, 2, 2, 3, 1, a, 2, 0, b, 3, 0, 0, c, 2, 0, 1), 0);
    // A·B = [[58, 64], [139, 154]], by columns; beta 0 reads no C (fresh memory is NaN).
    assert.deepEqual([...download(driver, c, 4)], [58, 139, 64, 154]);
    // Aᵀ (3x2) as op(A) of the stored 2x3: Aᵀ·Aᵀᵀ... = Aᵀ·A, 3x3, and C = 2·(that) + 1·C.
    const c3 = upload(driver, new Float32Array(9).fill(1));
    assert.equal(gemm(1, 0, 3, 3, 2, 2, a, 2, 0, a, 2, 0, 1, c3, 3, 0, 1), 0);
    // AᵀA = [[17, 22, 27], [22, 29, 36], [27, 36, 45]].
    assert.deepEqual([...download(driver, c3, 9)], [35, 45, 55, 45, 59, 73, 55, 73, 91]);

    // Every transpose pair, padded leading dimensions, 3 batches with strides, against a naive
    // column-major GEMM.
    let state = 11;
    const random = (count: number): Float32Array =>
      Float32Array.from({ length: count }, () => {
        state = (Math.imul(state, 1103515245) + 12345) >>> 0;
        return Math.round((state / 2 ** 32) * 16 - 8);
      });
    const [m, n, k, batch] = [5, 4, 3, 3];
    for (const ta of [0, 1]) {
      for (const tb of [0, 1]) {
        const [ar, ac] = ta === 0 ? [m, k] : [k, m];
        const [br, bc] = tb === 0 ? [k, n] : [n, k];
        const [lda, ldb, ldc] = [ar + 2, br + 1, m + 3];
        const [sa, sb, sc] = [lda * ac + 1, ldb * bc, ldc * n + 2];
        const hostA = random(sa * batch);
        const hostB = random(sb * batch);
        const hostC = random(sc * batch);
        const [da, db, dc] = [upload(driver, hostA), upload(driver, hostB), upload(driver, hostC)];
        assert.equal(
          gemm(ta, tb, m, n, k, 0.5, da, lda, sa, db, ldb, sb, 2, dc, ldc, sc, batch),
          0,
        );
        const got = download(driver, dc, hostC.length);
        const expected = hostC.slice();
        for (let s = 0; s < batch; s++) {
          for (let j = 0; j < n; j++) {
            for (let i = 0; i < m; i++) {
              let sum = 0;
              for (let p = 0; p < k; p++) {
                const av = ta === 0 ? hostA[s * sa + i + p * lda]! : hostA[s * sa + p + i * lda]!;
                const bv = tb === 0 ? hostB[s * sb + p + j * ldb]! : hostB[s * sb + j + p * ldb]!;
                sum += av * bv;
              }
              const at = s * sc + i + j * ldc;
              expected[at] = 0.5 * sum + 2 * hostC[at]!;
            }
          }
        }
        assert.deepEqual([...got], [...expected], `transa ${ta}, transb ${tb}`);
        for (const pointer of [da, db, dc]) assert.equal(driver.cuMemFree_v2(pointer), 0);
      }
    }
    // lda below m: CUBLAS_STATUS_INVALID_VALUE, as cuBLAS checks it.
    assert.equal(gemm(0, 0, 2, 2, 3, 1, a, 1, 0, b, 3, 0, 0, c, 2, 0, 1), 7);
    // A batch stride that runs past A's allocation: CUBLAS_STATUS_EXECUTION_FAILED.
    assert.equal(gemm(0, 0, 2, 2, 3, 1, a, 2, 6, b, 3, 0, 0, c, 2, 4, 2), 13);
    for (const pointer of [a, b, c, c3]) assert.equal(driver.cuMemFree_v2(pointer), 0);
  },
});

Deno.test({
  name:
    `text_direction: the stand-in driver runs kernels from their CUDA C and fails a launch that writes past a buffer or gets a host pointer${STAND_IN}`,
  ignore: LIBS === undefined,
  fn(): void {
    const driver = openStandInDriver(LIBS!.driver);
    const cuda = openCuda(LIBS!);
    const compiled = compileKernels(cuda.nvrtc, SOURCE, [9, 0]);
    assert.equal(compiled.target, "sm_90");
    const module = new BigUint64Array(1);
    assert.equal(driver.cuModuleLoadData(module, compiled.image), 0);
    const fn = new BigUint64Array(1);
    const moduleHandle = Deno.UnsafePointer.create(module[0]!);
    assert.equal(driver.cuModuleGetFunction(fn, moduleHandle, cString("add_tensors")), 0);
    // No such kernel: CUDA_ERROR_NOT_FOUND.
    assert.equal(
      driver.cuModuleGetFunction(new BigUint64Array(1), moduleHandle, cString("nope")),
      500,
    );
    const add = Deno.UnsafePointer.create(fn[0]!);
    const a = upload(driver, new Float32Array([1, 2, 3, 4, 5]));
    const b = upload(driver, new Float32Array([10, 20, 30, 40, 50]));
    const y = upload(driver, new Float32Array(0), 5);
    const launch = (
      args: [bigint, bigint, bigint, number],
      threads: number,
      shared = 0,
    ): number => {
      const slots = new BigUint64Array(4);
      slots.set(args.slice(0, 3) as bigint[]);
      new Int32Array(slots.buffer, 24, 1)[0] = args[3];
      const base = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(slots)));
      const params = BigUint64Array.from([0, 1, 2, 3], (i) => base + BigInt(8 * i));
      return driver.cuLaunchKernel(add, 1, 1, 1, threads, 1, 1, shared, null, params, null);
    };
    // 8 threads, total 5: three return early.
    assert.equal(launch([a, b, y, 5], 8), 0);
    assert.deepEqual([...download(driver, y, 5)], [11, 22, 33, 44, 55]);
    // total 6 writes y[5], one past y: CUDA_ERROR_ILLEGAL_ADDRESS, at the launch.
    assert.equal(launch([a, b, y, 6], 8), 700);
    assert.equal(driver.cuMemFree_v2(y), 700, "the overrun allocation reports it when freed");
    const y2 = upload(driver, new Float32Array(0), 5);
    // A host pointer as an argument: CUDA_ERROR_ILLEGAL_ADDRESS before any thread runs.
    const host = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(new Float32Array(5))));
    assert.equal(launch([host, b, y2, 5], 8), 700);
    // Dynamic shared memory is not emulated: CUDA_ERROR_INVALID_VALUE.
    assert.equal(launch([a, b, y2, 5], 8, 16), 1);
    // 2048 threads in a block is over the limit of 1024.
    assert.equal(launch([a, b, y2, 5], 2048), 1);
    // A real CUBIN cannot run here: CUDA_ERROR_INVALID_IMAGE.
    const elf = new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]);
    assert.equal(driver.cuModuleLoadData(new BigUint64Array(1), elf), 200);
    for (const pointer of [a, b, y2]) assert.equal(driver.cuMemFree_v2(pointer), 0);
  },
});
