/**
 * The text_direction example's GPU backend (the stand-ins themselves are checked in
 * cuda_stand_in_test.ts). On every host: its kernels compiled with the real
 * NVRTC (which runs without a GPU, when installed), and the whole GPU path — NVRTC, module load,
 * kernel parameters and launch geometry, cuBLAS layouts, buffer sizes, the Worker's current
 * device — run against the stand-ins of tests/_gpu/ (the kernels' own source compiled for the CPU,
 * column-major SGEMM, device memory with guards) and compared with the CPU backend. On a host with
 * a GPU, cuBLAS and NVRTC: the same on the real GPU, direct and served. What cannot run here is
 * skipped with one line naming what is missing.
 *
 * @module
 */

import assert from "node:assert/strict";
import { discoverGpus } from "../mod.ts";
import { ENGINES, PEERS_REQUIRED, startServer } from "./_helpers.ts";
import { buildStandInLibraries, standInMissing } from "./_gpu/stand_in.ts";
import { openStandInDriver } from "./_gpu/driver_calls.ts";
import type { RgbImage } from "../examples/ocr/image.ts";
import { fontAvailable } from "../examples/ocr/render.ts";
import { loadClassifierPlan, openBackend } from "../examples/text_direction/classifier.ts";
import { renderedCrops, runClient } from "../examples/text_direction/client.ts";
import { CpuBackend } from "../examples/text_direction/cpu.ts";
import { compileKernels, openCuda, openNvrtc } from "../examples/text_direction/cuda.ts";
import { GpuBackend, KERNELS, KERNELS_SOURCE } from "../examples/text_direction/gpu.ts";
import { bindTextDirection } from "../examples/text_direction/model.ts";
import { planModel } from "../examples/text_direction/plan.ts";
import { classifierInput, CLS_SAMPLE } from "../examples/text_direction/preprocess.ts";
import { openGpuLibrary } from "../examples/_gpu/libraries.ts";

const LIBS = await buildStandInLibraries();
const STAND_IN = LIBS === undefined ? ` (skipped: stand-ins not built: ${standInMissing})` : "";
const FONT = fontAvailable();
const SOURCE = Deno.readTextFileSync(KERNELS_SOURCE);
const PLAN = loadClassifierPlan();
const CPU = new CpuBackend(PLAN);
const UPRIGHT_THEN_TURNED = ["0", "180", "0", "180", "0", "180", "0", "180"];

/** Rendered lines (upright, upside down) when the font is there, then noise: `count` samples. */
function inputs(count: number, seed: number): Float32Array {
  const out = new Float32Array(count * CLS_SAMPLE);
  const crops = FONT ? renderedCrops().slice(0, count) : [];
  out.set(classifierInput(crops));
  let state = seed;
  for (let i = crops.length * CLS_SAMPLE; i < out.length; i++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    out[i] = (state / 2 ** 32) * 2 - 1;
  }
  return out;
}

/** Text lines when the font is there, else `count` crops of noise (their answers still compare). */
function someCrops(count = 8): RgbImage[] {
  if (FONT) return renderedCrops();
  let state = 5;
  return Array.from({ length: count }, () => ({
    width: 200,
    height: 40,
    data: Uint8Array.from({ length: 200 * 40 * 3 }, () => {
      state = (Math.imul(state, 1103515245) + 12345) >>> 0;
      return state >>> 24;
    }),
  }));
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
  return Number.isNaN(max) || a.some(Number.isNaN) ? NaN : max;
}

// ---- The GPU backend on the stand-ins -----------------------------------------------------------

