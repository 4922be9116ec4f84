import assert from "node:assert/strict";
import { foreignBuffer, isForeign } from "../tensor/foreign_memory.ts";
import { ndarray } from "../tensor/ndarray.ts";
import { smallTypedArray } from "../tensor/small_tensors.ts";
import { fromWireTensor, toWireTensor, type WireCounts } from "./codec.ts";
import type { NDArray } from "../tensor/ndarray.ts";

Deno.test("toWireTensor() and fromWireTensor() keep the foreign-memory mark across isolates", () => {
  const own = new Float32Array([1, 2]);
  const counts: WireCounts = { moved: 0, copied: 0, native: 0 };
  const transfer: Transferable[] = [];
  const foreign = new Float32Array(foreignBuffer(Deno.UnsafePointer.of(own)!, 8));
  const wire = toWireTensor(ndarray(foreign), { transfer, counts });
  assert.equal("foreign" in wire && wire.foreign, true);
  // What the receiving isolate gets: another ArrayBuffer over the same memory.
  const received = structuredClone(wire, { transfer });
  const back = fromWireTensor(received);
  assert.ok(isForeign(((back as NDArray).data as Float32Array).buffer));
  assert.deepEqual([...((back as NDArray).data as Float32Array)], [1, 2]);
  // JavaScript's own memory travels unmarked.
  const plain = toWireTensor(ndarray(new Float32Array([3])), { transfer: [], counts });
  assert.equal("foreign" in plain, false);
  assert.ok(!isForeign(((fromWireTensor(plain) as NDArray).data as Float32Array).buffer));
});

Deno.test("toWireTensor() copies a view of a shared chunk instead of moving the chunk", () => {
  const counts: WireCounts = { moved: 0, copied: 0, native: 0 };
  const transfer: Transferable[] = [];
  const first = smallTypedArray("float32", 2) as Float32Array;
  const second = smallTypedArray("float32", 2) as Float32Array;
  first.set([1, 2]);
  second.set([3, 4]);
  const wire = toWireTensor(ndarray(first, [2]), { transfer, counts }, { moveViews: true });
  structuredClone(wire, { transfer });
  assert.deepEqual(counts, { moved: 0, copied: 8, native: 0 });
  assert.equal((first.buffer as ArrayBuffer).detached, false);
  assert.deepEqual([...first, ...second], [1, 2, 3, 4]);
});
