// Proves the gRPC front end against NVIDIA's official Python client (tritonclient.grpc):
// health, metadata, config, inference over every dtype, errors, parameters, headers, log
// settings, streaming.
// Skipped when python3 or tritonclient is missing, unless peers are required (CI=true or
// DENOTRITON_REQUIRE_PEERS=1).

import assert from "node:assert/strict";
import { ENGINES, PEERS_REQUIRED } from "./_helpers.ts";
import { startTestServer } from "./grpc_test_server.ts";
import { SharedMemoryRegistry } from "../src/shm/registry.ts";

const SCRIPT = new URL("./interop/grpc_client.py", import.meta.url).pathname;

async function tritonclientAvailable(): Promise<boolean> {
  try {
    const { success } = await new Deno.Command("python3", {
      args: ["-c", "import tritonclient.grpc"],
      stdout: "null",
      stderr: "null",
      signal: AbortSignal.timeout(60_000),
    }).output();
    return success;
  } catch {
    return false;
  }
}

const available = await tritonclientAvailable();

for (const engine of ENGINES) {
  Deno.test({
    name: `gRPC front end interoperates with tritonclient.grpc [${engine}]`,
    ignore: !available && !PEERS_REQUIRED,
    async fn(): Promise<void> {
      assert.ok(
        available,
        "python3 with tritonclient[grpc] is required (CI=true or DENOTRITON_REQUIRE_PEERS=1)",
      );
      // Serving system shared-memory regions, as a Triton server does (the script checks that
      // the metadata lists the extension).
      await using server = await startTestServer(engine, {
        sharedMemory: new SharedMemoryRegistry(),
      });
      const { code, stdout, stderr } = await new Deno.Command("python3", {
        args: ["-B", SCRIPT, "--url", `127.0.0.1:${server.frontend.port}`],
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(180_000),
      }).output();
      const out = new TextDecoder().decode(stdout);
      const err = new TextDecoder().decode(stderr);
      assert.equal(code, 0, `grpc_client.py failed:\n${out}\n${err}`);
      assert.match(out, /ok streaming/);
      assert.match(out, /all checks passed/);
    },
  });
}