Deno.test({
  name:
    `text_direction: the GPU backend on the stand-ins matches the CPU backend and frees what it allocated${STAND_IN}`,
  ignore: LIBS === undefined,
  fn(): void {
    const driver = openStandInDriver(LIBS!.driver);
    const live = driver.stand_in_memory_live_count();
    {
      using gpu = GpuBackend.create(PLAN, { libraries: LIBS! });
      assert.deepEqual(
        { target: gpu.info.target, kernels: gpu.info.kernels, nvrtc: gpu.info.nvrtcVersion },
        { target: "sm_90", kernels: 8, nvrtc: "12.8" },
      );
      // 5 then 8 grows the buffers; 1 reuses them.
      for (const [batch, seed] of [[5, 1], [8, 2], [1, 3]] as const) {
        const x = inputs(batch, seed);
        const diff = maxDiff(gpu.run(x, batch), CPU.run(x, batch));
        assert.ok(diff < 1e-5, `batch ${batch}: max abs diff ${diff}`);
      }
      assert.throws(() => gpu.run(new Float32Array(10), 1), /Input has 10 values, not 1 x 27648/);
    }
    assert.equal(driver.stand_in_memory_live_count(), live);
  },
});

Deno.test({
  name:
    `text_direction: a kernel that writes one value past its output fails the batch, naming the launch${STAND_IN}`,
  ignore: LIBS === undefined,
  fn(): void {
    // im2col writes col[i]; shifted by one, the last thread's value lands past the workspace
    // (sized for the batch: 27 rows of 24 x 96 per sample).
    const broken = SOURCE.replace("col[i] = inside ?", "col[i + 1] = inside ?");
    assert.notEqual(broken, SOURCE);
    using gpu = GpuBackend.create(PLAN, { libraries: LIBS!, source: broken });
    assert.throws(
      () => gpu.run(inputs(2, 5), 2),
      { message: "cuLaunchKernel (im2col) failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)" },
    );
  },
});

Deno.test({
  name:
    `text_direction: an instance pinned to a GPU runs on the CPU with one line naming what is missing${STAND_IN}`,
  ignore: LIBS === undefined,
  fn(): void {
    const gpu = { index: 0, name: "Stand-in GPU 0" };
    const note = (libraries: Record<string, string>): string | undefined => {
      const opened = openBackend(PLAN, { pinnedToGpu: true, gpu, libraries });
      (opened.backend as Partial<Disposable>)[Symbol.dispose]?.();
      assert.ok(!opened.note?.includes("\n"), `${opened.note}`);
      return `${opened.kind}: ${opened.note}`;
    };
    assert.equal(
      `${openBackend(PLAN, { pinnedToGpu: false }).kind}`,
      "cpu",
    );
    assert.equal(
      openBackend(PLAN, { pinnedToGpu: true, gpu: undefined }).note,
      "this host has no GPU; running on the CPU",
    );
    assert.match(
      note({ ...LIBS!, driver: "/nonexistent/libcuda.so.1" })!,
      /^cpu: no CUDA driver \(\/nonexistent\/libcuda\.so\.1: .+\); running on the CPU$/,
    );
    assert.equal(
      note({ ...LIBS!, cublas: "/nonexistent/libcublas.so.13" }),
      "cpu: no cuBLAS: cuBLAS not found at /nonexistent/libcublas.so.13; running on the CPU",
    );
    assert.equal(
      note({ ...LIBS!, nvrtc: "/nonexistent/libnvrtc.so.13" }),
      "cpu: no NVRTC: NVRTC not found at /nonexistent/libnvrtc.so.13; running on the CPU",
    );
    // A library that is not cuBLAS (it lacks cuBLAS's functions).
    assert.match(
      note({ ...LIBS!, cublas: LIBS!.nvrtc })!,
      /^cpu: no cuBLAS: cuBLAS not found at \S+libdenotriton_nvrtc_stand_in\.so: .*Failed to register symbol cublas\w+.*; running on the CPU$/,
    );
    assert.equal(
      note(LIBS! as unknown as Record<string, string>),
      `gpu: cuBLAS SGEMM and 8 NVRTC 12.8 kernels (sm_90) on Stand-in GPU 0 (${LIBS!.cublas}, ${
        LIBS!.nvrtc
      })`,
    );
  },
});

