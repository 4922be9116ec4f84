/**
 * The benchmark's venv setup on a fresh clone: it creates the venv instead of crashing on the
 * interpreter that does not exist yet, and a venv it cannot make is a reason, not an exception.
 */

import assert from "node:assert/strict";
import { ensureVenv } from "../bench/venv.ts";
import { PEERS_REQUIRED } from "./_helpers.ts";

const python3 = await new Deno.Command("python3", { args: ["-c", "import venv"] }).output()
  .then((result) => result.success, () => false);

Deno.test({
  name: "ensureVenv() creates a missing venv" + (python3 ? "" : " (skipped: no python3 with venv)"),
  ignore: !python3 && !PEERS_REQUIRED,
  async fn(): Promise<void> {
    const dir = await Deno.makeTempDir({ prefix: "denotriton_venv_" });
    try {
      const lines: string[] = [];
      const result = await ensureVenv({
        dir: `${dir}/venv`,
        packages: [],
        probe: "import sys; sys.exit(0 if sys.prefix != sys.base_prefix else 1)",
        log: (line) => lines.push(line),
      });
      assert.deepEqual(result, { python: `${dir}/venv/bin/python` });
      assert.deepEqual(lines, [`bench: creating the venv ${dir}/venv ...`]);
      assert.ok((await Deno.stat(`${dir}/venv/bin/python`)).isFile);
      // A second call finds it ready.
      lines.length = 0;
      assert.deepEqual(
        await ensureVenv({
          dir: `${dir}/venv`,
          packages: [],
          probe: "import sys",
          log: (line) => lines.push(line),
        }),
        { python: `${dir}/venv/bin/python` },
      );
      assert.deepEqual(lines, []);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("ensureVenv() answers why when the venv cannot be made", async () => {
  const dir = await Deno.makeTempDir({ prefix: "denotriton_venv_" });
  try {
    const missing = await ensureVenv({
      dir: `${dir}/venv`,
      packages: ["nvidia-pytriton==0.7.0"],
      probe: "import pytriton",
      python: `${dir}/no-such-python3`,
      log: () => {},
    });
    assert.ok("missing" in missing);
    assert.match(
      missing.missing,
      new RegExp(`^Cannot create the venv ${dir}/venv: Cannot run ${dir}/no-such-python3: `),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
