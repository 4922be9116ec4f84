import assert from "node:assert/strict";
import { CpuMetrics } from "./cpu_metrics.ts";

const MEMINFO = "MemTotal:       8000 kB\nMemFree:        1000 kB\nMemAvailable:   6000 kB\n";

Deno.test("CpuMetrics uses the core's formulas and refreshes at most once per interval", () => {
  // user nice system idle iowait irq softirq steal
  let stat = "cpu  10 0 10 70 10 0 0 0 0 0\ncpu0 1 2 3\n";
  let clock = 0;
  const metrics = new CpuMetrics({
    intervalMs: 2000,
    now: () => clock,
    read: (path) => path === "/proc/stat" ? stat : MEMINFO,
  });
  assert.deepEqual(metrics.values(), {
    utilization: 0,
    memoryTotalBytes: 8192000,
    memoryUsedBytes: 2048000,
  });
  // busy +30 (user, irq, softirq, steal count), idle +10 (idle, iowait count).
  stat = "cpu  20 0 10 75 15 5 5 10 0 0\n";
  clock = 1999;
  assert.equal(metrics.values().utilization, 0, "not refreshed before the interval");
  clock = 2000;
  assert.equal(metrics.values().utilization, 0.75);
  assert.equal(
    metrics.render(),
    [
      "# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]",
      "# TYPE nv_cpu_utilization gauge",
      "nv_cpu_utilization 0.75",
      "# HELP nv_cpu_memory_total_bytes CPU total memory (RAM), in bytes",
      "# TYPE nv_cpu_memory_total_bytes gauge",
      "nv_cpu_memory_total_bytes 8192000",
      "# HELP nv_cpu_memory_used_bytes CPU used memory (RAM), in bytes",
      "# TYPE nv_cpu_memory_used_bytes gauge",
      "nv_cpu_memory_used_bytes 2048000",
      "",
    ].join("\n"),
  );
});

Deno.test("CpuMetrics names the permission or the platform it lacks", () => {
  const failing = (error: Error) => () =>
    new CpuMetrics({
      read: () => {
        throw error;
      },
    });
  assert.throws(failing(new Deno.errors.NotCapable("Requires read access")), {
    name: "TritonValidationError",
    message:
      "Cannot report CPU metrics (allowCpuMetrics): grant --allow-read=/proc/stat,/proc/meminfo",
  });
  assert.throws(failing(new Deno.errors.NotFound("No such file")), {
    message:
      `Cannot report CPU metrics (allowCpuMetrics): CPU metrics come from /proc/stat and /proc/meminfo, which ${Deno.build.os} does not have`,
  });
});

Deno.test({
  name: "CpuMetrics reads this machine's /proc like the core",
  ignore: Deno.build.os !== "linux",
  fn(): void {
    const total = Number(/^MemTotal:\s+(\d+)/m.exec(Deno.readTextFileSync("/proc/meminfo"))![1]);
    const values = new CpuMetrics().values();
    assert.equal(values.memoryTotalBytes, total * 1024);
    assert.ok(values.memoryUsedBytes > 0 && values.memoryUsedBytes <= values.memoryTotalBytes);
  },
});