Deno.test({
  name:
    `text_direction: served from Workers pinned to a stand-in cuda:1 and to the CPU, both answer alike${STAND_IN}`,
  ignore: LIBS === undefined,
  async fn(): Promise<void> {
    const gpus = discoverGpus({ driverLibrary: LIBS!.driver });
    await using triton = await startServer({ engine: "builtin", gpus });
    await bindTextDirection(triton, { devices: ["cuda:1", "cpu"], libraries: LIBS! });
    const crops = someCrops();
    const expected = CPU.run(classifierInput(crops), crops.length);
    const seen = new Set<string>();
    for (let round = 0; round < 20 && seen.size < 2; round++) {
      const answers = await Promise.all(
        [0, 1, 2, 3].map(() => runClient(triton.urls.http!, crops)),
      );
      for (const batch of answers) {
        if (FONT) assert.deepEqual(batch.map((a) => a.label), UPRIGHT_THEN_TURNED);
        const probs = Float32Array.from(batch.flatMap((a) => a.probs));
        assert.ok(
          maxDiff(probs, expected) < 1e-5,
          `${batch[0]!.device}: ${maxDiff(probs, expected)}`,
        );
        for (const answer of batch) seen.add(answer.device);
      }
    }
    assert.deepEqual([...seen].sort(), ["cpu CPU", "cuda:1 GPU"]);
  },
});

// ---- Shapes the classifier does not have -------------------------------------------------------

/** A direct convolution, NCHW, one sample: the reference for the test below. */
function directConv(
  x: Float32Array,
  [channels, height, width]: [number, number, number],
  w: Float32Array,
  [outChannels, perGroup, kh, kw]: number[],
  [sh, sw]: number[],
  [ph, pw]: number[],
): { y: Float32Array; shape: [number, number, number] } {
  const oh = Math.floor((height + 2 * ph! - kh!) / sh!) + 1;
  const ow = Math.floor((width + 2 * pw! - kw!) / sw!) + 1;
  const y = new Float32Array(outChannels! * oh * ow);
  const groups = channels! / perGroup!;
  for (let o = 0; o < outChannels!; o++) {
    const group = Math.floor(o / (outChannels! / groups));
    for (let oy = 0; oy < oh; oy++) {
      for (let ox = 0; ox < ow; ox++) {
        let sum = 0;
        for (let i = 0; i < perGroup!; i++) {
          const c = group * perGroup! + i;
          for (let ky = 0; ky < kh!; ky++) {
            for (let kx = 0; kx < kw!; kx++) {
              const iy = oy * sh! - ph! + ky;
              const ix = ox * sw! - pw! + kx;
              if (iy < 0 || iy >= height! || ix < 0 || ix >= width!) continue;
              sum += x[(c * height! + iy) * width! + ix]! *
                w[((o * perGroup! + i) * kh! + ky) * kw! + kx]!;
            }
          }
        }
        y[(o * oh + oy) * ow + ox] = Math.max(0, sum);
      }
    }
  }
  return { y, shape: [outChannels!, oh, ow] };
}

