/**
 * The README's TypeScript blocks compile against this checkout under the repository's strict
 * settings, with the package specifier pointed at the local `mod.ts`; the AddSub model needs no
 * non-null assertion and no cast.
 */

import assert from "node:assert/strict";

const README = new URL("../README.md", import.meta.url);

function typeScriptBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => match[1]!);
}

Deno.test("README: every TypeScript block type-checks", async () => {
  const blocks = typeScriptBlocks(await Deno.readTextFile(README));
  assert.ok(blocks.length > 0, "the README has no TypeScript block");
  for (const [index, block] of blocks.entries()) {
    // In tests/, so that deno.json (strict options, npm imports) applies and ../mod.ts resolves.
    const file = await Deno.makeTempFile({
      dir: new URL(".", import.meta.url).pathname,
      prefix: "_readme_block_",
      suffix: ".ts",
    });
    try {
      await Deno.writeTextFile(
        file,
        block.replaceAll(
          /"jsr:@denotriton\/triton(\/client)?"/g,
          (_, client) => client ? '"../src/client/mod.ts"' : '"../mod.ts"',
        ),
      );
      const { code, stderr } = await new Deno.Command(Deno.execPath(), {
        args: ["check", "--quiet", file],
        stdout: "null",
        stderr: "piped",
      }).output();
      assert.equal(
        code,
        0,
        `README block ${index + 1} does not type-check:\n${new TextDecoder().decode(stderr)}`,
      );
    } finally {
      await Deno.remove(file);
    }
  }
});

Deno.test("README: the AddSub model has no non-null assertion and no cast", async () => {
  const addSub = typeScriptBlocks(await Deno.readTextFile(README)).find((block) =>
    block.includes('modelName: "AddSub"')
  );
  assert.ok(addSub !== undefined, "the README has no AddSub block");
  assert.doesNotMatch(addSub, /[\w)\]]!(?!=)/, "a non-null assertion");
  assert.doesNotMatch(addSub, /\bas\s+[A-Z\w]/, "a cast");
});
