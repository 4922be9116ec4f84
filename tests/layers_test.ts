/**
 * The layer order of ARCHITECTURE.md, checked: its layer table (one row per layer, top to bottom,
 * the first column naming each layer's folders and files) is the one source of truth, and every
 * import of `mod.ts` and `src/` (unit tests beside the code included; type-only and dynamic
 * imports too, as `deno info` reports them) must point to the importer's own layer or one below.
 * No exceptions. Files of one layer may import each other, but no two files may form a circle.
 *
 * @module
 */

import assert from "node:assert/strict";
import { relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** One row of the layer table: its rank (0 at the top) and the paths its first column names. */
interface Layer {
  readonly rank: number;
  readonly name: string;
  /** Folders end with `/`; files do not. */
  readonly paths: readonly string[];
}

/** An import of one module by another, as repository-relative paths. */
type Edge = readonly [from: string, to: string];

/**
 * Reads the layer table: the first table of ARCHITECTURE.md, each row a layer, top first.
 *
 * @param markdown The document.
 * @returns The layers.
 */
function readLayerTable(markdown: string): Layer[] {
  const lines = markdown.split("\n");
  const start = lines.findIndex((line) => line.startsWith("| Folder"));
  assert.ok(
    start >= 0,
    "ARCHITECTURE.md has no layer table (a table whose header starts '| Folder')",
  );
  const layers: Layer[] = [];
  // The header, then the separator row, then one row per layer until the table ends.
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith("|")) break;
    const [, folders = "", name = ""] = line.split("|");
    const paths = [...folders.matchAll(/`([^`]+)`/g)].map((match) => match[1]!);
    assert.ok(paths.length > 0, `A layer table row names no folder: ${line}`);
    layers.push({ rank: layers.length, name: name.trim(), paths });
  }
  return layers;
}

/**
 * The layer of a file: the row naming it or its nearest folder. A unit test beside a file the
 * table names (`src/wiring_test.ts`) is in that file's layer.
 *
 * @param layers The table.
 * @param path A repository-relative path.
 * @returns Its layer, or `undefined` when no row names it.
 */
function layerOf(layers: readonly Layer[], path: string): Layer | undefined {
  const tested = path.replace(/_test\.ts$/, ".ts");
  let best: { layer: Layer; length: number } | undefined;
  for (const layer of layers) {
    for (const entry of layer.paths) {
      const matches = entry.endsWith("/")
        ? path.startsWith(entry)
        : path === entry || tested === entry;
      if (matches && (best === undefined || entry.length > best.length)) {
        best = { layer, length: entry.length };
      }
    }
  }
  return best?.layer;
}

/**
 * The imports that point up the table, in words.
 *
 * @param layers The table.
 * @param edges The imports.
 * @returns One line per import whose target is in a higher layer than its importer.
 */
function upwardImports(layers: readonly Layer[], edges: readonly Edge[]): string[] {
  const found: string[] = [];
  for (const [from, to] of edges) {
    const source = layerOf(layers, from);
    const target = layerOf(layers, to);
    if (source === undefined || target === undefined) continue; // reported by unplacedFiles
    if (target.rank < source.rank) {
      found.push(`${from} (${source.name}) imports ${to} (${target.name}, a higher layer)`);
    }
  }
  return found.sort();
}

/**
 * The circles in the import graph: sets of two or more files that reach each other (Tarjan's
 * strongly connected components).
 *
 * @param edges The imports.
 * @returns Each circle's files, sorted.
 */
function importCircles(edges: readonly Edge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const [from, to] of edges) {
    next.set(from, [...next.get(from) ?? [], to]);
    if (!next.has(to)) next.set(to, []);
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const target of next.get(node)!) {
      if (!index.has(target)) {
        visit(target);
        low.set(node, Math.min(low.get(node)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(node, Math.min(low.get(node)!, index.get(target)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1) circles.push(component.sort());
    }
  };
  for (const node of next.keys()) if (!index.has(node)) visit(node);
  return circles.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** Every TypeScript file the table governs: `mod.ts` and everything under `src/`. */
async function governedFiles(): Promise<string[]> {
  const files = ["mod.ts"];
  const walk = async (folder: string): Promise<void> => {
    for await (const entry of Deno.readDir(`${ROOT}${folder}`)) {
      const path = `${folder}/${entry.name}`;
      if (entry.isDirectory) await walk(path);
      else if (entry.isFile && path.endsWith(".ts")) files.push(path);
    }
  };
  await walk("src");
  return files.sort();
}

/**
 * Every import between governed files, from `deno info --json` on a module that imports them
 * all: Deno's own module graph, so comments and JSDoc examples are not imports, and type-only
 * and dynamic imports are.
 *
 * @param files The governed files.
 * @returns The imports.
 */
async function importEdges(files: readonly string[]): Promise<Edge[]> {
  const folder = await Deno.makeTempDir({ prefix: "denotriton-layers-" });
  try {
    const root = `${folder}/all.ts`;
    await Deno.writeTextFile(
      root,
      files.map((file) => `import "${pathToFileURL(`${ROOT}${file}`).href}";\n`).join(""),
    );
    const { success, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", "--config", `${ROOT}deno.json`, root],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(success, `deno info failed: ${new TextDecoder().decode(stderr)}`);
    const graph = JSON.parse(new TextDecoder().decode(stdout)) as {
      modules: {
        specifier: string;
        dependencies?: { code?: { specifier?: string }; type?: { specifier?: string } }[];
      }[];
    };
    const governed = new Set(files);
    const pathOf = (specifier: string | undefined): string | undefined => {
      if (specifier === undefined || !specifier.startsWith("file:")) return undefined;
      const path = relative(ROOT, fileURLToPath(specifier));
      return governed.has(path) ? path : undefined;
    };
    const edges: Edge[] = [];
    for (const module of graph.modules) {
      const from = pathOf(module.specifier);
      if (from === undefined) continue;
      for (const dependency of module.dependencies ?? []) {
        for (const to of new Set([dependency.code?.specifier, dependency.type?.specifier])) {
          const target = pathOf(to);
          if (target !== undefined) edges.push([from, target]);
        }
      }
    }
    return edges;
  } finally {
    await Deno.remove(folder, { recursive: true });
  }
}

const layers = readLayerTable(await Deno.readTextFile(`${ROOT}ARCHITECTURE.md`));
const files = await governedFiles();

Deno.test("every file of mod.ts and src/ is in a row of ARCHITECTURE.md's layer table", async () => {
  assert.deepEqual(files.filter((file) => layerOf(layers, file) === undefined), []);
  // And the table names nothing that is gone.
  const missing: string[] = [];
  for (const path of layers.flatMap((layer) => layer.paths)) {
    try {
      await Deno.stat(`${ROOT}${path}`);
    } catch {
      missing.push(path);
    }
  }
  assert.deepEqual(missing, []);
});

Deno.test("no import of mod.ts or src/ points up ARCHITECTURE.md's layer table", async () => {
  const edges = await importEdges(files);
  // The graph is the real one, type-only and dynamic imports included.
  const has = (from: string, to: string): boolean =>
    edges.some((edge) => edge[0] === from && edge[1] === to);
  assert.ok(has("mod.ts", "src/triton.ts"));
  assert.ok(has("src/gpu/cuda.ts", "src/native/ffi.ts"));
  assert.ok(has("src/config/triton_model_config.ts", "src/config/model_info.ts")); // import type
  assert.ok(has("src/engine/share.ts", "src/engine/native/shared_client.ts")); // import()
  assert.deepEqual(upwardImports(layers, edges), []);
});

Deno.test("only src/native/ffi.ts calls Deno.dlopen", async () => {
  const callers: string[] = [];
  for (const file of files) {
    if (/Deno\.dlopen\(/.test(await Deno.readTextFile(`${ROOT}${file}`))) callers.push(file);
  }
  assert.deepEqual(callers, ["src/native/ffi.ts"]);
});

Deno.test("no files of mod.ts and src/ import each other in a circle", async () => {
  assert.deepEqual(importCircles(await importEdges(files)), []);
});

Deno.test("the layer check reports an upward import and a circle", () => {
  // What the two checks above would say of a planted upward import and circle.
  const planted: Edge[] = [
    ["src/gpu/cuda.ts", "src/native/ffi.ts"],
    ["src/native/ffi.ts", "src/engine/engine.ts"],
    ["src/engine/engine.ts", "src/engine/model_handle.ts"],
    ["src/engine/model_handle.ts", "src/engine/engine.ts"],
  ];
  assert.deepEqual(upwardImports(layers, planted), [
    "src/native/ffi.ts (native libraries) imports src/engine/engine.ts (engines, a higher layer)",
  ]);
  assert.deepEqual(importCircles(planted), [[
    "src/engine/engine.ts",
    "src/engine/model_handle.ts",
  ]]);
  assert.equal(layerOf(layers, "src/unknown/file.ts"), undefined);
  assert.equal(layerOf(layers, "src/engine/native/engine.ts")?.name, "engines");
  assert.equal(layerOf(layers, "src/errors.ts")?.name, "base");
  assert.equal(layerOf(layers, "src/wiring_test.ts")?.name, "facade");
});
