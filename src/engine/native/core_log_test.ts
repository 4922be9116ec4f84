import assert from "node:assert/strict";
import { Logger } from "../../log.ts";
import { CoreLog } from "./core_log.ts";
import { openNative } from "../../native/ffi.ts";
import { findTritonInstall } from "../../setup/install.ts";
import { applyLogChange } from "./log_bridge.ts";
import { cString, takeError } from "./status.ts";

const install = await findTritonInstall();

Deno.test({
  name: "CoreLog forwards the core's lines with their levels, across a rotation",
  ignore: install === undefined,
  async fn(): Promise<void> {
    const libraries = openNative(install!);
    const { core } = libraries;
    const file = await Deno.makeTempFile();
    const logger = new Logger({ file, prefix: "t" });
    // TRITONSERVER_LogLevel: INFO 0, WARN 1, ERROR 2.
    const log = (level: number, message: string): void =>
      assert.equal(
        takeError(core, core.TRITONSERVER_LogMessage(level, cString("x.cc"), 7, cString(message))),
        undefined,
      );
    // The core's levels are process-wide: a server stopped earlier in this process may have
    // left info logging off (its default here), so the test sets the ones it checks.
    applyLogChange(core, { info: true, warning: true, error: true });
    const forwarder = await CoreLog.open(libraries, logger, { rotateBytes: 1 });
    const first = forwarder.path;
    try {
      log(2, "first error");
      forwarder.drain(); // forwards it, then moves the core to a fresh file
      assert.notEqual(forwarder.path, first);
      await assert.rejects(Deno.stat(first), Deno.errors.NotFound);
      log(1, "then a warning");
      log(0, "and some info");
    } finally {
      forwarder[Symbol.dispose]();
    }
    await assert.rejects(Deno.stat(forwarder.path), Deno.errors.NotFound);
    logger.close();
    const lines = (await Deno.readTextFile(file)).trimEnd().split("\n")
      .map((line) => line.replace(/^(\w)\S+ \S+ /, "$1 "));
    assert.deepEqual(lines, [
      "E t] Triton core (x.cc:7): first error",
      "W t] Triton core (x.cc:7): then a warning",
      "I t] Triton core (x.cc:7): and some info",
    ]);
    await Deno.remove(file);
  },
});
