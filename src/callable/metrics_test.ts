import assert from "node:assert/strict";
import { DEFAULT_BUCKETS, Metric, type MetricChange, type MetricsBackend } from "./metrics.ts";

function recorder(): { backend: MetricsBackend; changes: MetricChange[] } {
  const changes: MetricChange[] = [];
  return { backend: { apply: (change) => void changes.push(change) }, changes };
}

const histogram = { name: "latency", description: "Latency", kind: "histogram" } as const;
const counter = { name: "hits", description: "Hits", kind: "counter" } as const;

Deno.test("new Metric() takes labels and buckets as options, and still as the deprecated two arguments", () => {
  const options = recorder();
  new Metric(options.backend, histogram, { labels: { model: "m" }, buckets: [1, 2] }).observe(1.5);
  const legacy = recorder();
  new Metric(legacy.backend, histogram, { model: "m" }, [1, 2]).observe(1.5);
  const expected = [
    { family: histogram, labels: { model: "m" }, buckets: [1, 2], operation: "create", value: 0 },
    {
      family: histogram,
      labels: { model: "m" },
      buckets: [1, 2],
      operation: "observe",
      value: 1.5,
    },
  ];
  assert.deepEqual(options.changes, expected);
  assert.deepEqual(legacy.changes, expected);
});

Deno.test("new Metric() with options: a histogram's buckets default, other kinds have none", () => {
  const h = recorder();
  new Metric(h.backend, histogram, { labels: { model: "m" } });
  assert.deepEqual(h.changes[0]!.buckets, DEFAULT_BUCKETS);
  const c = recorder();
  new Metric(c.backend, counter).increment(2);
  assert.deepEqual(c.changes, [
    { family: counter, labels: {}, operation: "create", value: 0 },
    { family: counter, labels: {}, operation: "increment", value: 2 },
  ]);
  // The deprecated form without buckets keeps none, as before.
  const old = recorder();
  new Metric(old.backend, counter, { model: "m" }, undefined);
  assert.deepEqual(old.changes, [{
    family: counter,
    labels: { model: "m" },
    operation: "create",
    value: 0,
  }]);
});
