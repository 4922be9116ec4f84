import assert from "node:assert/strict";
import { loadOrder, readElfDynamic } from "./elf.ts";
import { findTritonInstall } from "./install.ts";
import { setupTriton, tritonInstallIsCurrent } from "./setup.ts";

const install = await findTritonInstall();

Deno.test("readElfDynamic reads this process's libc", async () => {
  const path = ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6"]
    .find((p) => {
      try {
        return Deno.statSync(p).isFile;
      } catch {
        return false;
      }
    });
  if (path === undefined) return;
  const info = readElfDynamic(await Deno.readFile(path));
  assert.equal(info.soname, "libc.so.6");
});

Deno.test("loadOrder puts dependencies first and skips unknown names", () => {
  const graph = new Map([["a", ["b", "c", "libc.so.6"]], ["b", ["c"]], ["c", []]]);
  assert.deepEqual(loadOrder(graph, ["a"]), ["c", "b", "a"]);
});

Deno.test({
  name: "the installed core's dependency closure is recorded leaves first",
  ignore: install === undefined,
}, async () => {
  const core = readElfDynamic(await Deno.readFile(install!.coreLibrary));
  assert.equal(core.soname, install!.coreLibrary.split("/").pop());
  const names = install!.preload.map((path) => path.split("/").pop()!);
  const position = new Map(names.map((name, index) => [name, index]));
  for (const path of install!.preload) {
    const own = position.get(path.split("/").pop()!)!;
    for (const needed of readElfDynamic(await Deno.readFile(path)).needed) {
      const at = position.get(needed);
      if (at !== undefined) assert.ok(at < own, `${needed} must load before ${path}`);
    }
  }
});

// Only where the install's bridge was built from this checkout: elsewhere setupTriton would
// rebuild it, and a test must not rewrite an install that other checkouts and processes use.
const current = install !== undefined && await tritonInstallIsCurrent(install.home);

Deno.test({
  name: "setupTriton does nothing when the install is up to date",
  ignore: !current,
}, async () => {
  const lines: string[] = [];
  const again = await setupTriton({ home: install!.home, log: (line) => lines.push(line) });
  assert.deepEqual(again, install);
  assert.match(lines.join("\n"), /nothing to do/);
});
