import assert from "node:assert/strict";
import type { FromThread } from "./thread_protocol.ts";

/**
 * Starts the HTTP thread's Worker on its own, with a way to wait for its messages that fails
 * when the Worker ends with an error instead.
 */
function thread(): { worker: Worker; next(type: FromThread["type"]): Promise<FromThread> } {
  const worker = new Worker(new URL("./thread_main.ts", import.meta.url), { type: "module" });
  const waiters = new Map<string, (message: FromThread) => void>();
  let ended: ((error: Error) => void) | undefined;
  const failed = new Promise<never>((_, reject) => ended = reject);
  failed.catch(() => {});
  worker.onmessage = (event: MessageEvent<FromThread>) =>
    waiters.get(event.data.type)?.(event.data);
  worker.onerror = (event) => {
    event.preventDefault();
    ended!(new Error(`The HTTP thread ended: ${event.message}`));
  };
  return {
    worker,
    next: (type) =>
      Promise.race([
        new Promise<FromThread>((resolve) => waiters.set(type, resolve)),
        failed,
        new Promise<never>((_, reject) =>
          AbortSignal.timeout(30_000).addEventListener(
            "abort",
            () => reject(new Error(`Watchdog: no '${type}' from the HTTP thread in 30 s`)),
          )
        ),
      ]),
  };
}

Deno.test("an HTTP thread outlives an error nothing caught in it, and goes on answering", async () => {
  const { worker, next } = thread();
  try {
    const stopped = next("stopped");
    // A message it cannot read: its handler throws, and nothing in the thread catches that.
    worker.postMessage(null);
    worker.postMessage({ type: "stop" });
    assert.deepEqual(await stopped, { type: "stopped" });
  } finally {
    worker.terminate();
  }
});

Deno.test("an HTTP thread whose start throws answers start-failed", async () => {
  const { worker, next } = thread();
  try {
    const failed = next("start-failed");
    worker.postMessage({ type: "start", index: 2, settings: {} });
    const answer = await failed;
    assert.equal(answer.type, "start-failed");
    assert.match(JSON.stringify(answer), /TypeError/);
  } finally {
    worker.terminate();
  }
});
