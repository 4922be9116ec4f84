/**
 * A set for members that come and go with every request, without a hash table.
 *
 * A long-lived `Map` or `Set` that every request adds to and deletes from made V8 promote every
 * request's objects to the old generation (measured on both engines: `ffi/README.md`,
 * "Per-request cost, eighth round"). Our reading: each rehash leaves the old table pointing to
 * the new one, so once one table is old, the young tables after it, and their entries, live
 * through every young-generation collection until a full one. An array of slots with a free list
 * has no tables to chain: a member's slot is cleared when it leaves.
 *
 * @module
 */

/**
 * Members in reusable slots: `add` answers the member's slot, `delete` takes it back.
 *
 * @typeParam T The members (objects; each is in at most one slot at a time).
 *
 * @example Members come and go
 * ```ts
 * import { SlotSet } from "./slot_set.ts";
 * import assert from "node:assert/strict";
 *
 * const set = new SlotSet<{ name: string }>();
 * const a = { name: "a" };
 * const b = { name: "b" };
 * const at = set.add(a);
 * set.add(b);
 * assert.equal(set.size, 2);
 * assert.ok(set.delete(at, a));
 * assert.ok(!set.delete(at, a));
 * assert.deepEqual(set.values().map((member) => member.name), ["b"]);
 * ```
 */
export class SlotSet<T extends object> {
  #slots: (T | undefined)[] = [];
  #free: number[] = [];
  #size = 0;

  /** How many members the set holds. */
  get size(): number {
    return this.#size;
  }

  /**
   * Adds a member.
   *
   * @param member The member.
   * @returns Its slot, for {@linkcode SlotSet.delete}.
   */
  add(member: T): number {
    const slot = this.#free.pop() ?? this.#slots.length;
    this.#slots[slot] = member;
    this.#size++;
    return slot;
  }

  /**
   * Removes a member from its slot.
   *
   * @param slot What {@linkcode SlotSet.add} answered.
   * @param member The member (a slot given back and reused holds another: that one stays).
   * @returns Whether the member was there.
   */
  delete(slot: number, member: T): boolean {
    if (this.#slots[slot] !== member) return false;
    this.#slots[slot] = undefined;
    this.#free.push(slot);
    this.#size--;
    return true;
  }

  /**
   * The members now, in slot order (a copy: members may come and go while it is read).
   *
   * @returns The members.
   */
  values(): T[] {
    const members: T[] = [];
    for (const member of this.#slots) if (member !== undefined) members.push(member);
    return members;
  }
}
