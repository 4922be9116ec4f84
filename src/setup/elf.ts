/**
 * Reads the dynamic section of a 64-bit little-endian ELF shared library: its `DT_NEEDED`
 * entries, `DT_SONAME` and search paths. The Triton wheel's bundled libraries do not find each
 * other on their own (only the core has a `$ORIGIN` run path), so the setup reads these to
 * extract the core's dependency closure and to preload it leaves first.
 *
 * @module
 */

import { TritonError } from "../errors.ts";

/** The parts of an ELF dynamic section the loader cares about. */
export interface ElfDynamicInfo {
  /** `DT_NEEDED` library names, in order. */
  readonly needed: readonly string[];
  /** `DT_SONAME`, if any. */
  readonly soname?: string;
  /** `DT_RUNPATH`, if any. */
  readonly runpath?: string;
  /** `DT_RPATH`, if any. */
  readonly rpath?: string;
}

const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const DT_NEEDED = 1n;
const DT_STRTAB = 5n;
const DT_SONAME = 14n;
const DT_RPATH = 15n;
const DT_RUNPATH = 29n;

/**
 * Parses the dynamic section of an ELF64 little-endian file.
 *
 * @param bytes The whole file.
 * @returns Its needed libraries, soname and search paths.
 * @throws {TritonError} When the bytes are not a 64-bit little-endian ELF with a dynamic section.
 *
 * @example Reject a non-ELF file
 * ```ts
 * import { readElfDynamic } from "./elf.ts";
 * import assert from "node:assert/strict";
 *
 * assert.throws(() => readElfDynamic(new Uint8Array(64)), /not an ELF file/);
 * ```
 */
export function readElfDynamic(bytes: Uint8Array): ElfDynamicInfo {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (
    bytes.byteLength < 64 || bytes[0] !== 0x7f || bytes[1] !== 0x45 || bytes[2] !== 0x4c ||
    bytes[3] !== 0x46
  ) {
    throw new TritonError("Cannot read shared library: not an ELF file");
  }
  if (bytes[4] !== 2 || bytes[5] !== 1) {
    throw new TritonError("Cannot read shared library: only 64-bit little-endian ELF is supported");
  }
  const phoff = Number(view.getBigUint64(0x20, true));
  const phentsize = view.getUint16(0x36, true);
  const phnum = view.getUint16(0x38, true);
  const loads: { vaddr: bigint; offset: bigint; size: bigint }[] = [];
  let dynamic: { offset: number; size: number } | undefined;
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    const type = view.getUint32(at, true);
    const offset = view.getBigUint64(at + 8, true);
    const vaddr = view.getBigUint64(at + 16, true);
    const filesz = view.getBigUint64(at + 32, true);
    if (type === PT_LOAD) loads.push({ vaddr, offset, size: filesz });
    if (type === PT_DYNAMIC) dynamic = { offset: Number(offset), size: Number(filesz) };
  }
  if (dynamic === undefined) {
    throw new TritonError("Cannot read shared library: it has no dynamic section");
  }
  const entries: [bigint, bigint][] = [];
  for (let at = dynamic.offset; at + 16 <= dynamic.offset + dynamic.size; at += 16) {
    const tag = view.getBigInt64(at, true);
    if (tag === 0n) break;
    entries.push([tag, view.getBigUint64(at + 8, true)]);
  }
  const strtabAddress = entries.find(([tag]) => tag === DT_STRTAB)?.[1];
  const segment = loads.find((load) =>
    strtabAddress !== undefined && strtabAddress >= load.vaddr &&
    strtabAddress < load.vaddr + load.size
  );
  if (strtabAddress === undefined || segment === undefined) {
    throw new TritonError("Cannot read shared library: its string table is not mapped");
  }
  const strtab = Number(strtabAddress - segment.vaddr + segment.offset);
  const decoder = new TextDecoder();
  const stringAt = (offset: bigint): string => {
    const start = strtab + Number(offset);
    let end = start;
    while (end < bytes.byteLength && bytes[end] !== 0) end++;
    return decoder.decode(bytes.subarray(start, end));
  };
  const needed: string[] = [];
  const info: { soname?: string; runpath?: string; rpath?: string } = {};
  for (const [tag, value] of entries) {
    if (tag === DT_NEEDED) needed.push(stringAt(value));
    else if (tag === DT_SONAME) info.soname = stringAt(value);
    else if (tag === DT_RUNPATH) info.runpath = stringAt(value);
    else if (tag === DT_RPATH) info.rpath = stringAt(value);
  }
  return { needed, ...info };
}

/**
 * Orders libraries so that each comes after every library it needs (leaves first), keeping only
 * names in `graph`.
 *
 * @param graph Library name → the names it needs.
 * @param roots The libraries to start from.
 * @returns The load order, roots last.
 *
 * @example Leaves first; system libraries left out
 * ```ts
 * import { loadOrder } from "./elf.ts";
 * import assert from "node:assert/strict";
 *
 * const graph = new Map([["core", ["curl", "libc.so.6"]], ["curl", ["ssl"]], ["ssl", []]]);
 * assert.deepEqual(loadOrder(graph, ["core"]), ["ssl", "curl", "core"]);
 * ```
 */
export function loadOrder(
  graph: ReadonlyMap<string, readonly string[]>,
  roots: readonly string[],
): string[] {
  const order: string[] = [];
  const seen = new Set<string>();
  const visit = (name: string): void => {
    if (seen.has(name) || !graph.has(name)) return;
    seen.add(name);
    for (const dependency of graph.get(name) ?? []) visit(dependency);
    order.push(name);
  };
  for (const root of roots) visit(root);
  return order;
}