Deno.test("text_direction: both backends compute convolutions of shapes the classifier lacks as a direct loop does (stride 2 across, a 2 x 4 depthwise kernel)", () => {
  let state = 3;
  const random = (count: number): Float32Array =>
    Float32Array.from({ length: count }, () => {
      state = (Math.imul(state, 1103515245) + 12345) >>> 0;
      return (state / 2 ** 32) * 2 - 1;
    });
  // x [2, 7, 9] → full 3x3, stride (1, 2) → depthwise 3x3, stride (2, 1) → depthwise 2x4,
  // stride (1, 2), padding (1, 2); each followed by ReLU.
  const layers = [
    { dims: [4, 2, 3, 3], group: 1, strides: [1, 2], pads: [1, 1] },
    { dims: [4, 1, 3, 3], group: 4, strides: [2, 1], pads: [1, 1] },
    { dims: [4, 1, 2, 4], group: 4, strides: [1, 2], pads: [1, 2] },
  ].map((layer) => ({ ...layer, weights: random(layer.dims.reduce((a, b) => a * b, 1)) }));
  const nodes = layers.flatMap((layer, i) => [
    {
      name: `conv${i}`,
      opType: "Conv",
      inputs: [i === 0 ? "x" : `relu${i - 1}`, `w${i}`],
      outputs: [`conv${i}`],
      attributes: new Map<string, number | number[]>([
        ["group", layer.group],
        ["strides", layer.strides],
        ["pads", [...layer.pads, ...layer.pads]],
      ]),
    },
    {
      name: `relu${i}`,
      opType: "Relu",
      inputs: [`conv${i}`],
      outputs: [`relu${i}`],
      attributes: new Map(),
    },
  ]);
  const plan = planModel({
    opset: 9,
    producer: "test",
    nodes,
    initializers: new Map(
      layers.map((layer, i) => [`w${i}`, { name: `w${i}`, dims: layer.dims, data: layer.weights }]),
    ),
    inputs: [{ name: "x", dims: [-1, 2, 7, 9] }],
    outputs: [{ name: "relu2", dims: [-1, 4, 5, 3] }],
  }, [2, 7, 9]);
  assert.deepEqual(plan.output.shape, [4, 5, 3]);
  const batch = 3;
  const x = random(batch * 2 * 7 * 9);
  const expected = new Float32Array(batch * 4 * 5 * 3);
  for (let n = 0; n < batch; n++) {
    let value: Float32Array = x.slice(n * 126, (n + 1) * 126);
    let shape: [number, number, number] = [2, 7, 9];
    for (const layer of layers) {
      ({ y: value, shape } = directConv(
        value,
        shape,
        layer.weights,
        layer.dims,
        layer.strides,
        layer.pads,
      ));
    }
    expected.set(value, n * 60);
  }
  const cpu = maxDiff(new CpuBackend(plan).run(x, batch), expected);
  assert.ok(cpu < 1e-5, `CPU: max abs diff ${cpu}`);
  if (LIBS === undefined) {
    console.log(`GPU backend not checked here: stand-ins not built: ${standInMissing}`);
    return;
  }
  openStandInDriver(LIBS!.driver);
  using gpu = GpuBackend.create(plan, { libraries: LIBS });
  const diff = maxDiff(gpu.run(x, batch), expected);
  assert.ok(diff < 1e-5, `GPU (stand-ins): max abs diff ${diff}`);
});

// ---- The kernels with the real NVRTC --------------------------------------------------------------

/** The real NVRTC: the usual search, then where .ci/run installs the wheel. */
function realNvrtc(): { path: string } | { missing: string } {
  const local = new URL("../.cache/nvrtc/nvidia/cu13/lib/libnvrtc.so.13", import.meta.url).pathname;
  for (const path of [undefined, local]) {
    try {
      return { path: openGpuLibrary("nvrtc", {}, path).path };
    } catch (error) {
      if (path === local) return { missing: (error as Error).message };
    }
  }
  return { missing: "unreachable" };
}

const NVRTC = realNvrtc();
const nvrtcMissing = "missing" in NVRTC ? ` (skipped: ${NVRTC.missing})` : "";

