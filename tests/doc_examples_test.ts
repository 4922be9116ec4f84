/**
 * Every example in the JSDoc of a public symbol imports from a public entry only (`mod.ts`, or
 * `src/client/mod.ts` for the client), so that it can be pasted into a user's code.
 */

import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url);
const ENTRIES = ["mod.ts", "src/client/mod.ts"];

interface Example {
  symbol: string;
  file: string;
  imports: string[];
}

/** Every example tag under `node`, with the file its declaration is in. */
function collect(node: unknown, symbol: string, into: Example[]): void {
  if (Array.isArray(node)) {
    for (const item of node) collect(item, symbol, into);
    return;
  }
  if (typeof node !== "object" || node === null) return;
  const record = node as Record<string, unknown>;
  const location = record.location as { filename?: string } | undefined;
  const jsDoc = record.jsDoc as { tags?: { kind: string; doc?: string }[] } | undefined;
  if (location?.filename !== undefined && jsDoc?.tags !== undefined) {
    for (const tag of jsDoc.tags) {
      if (tag.kind !== "example") continue;
      const imports = [...(tag.doc ?? "").matchAll(/from "([^"]+)"/g)].map((match) => match[1]!);
      into.push({ symbol, file: location.filename, imports });
    }
  }
  for (const value of Object.values(record)) collect(value, symbol, into);
}

Deno.test("JSDoc examples of public symbols import from mod.ts (or the client's mod.ts) only", async () => {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["doc", "--json", ...ENTRIES],
    cwd: ROOT.pathname,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(code, 0, new TextDecoder().decode(stderr));
  const doc = JSON.parse(new TextDecoder().decode(stdout)) as {
    nodes: Record<string, { symbols: { name: string }[] }>;
  };
  const examples: Example[] = [];
  for (const module of Object.values(doc.nodes)) {
    for (const symbol of module.symbols) collect(symbol, symbol.name, examples);
  }
  assert.ok(examples.length > 20, `only ${examples.length} examples found`);
  const publicEntries = new Set(ENTRIES.map((entry) => new URL(entry, ROOT).href));
  const offending = examples.flatMap(({ symbol, file, imports }) =>
    imports
      .filter((specifier) => specifier.startsWith("."))
      .filter((specifier) => !publicEntries.has(new URL(specifier, file).href))
      .map((specifier) => `${symbol} (${new URL(file).pathname}): ${specifier}`)
  );
  assert.deepEqual(offending, []);
});
