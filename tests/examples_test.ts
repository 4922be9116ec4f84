import assert from "node:assert/strict";
import { ENGINES, startServer, watchdog } from "./_helpers.ts";
import { discoverGpus } from "../mod.ts";
import { bindAddSub } from "../examples/add_sub/model.ts";
import { runClient as addSubClient } from "../examples/add_sub/client.ts";
import { bindIdentity } from "../examples/identity/model.ts";
import { runClient as identityClient } from "../examples/identity/client.ts";
import { bindAddSubOptional } from "../examples/add_sub_optionals/model.ts";
import { runClient as optionalsClient } from "../examples/add_sub_optionals/client.ts";
import { bindMultipliers } from "../examples/multiple_models/model.ts";
import { runClient as multipliersClient } from "../examples/multiple_models/client.ts";
import { bindParamsAndHeaders, HEADER_PATTERN } from "../examples/parameters_headers/model.ts";
import { runClient as paramsClient } from "../examples/parameters_headers/client.ts";
import { bindLinear } from "../examples/multi_instance/model.ts";
import { runClient as linearClient } from "../examples/multi_instance/client.ts";
import { bindLinearGpu } from "../examples/linear_gpu/model.ts";
import { runClient as linearGpuClient } from "../examples/linear_gpu/client.ts";
import { cublasCandidates } from "../examples/linear_gpu/cublas.ts";
import { bindStreaming } from "../examples/streaming/model.ts";
import { runClient as streamingClient } from "../examples/streaming/client.ts";
import { bindAccumulator } from "../examples/accumulator/model.ts";
import { runClient as accumulatorClient } from "../examples/accumulator/client.ts";

const decoder = new TextDecoder();

for (const engine of ENGINES) {
  Deno.test(`examples on the ${engine} engine`, async (t) => {
    await using triton = await startServer({
      engine,
      config: {
        httpHeaderForwardPattern: HEADER_PATTERN,
        grpcHeaderForwardPattern: HEADER_PATTERN,
      },
    });
    await bindAddSub(triton);
    await bindIdentity(triton);
    await bindAddSubOptional(triton);
    await bindMultipliers(triton);
    await bindParamsAndHeaders(triton);
    await bindStreaming(triton);
    await bindAccumulator(triton);
    const urls = [triton.urls.http!, ...(triton.urls.grpc ? [triton.urls.grpc] : [])];
    for (const url of urls) {
      const protocol = url.split(":")[0];
      await t.step(`add_sub over ${protocol}`, async () => {
        const out = await addSubClient(url);
        assert.deepEqual(out.add!.shape, [2, 2]);
        assert.deepEqual(Array.from(out.add!.data as Float32Array), [2, 2, 3, 3]);
        assert.deepEqual(Array.from(out.sub!.data as Float32Array), [0, 0, 1, 1]);
      });
      await t.step(`identity over ${protocol}`, async () => {
        const out = await identityClient(url);
        assert.deepEqual(Array.from(out.values!.data as Float64Array), [0.5, -1.25, 1e300]);
        assert.deepEqual(
          (out.texts!.data as Uint8Array[]).map((b) => decoder.decode(b)),
          ["hello", "nul\0inside", ""],
        );
      });
      await t.step(`add_sub_optionals over ${protocol}`, async () => {
        assert.deepEqual(await optionalsClient(url), [[4, 2], [6, 4], [7, 5], [9, 7]]);
      });
      await t.step(`multiple_models over ${protocol}`, async () => {
        assert.deepEqual(await multipliersClient(url), { Multiply2: 2, Multiply4: 4 });
      });
      await t.step(`parameters_headers over ${protocol}`, async () => {
        assert.deepEqual(await paramsClient(url), [3, 1]);
      });
      await t.step(`streaming over ${protocol}`, async () => {
        const arrived: string[] = [];
        const tokens = await streamingClient(url, "Once", (token) => arrived.push(token));
        assert.deepEqual(tokens, ["upon", "a", "time", "there", "was", "a"]);
        assert.deepEqual(arrived, tokens);
        assert.deepEqual(await streamingClient(url, "hello"), ["world", "."]);
      });
      await t.step(`accumulator over ${protocol}`, async () => {
        assert.deepEqual(await accumulatorClient(url), {
          1001: [1, 3, 6, 10],
          1002: [10, 30, 60, 100],
          1003: [100, 0, 7, 7],
        });
      });
    }
  });
}

