import assert from "node:assert/strict";
import { currentGpu, discoverGpus, makeGpuCurrent } from "./cuda.ts";
import { buildStandInDriver, standInMissing } from "../../tests/_gpu/stand_in.ts";

Deno.test("discoverGpus(): this host's GPUs, or none with the reason", () => {
  const gpus = discoverGpus();
  if (gpus.devices.length === 0) {
    // A CPU host: no error, one reason for the log line.
    assert.equal(typeof gpus.reason, "string");
    assert.ok(gpus.reason!.length > 0);
    console.log(`No GPUs on this host (GPU path not verified): ${gpus.reason}`);
    return;
  }
  assert.equal(gpus.reason, undefined);
  gpus.devices.forEach((gpu, index) => {
    assert.equal(gpu.index, index);
    assert.ok(gpu.name.length > 0);
    assert.ok(gpu.totalMemoryBytes > 0);
    assert.ok(gpu.computeCapability[0] >= 3);
  });
  assert.equal(discoverGpus(), gpus, "discovered once per process");
});

Deno.test("discoverGpus(): a driver that cannot be loaded means no GPUs", () => {
  const gpus = discoverGpus({ driverLibrary: "/nonexistent/libcuda.so.1" });
  assert.deepEqual(gpus.devices, []);
  assert.match(gpus.reason!, /^Cannot load the CUDA driver \/nonexistent\/libcuda\.so\.1: /);
  assert.equal(gpus.driverLibrary, undefined);
});

Deno.test("discoverGpus(): without --allow-ffi there are no GPUs, and nothing prompts", async () => {
  const script = await Deno.makeTempFile({ suffix: ".ts" });
  await Deno.writeTextFile(
    script,
    `import { discoverGpus } from ${JSON.stringify(import.meta.resolve("./cuda.ts"))};
console.log(JSON.stringify(discoverGpus()));`,
  );
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-prompt", script],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  await Deno.remove(script);
  assert.equal(code, 0, new TextDecoder().decode(stderr));
  assert.deepEqual(JSON.parse(new TextDecoder().decode(stdout)), {
    devices: [],
    reason: "GPU discovery needs --allow-ffi",
  });
});

const standIn = await buildStandInDriver();

Deno.test({
  name: "discoverGpus() reads names, memory, compute capability and UUIDs (stand-in driver)",
  ignore: standIn === undefined,
  fn(): void {
    const gpus = discoverGpus({ driverLibrary: standIn! });
    assert.deepEqual(gpus, {
      devices: [0, 1].map((index) => ({
        index,
        name: `Stand-in GPU ${index}`,
        totalMemoryBytes: (index + 1) * 16 * 2 ** 30,
        computeCapability: [9, 0],
        uuid: index === 0
          ? "GPU-00102030-4050-6070-8090-a0b0c0d0e0f0"
          : "GPU-01112131-4151-6171-8191-a1b1c1d1e1f1",
      })),
      driverLibrary: standIn,
    });
  },
});

Deno.test({
  name: "discoverGpus(): cuInit failing means no GPUs, named by the driver (stand-in driver)",
  ignore: standIn === undefined,
  async fn(): Promise<void> {
    const failing = (await buildStandInDriver({ initError: 100 }))!;
    assert.deepEqual(discoverGpus({ driverLibrary: failing }), {
      devices: [],
      driverLibrary: failing,
      reason: "cuInit failed: CUDA_ERROR_NO_DEVICE (100)",
    });
  },
});

Deno.test({
  name: "makeGpuCurrent() sets the thread's current device; currentGpu() reads it (stand-in)",
  ignore: standIn === undefined,
  fn(): void {
    assert.equal(currentGpu(standIn!), undefined);
    makeGpuCurrent(standIn!, 1);
    assert.equal(currentGpu(standIn!), 1);
    makeGpuCurrent(standIn!, 0);
    assert.equal(currentGpu(standIn!), 0);
    assert.throws(() => makeGpuCurrent(standIn!, 5), {
      name: "TritonError",
      message: "Cannot make cuda:5 current: cuDeviceGet failed: CUDA_ERROR_INVALID_DEVICE (101)",
    });
  },
});

if (standIn === undefined) {
  Deno.test({
    name: `the stand-in CUDA driver tests are skipped: ${standInMissing}`,
    ignore: true,
    fn(): void {},
  });
}