Deno.test({
  name:
    `text_direction: kernels.cu compiles with the real NVRTC to a CUBIN for sm_90 and to PTX with every kernel${nvrtcMissing}`,
  // CI installs NVRTC (.ci/run): there a missing one fails the test instead of skipping it.
  ignore: "missing" in NVRTC && !PEERS_REQUIRED,
  fn(): void {
    assert.ok(!("missing" in NVRTC), `The test needs NVRTC:${nvrtcMissing}`);
    const nvrtc = openNvrtc(NVRTC.path);
    const cubin = compileKernels(nvrtc, SOURCE, [9, 0]);
    assert.equal(cubin.target, "sm_90");
    assert.equal(cubin.log, "");
    // An ELF file for EM_CUDA (190).
    assert.deepEqual([...cubin.image.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46]);
    assert.equal(new DataView(cubin.image.buffer).getUint16(18, true), 190);
    const strings = new TextDecoder("latin1").decode(cubin.image);
    for (const name of Object.keys(KERNELS)) assert.ok(strings.includes(`${name}\0`), name);
    // An architecture newer than this NVRTC knows: PTX for the newest it knows below it.
    const ptx = compileKernels(nvrtc, SOURCE, [99, 9]);
    assert.match(ptx.target, /^compute_\d+$/);
    const text = new TextDecoder().decode(ptx.image);
    assert.ok(text.endsWith("\0"), "PTX ends with its NUL");
    const entries = [...text.matchAll(/\.entry (\w+)\(/g)].map((match) => match[1]).sort();
    assert.deepEqual(entries, Object.keys(KERNELS).sort());
    // A mistake in the source is NVRTC's error, with its log.
    assert.throws(
      () =>
        compileKernels(nvrtc, `${SOURCE}\nextern "C" __global__ void bad() { undeclared = 1; }`, [
          9,
          0,
        ]),
      /nvrtcCompileProgram \(kernels\.cu, sm_90\) failed: NVRTC_ERROR_COMPILATION \(6\):\n.*undeclared/s,
    );
  },
});

Deno.test("text_direction: the launch table KERNELS matches each kernel's parameters in kernels.cu", () => {
  const kinds: Record<string, string> = {
    "const float*": "p",
    "float*": "p",
    int: "i",
    float: "f",
  };
  const declared: Record<string, string> = {};
  for (const match of SOURCE.matchAll(/extern "C" __global__ void (\w+)\(([^)]*)\)/g)) {
    declared[match[1]!] = match[2]!.split(",").map((parameter) => {
      const type = parameter.replace(/__restrict__/g, "").trim().replace(/\s*\w+$/, "")
        .replace(/\s+\*/g, "*");
      assert.ok(type in kinds, `${match[1]}: parameter type '${type}'`);
      return kinds[type];
    }).join("");
  }
  assert.deepEqual(declared, { ...KERNELS });
});

// ---- On a real GPU ---------------------------------------------------------------------------------

const HOST = discoverGpus();
function realGpuMissing(): string | undefined {
  if (HOST.devices.length === 0) return `this host has no GPU (${HOST.reason})`;
  try {
    openCuda();
  } catch (error) {
    return (error as Error).message;
  }
  return undefined;
}
const GPU_MISSING = realGpuMissing();
const gpuSkipped = GPU_MISSING === undefined
  ? ""
  : ` (skipped, GPU path not verified: ${GPU_MISSING})`;

Deno.test({
  name:
    `text_direction: on this host's GPU the GPU backend matches the CPU backend at batches 1, 8 and 64${gpuSkipped}`,
  ignore: GPU_MISSING !== undefined,
  fn(): void {
    using gpu = GpuBackend.create(PLAN, { device: 0 });
    console.log(`GPU backend: ${JSON.stringify(gpu.info)}`);
    for (const [batch, seed] of [[1, 1], [8, 2], [64, 3]] as const) {
      const x = inputs(batch, seed);
      const diff = maxDiff(gpu.run(x, batch), CPU.run(x, batch));
      console.log(`batch ${batch}: GPU vs CPU max abs diff ${diff.toExponential(2)}`);
      assert.ok(diff < 1e-4, `batch ${batch}: max abs diff ${diff}`);
    }
  },
});

for (const engine of ENGINES) {
  Deno.test({
    name:
      `text_direction: served on the ${engine} engine from a Worker on this host's cuda:0, answered on the GPU${gpuSkipped}`,
    ignore: GPU_MISSING !== undefined,
    async fn(): Promise<void> {
      await using triton = await startServer({ engine });
      await bindTextDirection(triton, { devices: ["cuda:0"] });
      const crops = someCrops();
      const expected = CPU.run(classifierInput(crops), crops.length);
      for (const url of [triton.urls.http!, triton.urls.grpc!]) {
        const answers = await runClient(url, crops);
        if (FONT) assert.deepEqual(answers.map((a) => a.label), UPRIGHT_THEN_TURNED);
        assert.deepEqual(new Set(answers.map((a) => a.device)), new Set(["cuda:0 GPU"]));
        const diff = maxDiff(Float32Array.from(answers.flatMap((a) => a.probs)), expected);
        assert.ok(diff < 1e-4, `max abs diff ${diff}`);
      }
    },
  });
}