Deno.test("examples/add_sub/server.ts serves and exits 0 on SIGINT", async () => {
  const command = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("../examples/add_sub/server.ts", import.meta.url).pathname],
    env: {
      DENOTRITON_ENGINE: "builtin",
      DENOTRITON_TRITON_CONFIG_HTTP_PORT: "0",
      DENOTRITON_TRITON_CONFIG_GRPC_PORT: "0",
      DENOTRITON_TRITON_CONFIG_METRICS_PORT: "0",
      DENOTRITON_TRITON_CONFIG_HTTP_ADDRESS: "127.0.0.1",
      DENOTRITON_TRITON_CONFIG_GRPC_ADDRESS: "127.0.0.1",
    },
    stdout: "null",
    stderr: "piped",
    // Killed if the test hangs: the watchdogs below then fail it.
    signal: AbortSignal.timeout(120_000),
  });
  const child = command.spawn();
  const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let log = "";
  let url: string | undefined;
  try {
    while (url === undefined) {
      const { value, done } = await watchdog(reader.read(), "the server's log");
      if (done) break;
      log += value;
      url = log.match(/HTTP\/REST \(KServe v2\) listening at (http:\/\/\S+)/)?.[1];
    }
    assert.ok(url, `the server never said where it listens:\n${log}`);
    const ready = await fetch(`${url}/v2/models/AddSub/ready`);
    await ready.body?.cancel();
    assert.equal(ready.status, 200);
    child.kill("SIGINT");
    const drain = (async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        log += value;
      }
    })();
    const status = await watchdog(child.status, "the server to exit");
    await watchdog(drain, "the server's log to end");
    assert.equal(status.code, 0, log);
    assert.match(log, /Server stopped/);
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // Already exited.
    }
    await reader.cancel().catch(() => {});
  }
});

for (const engine of ENGINES) {
  Deno.test(`examples/multi_instance on the ${engine} engine`, async () => {
    await using triton = await startServer({ engine });
    await bindLinear(triton);
    for (const url of [triton.urls.http!, triton.urls.grpc!]) {
      const { ys, devices } = await linearClient(url);
      assert.deepEqual(ys, [0, 1, 2, 3, 4, 5, 6, 7].map((i) => [1, 1, 1, 1].map((b) => b + 2 * i)));
      for (const device of devices) assert.ok(["cuda:0#0", "cuda:0#1"].includes(device), device);
    }
  });
}

/** Where the example's cuBLAS is on this host, or why the GPU part is skipped. */
function cublasHere(): { found: true } | { found: false; why: string } {
  const gpus = discoverGpus();
  if (gpus.devices.length === 0) {
    return { found: false, why: `this host has no GPUs (${gpus.reason})` };
  }
  for (const path of cublasCandidates()) {
    try {
      Deno.dlopen(path, {}).close();
      return { found: true };
    } catch {
      // The next candidate.
    }
  }
  return { found: false, why: "no cuBLAS found (set CUBLAS_LIBRARY)" };
}

const CUBLAS = cublasHere();

for (const engine of ENGINES) {
  Deno.test(`examples/linear_gpu on the ${engine} engine: the CPU fallback matches the CPU reference`, async () => {
    // No GPUs given: the instances pinned to cuda:0 run on the CPU on every host.
    await using triton = await startServer({ engine, gpus: { devices: [] } });
    await bindLinearGpu(triton);
    for (const url of [triton.urls.http!, triton.urls.grpc!]) {
      const { maxError, devices, samples } = await linearGpuClient(url);
      assert.equal(samples, 128);
      assert.deepEqual(devices, ["cuda:0 CPU"]);
      assert.ok(maxError < 1e-5, `max error ${maxError}`);
    }
  });

  Deno.test({
    name: `examples/linear_gpu on the ${engine} engine: cuBLAS on the GPU matches the CPU${
      CUBLAS.found ? "" : ` (skipped, GPU path not verified: ${CUBLAS.why})`
    }`,
    ignore: !CUBLAS.found,
    async fn(): Promise<void> {
      await using triton = await startServer({ engine });
      await bindLinearGpu(triton);
      for (const url of [triton.urls.http!, triton.urls.grpc!]) {
        const { maxError, devices } = await linearGpuClient(url);
        assert.deepEqual(devices, ["cuda:0 cuBLAS"]);
        // sgemm sums in another order than the CPU reference (float64 sums), in float32.
        assert.ok(maxError < 1e-4, `max error ${maxError}`);
      }
    },
  });
}
