// A new user's first run of the Triton engine on a CPU host shows no error lines: the core's log
// goes through our logger, and its two known-harmless lines show only at verbose level 1.

import assert from "node:assert/strict";
import { ENGINES } from "./_helpers.ts";
import { discoverGpus } from "../mod.ts";

const SERVER = new URL("./_first_run_server.ts", import.meta.url).pathname;

async function firstRun(verbose: number): Promise<{ stdout: string; stderr: string }> {
  const result = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", SERVER, "triton", String(verbose)],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(120_000),
  }).output();
  const decoder = new TextDecoder();
  const out = { stdout: decoder.decode(result.stdout), stderr: decoder.decode(result.stderr) };
  assert.equal(result.code, 0, out.stderr);
  assert.equal(out.stdout, "[2,4]\n", out.stderr);
  return out;
}

Deno.test({
  name: "A Triton-engine start on a CPU host prints no error line",
  ignore: !ENGINES.includes("triton"),
  async fn(): Promise<void> {
    const { stderr } = await firstRun(0);
    assert.deepEqual(stderr.split("\n").filter((line) => /^E/.test(line)), [], stderr);
    assert.doesNotMatch(stderr, /CudaDriverHelper|model_config_content_name_/);
    assert.match(stderr, /^I\S+ \S+ triton\] Started Triton 2\.51\.0 in-process/m);
  },
});

Deno.test({
  name: "The core's log lines go through our logger: the harmless ones at verbose level 1",
  ignore: !ENGINES.includes("triton"),
  async fn(): Promise<void> {
    const { stderr } = await firstRun(1);
    assert.deepEqual(stderr.split("\n").filter((line) => /^E/.test(line)), [], stderr);
    // The core says so only where CUDA is not there to initialize. (On an H200 host this test
    // failed; the run was cut off before its error was printed, and this is the line that
    // depends on CUDA.)
    if (discoverGpus().devices.length === 0) {
      assert.match(
        stderr,
        /^V\S+ \S+ triton\] Triton core \(server\.cc:\d+\): CudaDriverHelper has not been initialized\.$/m,
      );
    }
    assert.match(
      stderr,
      /^V\S+ \S+ triton\] Triton core \(model_repository_manager\.cc:\d+\): Failed to set config modification time: model_config_content_name_ is empty$/m,
    );
  },
});
