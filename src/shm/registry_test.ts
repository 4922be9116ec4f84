import assert from "node:assert/strict";
import { InferenceError } from "../errors.ts";
import { type RegionView, SharedMemoryRegistry, type SharedRegionView } from "./registry.ts";

const KEY = `/denotriton_registry_test_${Deno.pid}`;
const PATH = `/dev/shm${KEY}`;

function mappings(): number {
  return Deno.readTextFileSync("/proc/self/maps").split("\n").filter((line) => line.includes(PATH))
    .length;
}

/** The view of a system region (these tests register only system regions). */
function system(view: SharedRegionView): RegionView {
  assert.equal(view.kind, "system");
  return view as RegionView;
}

function expectCode(fn: () => unknown, code: string, message: string): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof InferenceError);
    assert.equal(error.code, code);
    assert.equal(error.message, message);
    return true;
  });
}

Deno.test("SharedMemoryRegistry maps regions, hands out views and unmaps after the last one", () => {
  Deno.writeFileSync(PATH, new Uint8Array(8192).map((_, i) => i % 251));
  const registry = new SharedMemoryRegistry();
  try {
    // An offset that is not a whole page is mapped from the page below it.
    registry.register({ name: "r", key: KEY, offset: 4100, byteSize: 100 });
    assert.deepEqual(registry.status(), [{ name: "r", key: KEY, offset: 4100, byte_size: 100 }]);
    assert.equal(mappings(), 1);
    const view = system(registry.acquire("r", 10, 4));
    assert.deepEqual([...view.bytes], [4110 % 251, 4111 % 251, 4112 % 251, 4113 % 251]);
    // Writes land in the object itself.
    view.bytes[0] = 7;
    assert.equal(Deno.readFileSync(PATH)[4110], 7);
    expectCode(
      () => registry.register({ name: "r", key: KEY, offset: 0, byteSize: 8 }),
      "ALREADY_EXISTS",
      "shared memory region 'r' already in manager",
    );
    expectCode(
      () => registry.acquire("r", 100, 1),
      "INVALID_ARG",
      "Invalid offset for shared memory region: 'r'",
    );
    expectCode(
      () => registry.acquire("r", 99, 2),
      "INVALID_ARG",
      "Invalid offset + byte size for shared memory region: 'r'",
    );
    // Unregistered while held: gone from the registry, mapped until released.
    registry.unregister("r");
    assert.deepEqual(registry.status(), []);
    expectCode(
      () => registry.acquire("r", 0, 1),
      "NOT_FOUND",
      "Unable to find shared memory region: 'r'",
    );
    assert.equal(mappings(), 1);
    view.release();
    view.release();
    assert.equal(mappings(), 0);
  } finally {
    registry.close();
    Deno.removeSync(PATH);
  }
});

Deno.test("SharedMemoryRegistry refuses bad keys and sizes with Triton's messages", () => {
  Deno.writeFileSync(PATH, new Uint8Array(64));
  const registry = new SharedMemoryRegistry();
  try {
    expectCode(
      () => registry.register({ name: "a", key: "/x/y", offset: 0, byteSize: 8 }),
      "INVALID_ARG",
      "Unable to open shared memory region: '/x/y': a key may hold no '/' after its first character",
    );
    expectCode(
      () => registry.register({ name: "a", key: "/..", offset: 0, byteSize: 8 }),
      "INVALID_ARG",
      "Unable to open shared memory region: '/..': '..' is not an object in /dev/shm",
    );
    // A key naming no object is the client's mistake (400), though Triton answers INTERNAL.
    expectCode(
      () => registry.register({ name: "a", key: `${KEY}_missing`, offset: 0, byteSize: 8 }),
      "INVALID_ARG",
      `Unable to open shared memory region: '${KEY}_missing': No such file or directory`,
    );
    // A link in /dev/shm is not followed (shm_open opens with O_NOFOLLOW).
    Deno.symlinkSync("/etc/hostname", `${PATH}_link`);
    try {
      expectCode(
        () => registry.register({ name: "a", key: `${KEY}_link`, offset: 0, byteSize: 1 }),
        "INVALID_ARG",
        `Unable to open shared memory region: '${KEY}_link': Too many levels of symbolic links`,
      );
    } finally {
      Deno.removeSync(`${PATH}_link`);
    }
    expectCode(
      () => registry.register({ name: "a", key: KEY, offset: 60, byteSize: 8 }),
      "INVALID_ARG",
      `failed to register shared memory region 'a': invalid args: offset 60 + byte_size 8 is beyond the 64 bytes of '${KEY}'`,
    );
    expectCode(
      () => registry.register({ name: "", key: KEY, offset: 0, byteSize: 8 }),
      "INVALID_ARG",
      "'region name' is necessary to register system shared memory region",
    );
    assert.deepEqual(registry.status(), []);
  } finally {
    registry.close();
    Deno.removeSync(PATH);
  }
});

Deno.test("SharedMemoryRegistry reuses a released view's ArrayBuffer, never a held one", () => {
  Deno.writeFileSync(PATH, new Uint8Array(64));
  const registry = new SharedMemoryRegistry();
  try {
    registry.register({ name: "r", key: KEY, offset: 0, byteSize: 64 });
    const first = system(registry.acquire("r", 0, 16));
    // Held at once: each hold has its own buffer (a Worker may take one by transfer).
    const second = system(registry.acquire("r", 0, 16));
    assert.notEqual(second.bytes.buffer, first.bytes.buffer);
    const buffer = first.bytes.buffer;
    first.release();
    // The next hold of the same bytes gets the released buffer: no new external memory.
    const third = system(registry.acquire("r", 0, 16));
    assert.equal(third.bytes.buffer, buffer);
    // Other bytes get a buffer of their own.
    const other = system(registry.acquire("r", 16, 16));
    assert.notEqual(other.bytes.buffer, buffer);
    // A buffer taken away (transferred or detached) is not handed out again.
    third.bytes.buffer.transfer();
    third.release();
    const fourth = system(registry.acquire("r", 0, 16));
    assert.equal(fourth.bytes.byteLength, 16);
    assert.notEqual(fourth.bytes.buffer, buffer);
    for (const view of [second, other, fourth]) view.release();
    registry.close();
    assert.equal(mappings(), 0);
  } finally {
    registry.close();
    Deno.removeSync(PATH);
  }
});
