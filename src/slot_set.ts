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

// How many slots an id can name: its low part is the slot, its high part a serial number.
const SLOT_BITS = 20;
const SLOT_COUNT = 2 ** SLOT_BITS;

/** Options of a {@linkcode SlotTable}. */
export interface SlotTableOptions {
  /**
   * How many bits its ids span: the low 20 name the slot, the rest count the slot's successive
   * values (at most 53, a safe integer; at least 21).
   *
   * @default {52}
   */
  readonly idBits?: number;
}

/** The values of the slots that hold an id (a slot given back holds 0), in slot order. */
function heldValues<V>(ids: readonly number[], values: readonly (V | undefined)[]): V[] {
  const held: V[] = [];
  for (let slot = 0; slot < values.length; slot++) {
    if (ids[slot]! > 0) held.push(values[slot]!);
  }
  return held;
}

/**
 * Values under ids the table makes: each id names its value's slot, and a serial number that
 * tells the slot's successive values apart, so a late lookup of an id whose value has left
 * finds nothing. For ids that cross to another isolate and come back (requests by id).
 *
 * @typeParam V The values.
 *
 * @example An id finds its value until it is deleted
 * ```ts
 * import { SlotTable } from "./slot_set.ts";
 * import assert from "node:assert/strict";
 *
 * const table = new SlotTable<string>();
 * const id = table.add("a");
 * assert.equal(table.get(id), "a");
 * assert.equal(table.delete(id), "a");
 * const next = table.add("b");
 * assert.notEqual(next, id);
 * assert.equal(table.get(id), undefined);
 * assert.equal(table.size, 1);
 * ```
 */
export class SlotTable<V> {
  #ids: number[] = [];
  #values: (V | undefined)[] = [];
  #free: number[] = [];
  #serial = 0;
  #serials: number;
  #size = 0;

  /**
   * @param options How many bits its ids span.
   */
  constructor(options: SlotTableOptions = {}) {
    const { idBits = 52 } = options;
    if (!Number.isInteger(idBits) || idBits <= SLOT_BITS || idBits > 53) {
      throw new RangeError(`A SlotTable's ids span 21 to 53 bits, not ${idBits}`);
    }
    this.#serials = 2 ** (idBits - SLOT_BITS);
  }

  /** How many values the table holds. */
  get size(): number {
    return this.#size;
  }

  /**
   * Adds a value.
   *
   * @param value The value.
   * @returns Its id (a positive safe integer).
   */
  add(value: V): number {
    const slot = this.#free.pop() ?? this.#values.length;
    if (slot >= SLOT_COUNT) throw new RangeError(`A SlotTable holds at most ${SLOT_COUNT} values`);
    this.#serial = this.#serial % (this.#serials - 1) + 1;
    const id = this.#serial * SLOT_COUNT + slot;
    this.#ids[slot] = id;
    this.#values[slot] = value;
    this.#size++;
    return id;
  }

  /**
   * The value under an id.
   *
   * @param id What {@linkcode SlotTable.add} answered.
   * @returns The value, or `undefined` once deleted.
   */
  get(id: number): V | undefined {
    const slot = id % SLOT_COUNT;
    return this.#ids[slot] === id ? this.#values[slot] : undefined;
  }

  /**
   * Deletes the value under an id.
   *
   * @param id What {@linkcode SlotTable.add} answered.
   * @returns The value deleted, or `undefined` when there was none.
   */
  delete(id: number): V | undefined {
    const slot = id % SLOT_COUNT;
    if (this.#ids[slot] !== id) return undefined;
    const value = this.#values[slot];
    this.#ids[slot] = 0;
    this.#values[slot] = undefined;
    this.#free.push(slot);
    this.#size--;
    return value;
  }

  /**
   * The values now, in slot order (a copy).
   *
   * @returns The values.
   */
  values(): V[] {
    return heldValues(this.#ids, this.#values);
  }
}

/**
 * Values under ids made elsewhere (another isolate's {@linkcode SlotTable}, HTTP/2 stream ids):
 * each goes in the slot its id's low bits name. Two live ids that want one slot (another
 * isolate's table never makes them; stream ids 2^20 apart, both open, could) share it through a
 * small side table.
 *
 * @typeParam V The values.
 *
 * @example Values under another table's ids
 * ```ts
 * import { SlotMirror, SlotTable } from "./slot_set.ts";
 * import assert from "node:assert/strict";
 *
 * const ids = new SlotTable<string>();
 * const mirror = new SlotMirror<number>();
 * const id = ids.add("request");
 * mirror.put(id, 7);
 * assert.equal(mirror.get(id), 7);
 * assert.deepEqual(mirror.values(), [7]);
 * const far = id + 2 ** 20; // the same slot
 * mirror.put(far, 8);
 * assert.equal(mirror.size, 2);
 * mirror.delete(id);
 * assert.equal(mirror.get(id), undefined);
 * assert.equal(mirror.get(far), 8);
 * assert.equal(mirror.size, 1);
 * ```
 */
export class SlotMirror<V> {
  #ids: number[] = [];
  #values: (V | undefined)[] = [];
  #others: Map<number, V> | undefined;
  #size = 0;

  /** How many values it holds. */
  get size(): number {
    return this.#size;
  }

  /**
   * Keeps a value under an id.
   *
   * @param id The id ({@linkcode SlotTable.add}'s, on the other side).
   * @param value The value.
   */
  put(id: number, value: V): void {
    const slot = id % SLOT_COUNT;
    const held = this.#ids[slot];
    if (held === id) {
      this.#values[slot] = value;
    } else if (held === undefined || held === 0) {
      this.#ids[slot] = id;
      this.#values[slot] = value;
      this.#size++;
    } else {
      this.#others ??= new Map();
      if (!this.#others.has(id)) this.#size++;
      this.#others.set(id, value);
    }
  }

  /**
   * The value under an id.
   *
   * @param id The id.
   * @returns The value, or `undefined`.
   */
  get(id: number): V | undefined {
    const slot = id % SLOT_COUNT;
    return this.#ids[slot] === id ? this.#values[slot] : this.#others?.get(id);
  }

  /**
   * Forgets the value under an id.
   *
   * @param id The id.
   */
  delete(id: number): void {
    const slot = id % SLOT_COUNT;
    if (this.#ids[slot] === id) {
      this.#ids[slot] = 0;
      this.#values[slot] = undefined;
      this.#size--;
    } else if (this.#others?.delete(id) === true) {
      this.#size--;
    }
  }

  /**
   * The values now (a copy).
   *
   * @returns The values.
   */
  values(): V[] {
    const values = heldValues(this.#ids, this.#values);
    if (this.#others !== undefined) values.push(...this.#others.values());
    return values;
  }
}
