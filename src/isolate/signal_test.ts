import assert from "node:assert/strict";
import { ringSignal, signalBuffer, SignalListener } from "./signal.ts";

/** Fails instead of hanging: a ring never seen leaves the listener asleep. */
async function watchdog<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Watchdog: ${what} within 30 s`)), 30_000);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** A Worker that rings the signal it is sent `times` times on each message, then answers. */
function ringer(): {
  worker: Worker;
  ring(buffer: SharedArrayBuffer, times: number): Promise<void>;
} {
  const signal = new URL("./signal.ts", import.meta.url).href;
  const source = `
    import { ringSignal } from ${JSON.stringify(signal)};
    self.onmessage = (event) => {
      const words = new Int32Array(event.data.buffer);
      for (let i = 0; i < event.data.times; i++) ringSignal(words);
      self.postMessage("rung");
    };`;
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  const worker = new Worker(url, { type: "module" });
  URL.revokeObjectURL(url);
  return {
    worker,
    ring: (buffer, times) => {
      const answered = new Promise<void>((resolve) => {
        worker.addEventListener("message", () => resolve(), { once: true });
      });
      worker.postMessage({ buffer, times });
      return answered;
    },
  };
}

Deno.test("a Worker's ring wakes a listener asleep, and rings while it is busy make one look", async () => {
  const buffer = signalBuffer();
  const { worker, ring } = ringer();
  let looks = 0;
  let looked = Promise.withResolvers<void>();
  const listener = new SignalListener(buffer, () => {
    looks++;
    looked.resolve();
  }, (error) => assert.fail(String(error)));
  try {
    // Asleep: the ring wakes it.
    await ring(buffer, 1);
    await watchdog(looked.promise, "the first look");
    assert.equal(looks, 1);
    // Busy (this isolate blocks until the Worker has rung three times): one look for the three.
    looked = Promise.withResolvers<void>();
    const done = new Int32Array(new SharedArrayBuffer(4));
    worker.postMessage({ buffer, times: 3 });
    const deadline = Date.now() + 30_000;
    while (new Int32Array(buffer)[0]! < 4 && Date.now() < deadline) Atomics.wait(done, 0, 0, 1);
    await watchdog(looked.promise, "the second look");
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(looks, 2);
  } finally {
    await listener.stop();
    worker.terminate();
  }
});

Deno.test("stop() ends a listener asleep, and it looks no more", async () => {
  const buffer = signalBuffer();
  let looks = 0;
  const listener = new SignalListener(buffer, () => looks++, () => {});
  await new Promise((resolve) => setTimeout(resolve, 10));
  await watchdog(listener.stop(), "stop()");
  ringSignal(new Int32Array(buffer));
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(looks, 0);
});

Deno.test("a listener passes what its callback throws on, and goes on listening", async () => {
  const buffer = signalBuffer();
  const words = new Int32Array(buffer);
  const errors: unknown[] = [];
  let looks = 0;
  let looked = Promise.withResolvers<void>();
  const listener = new SignalListener(buffer, () => {
    looks++;
    looked.resolve();
    if (looks === 1) throw new Error("first look fails");
  }, (error) => errors.push(error));
  try {
    ringSignal(words);
    await watchdog(looked.promise, "the first look");
    looked = Promise.withResolvers<void>();
    ringSignal(words);
    await watchdog(looked.promise, "the second look");
    assert.equal(looks, 2);
    assert.deepEqual(errors.map((error) => (error as Error).message), ["first look fails"]);
  } finally {
    await listener.stop();
  }
});
