/**
 * PyTriton's own clients against DenoTriton: `ModelClient` over HTTP and gRPC and
 * `DecoupledModelClient` over gRPC (`tests/interop/pytriton_clients.py`), on every engine.
 *
 * The interpreter: `DENOTRITON_PYTRITON_PYTHON` (`.ci/run` installs nvidia-pytriton 0.7.0 into
 * `.venv-pytriton`), else `python3` when it imports `pytriton.client`. Skipped without one unless
 * peers are required (`CI=true` or `DENOTRITON_REQUIRE_PEERS=1`).
 */

import assert from "node:assert/strict";
import { ENGINES, PEERS_REQUIRED, startServer } from "./_helpers.ts";
import { allTestModels } from "./_models.ts";
import { streamingModels } from "./_streaming_models.ts";

const SCRIPT = new URL("./interop/pytriton_clients.py", import.meta.url).pathname;

async function findPytritonPython(): Promise<string | undefined> {
  const candidates = [Deno.env.get("DENOTRITON_PYTRITON_PYTHON"), "python3"];
  for (const python of candidates) {
    if (python === undefined || python === "") continue;
    try {
      const { success } = await new Deno.Command(python, {
        args: ["-c", "import pytriton.client"],
        stdout: "null",
        stderr: "null",
        signal: AbortSignal.timeout(60_000),
      }).output();
      if (success) return python;
    } catch {
      // Not installed: try the next one.
    }
  }
  return undefined;
}

const PYTHON = await findPytritonPython();

for (const engine of ENGINES) {
  const name = `PyTriton's ModelClient and DecoupledModelClient on the ${engine} engine`;
  Deno.test({
    name: PYTHON === undefined ? `${name} (skipped: no Python with nvidia-pytriton)` : name,
    ignore: PYTHON === undefined && !PEERS_REQUIRED,
    async fn(): Promise<void> {
      assert.ok(
        PYTHON !== undefined,
        "A Python with nvidia-pytriton==0.7.0 is required: set DENOTRITON_PYTRITON_PYTHON",
      );
      await using triton = await startServer({
        engine,
        models: [...allTestModels(), ...streamingModels()],
      });
      const strip = (url: string | undefined): string => {
        assert.ok(url !== undefined, "The server needs HTTP and gRPC");
        return url.replace(/^\w+:\/\//, "");
      };
      const { code, stdout, stderr } = await new Deno.Command(PYTHON, {
        args: ["-B", SCRIPT, "--http", strip(triton.urls.http), "--grpc", strip(triton.urls.grpc)],
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(180_000),
      }).output();
      const out = new TextDecoder().decode(stdout);
      const err = new TextDecoder().decode(stderr);
      assert.equal(code, 0, `pytriton_clients.py failed:\n${out}\n${err}`);
      assert.match(out, /ok grpc DecoupledModelClient streams responses/);
      assert.match(out, /all checks passed/);
    },
  });
}
