import assert from "node:assert/strict";
import { PROTO_FILES } from "./_proto_text.ts";

Deno.test("The embedded proto text equals proto/*.proto (run `deno task gen:proto`)", async () => {
  const folder = new URL("../../proto/", import.meta.url);
  const names = [];
  for await (const entry of Deno.readDir(folder)) {
    if (entry.name.endsWith(".proto")) names.push(entry.name);
  }
  assert.deepEqual(Object.keys(PROTO_FILES).sort(), names.sort());
  for (const name of names) {
    assert.equal(PROTO_FILES[name], await Deno.readTextFile(new URL(name, folder)), name);
  }
});
