import assert from "node:assert/strict";
import { BoundedQueue } from "./bounded_queue.ts";

// Lets pending promise reactions and stream pulls run.
function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

Deno.test("BoundedQueue delivers every value, then ends", async () => {
  const queue = new BoundedQueue<number>({ highWaterMark: 4 });
  await queue.push(1);
  await queue.push(2);
  queue.end();
  assert.equal(queue.closed, true);
  assert.deepEqual(await Array.fromAsync(queue.readable), [1, 2]);
});

Deno.test("BoundedQueue push() waits while the queue is full and resumes after a read", async () => {
  const queue = new BoundedQueue<string>({ highWaterMark: 2 });
  let third = false;
  await queue.push("a");
  const second = queue.push("b");
  const thirdPush = queue.push("c").then(() => third = true);
  await settle();
  assert.equal(queue.desiredSize, -1);
  assert.equal(third, false);
  const reader = queue.readable.getReader();
  assert.deepEqual(await reader.read(), { done: false, value: "a" });
  await settle();
  // One read leaves "b" and "c": still full.
  assert.equal(third, false);
  assert.deepEqual(await reader.read(), { done: false, value: "b" });
  await thirdPush;
  await second;
  assert.equal(third, true);
  assert.equal(queue.desiredSize, 1);
  reader.releaseLock();
});

Deno.test("BoundedQueue fail() delivers queued values before the error", async () => {
  const queue = new BoundedQueue<number>({ highWaterMark: 8 });
  for (const value of [1, 2, 3]) void queue.push(value);
  const error = new Error("Model failed: on purpose");
  queue.fail(error);
  queue.fail(new Error("second failure is ignored"));
  queue.end();
  const reader = queue.readable.getReader();
  assert.deepEqual(await reader.read(), { done: false, value: 1 });
  assert.deepEqual(await reader.read(), { done: false, value: 2 });
  assert.deepEqual(await reader.read(), { done: false, value: 3 });
  await assert.rejects(reader.read(), (thrown) => thrown === error);
});

Deno.test("BoundedQueue fail() on an empty queue rejects the waiting read", async () => {
  const queue = new BoundedQueue<number>();
  const reader = queue.readable.getReader();
  const read = reader.read();
  await settle();
  queue.fail(new TypeError("bad step"));
  await assert.rejects(read, { name: "TypeError", message: "bad step" });
});

Deno.test("BoundedQueue cancel calls the hook once, drops values and wakes the producer", async () => {
  const reasons: unknown[] = [];
  const queue = new BoundedQueue<number>({
    highWaterMark: 1,
    cancel: (reason) => reasons.push(reason),
  });
  void queue.push(1);
  const waiting = queue.push(2);
  await queue.readable.cancel("client went away");
  await waiting;
  assert.deepEqual(reasons, ["client went away"]);
  assert.equal(queue.closed, true);
  assert.equal(queue.desiredSize, 0);
  // Pushes after the cancel are dropped and do not wait.
  await queue.push(3);
  queue.end();
  queue.fail(new Error("ignored"));
  assert.deepEqual(reasons, ["client went away"]);
});

Deno.test("BoundedQueue leaving a for-await loop early cancels the producer", async () => {
  const controller = new AbortController();
  const queue = new BoundedQueue<number>({ cancel: (reason) => controller.abort(reason) });
  const producer = (async () => {
    for (let i = 0; !controller.signal.aborted; i++) await queue.push(i);
  })();
  for await (const value of queue.readable) {
    if (value === 40) break;
  }
  await producer;
  assert.equal(controller.signal.aborted, true);
});

Deno.test("BoundedQueue does not call cancel after the producer ended", async () => {
  let cancels = 0;
  const queue = new BoundedQueue<number>({ cancel: () => cancels++ });
  void queue.push(1);
  void queue.push(2);
  queue.end();
  for await (const _ of queue.readable) break;
  assert.equal(cancels, 0);
});

Deno.test("BoundedQueue pull lets an event-driven source pause and resume", async () => {
  let paused = false;
  let pulls = 0;
  const queue = new BoundedQueue<number>({
    highWaterMark: 3,
    pull: () => {
      pulls++;
      paused = false;
    },
  });
  await settle();
  assert.equal(pulls, 1, "pull runs once at the start");
  // A source that cannot await: it pauses itself when the queue is full.
  const emit = (value: number): void => {
    void queue.push(value);
    if (queue.desiredSize <= 0) paused = true;
  };
  emit(1);
  emit(2);
  emit(3);
  assert.equal(paused, true);
  const reader = queue.readable.getReader();
  assert.deepEqual(await reader.read(), { done: false, value: 1 });
  await settle();
  assert.equal(paused, false);
  reader.releaseLock();
});

Deno.test("BoundedQueue refuses a high-water mark below 1", () => {
  assert.throws(
    () => new BoundedQueue({ highWaterMark: 0 }),
    {
      name: "RangeError",
      message:
        "Cannot create a bounded queue: highWaterMark must be an integer of at least 1, got 0",
    },
  );
});
