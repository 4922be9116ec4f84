import assert from "node:assert/strict";
import { renderMetrics } from "./metrics.ts";
import { ModelStatsRecorder } from "./statistics.ts";

Deno.test("renderMetrics() writes Triton's families with model and version labels", () => {
  const a = new ModelStatsRecorder("add_sub", 1);
  a.recordExecution(3, { computeInput: 1000, computeInfer: 250_000, computeOutput: 2000 });
  a.recordSuccess({
    total: 400_000,
    queue: 120_000,
    computeInput: 1000,
    computeInfer: 250_000,
    computeOutput: 2000,
  });
  a.recordFailure(5000);
  const b = new ModelStatsRecorder('we"ird', 2);
  const text = renderMetrics([
    { stats: a.snapshot(), pending: 2, cached: true },
    { stats: b.snapshot(), pending: 0 },
  ]);
  assert.equal(
    text,
    `# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="add_sub",version="1"} 1
nv_inference_request_success{model="we\\"ird",version="2"} 0
# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="add_sub",version="1"} 1
nv_inference_request_failure{model="we\\"ird",version="2"} 0
# HELP nv_inference_count Number of inferences performed (does not include cached requests)
# TYPE nv_inference_count counter
nv_inference_count{model="add_sub",version="1"} 3
nv_inference_count{model="we\\"ird",version="2"} 0
# HELP nv_inference_exec_count Number of model executions performed (does not include cached requests)
# TYPE nv_inference_exec_count counter
nv_inference_exec_count{model="add_sub",version="1"} 1
nv_inference_exec_count{model="we\\"ird",version="2"} 0
# HELP nv_inference_request_duration_us Cumulative inference request duration in microseconds (includes cached requests)
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="add_sub",version="1"} 400
nv_inference_request_duration_us{model="we\\"ird",version="2"} 0
# HELP nv_inference_queue_duration_us Cumulative inference queuing duration in microseconds (includes cached requests)
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{model="add_sub",version="1"} 120
nv_inference_queue_duration_us{model="we\\"ird",version="2"} 0
# HELP nv_inference_compute_input_duration_us Cumulative compute input duration in microseconds (does not include cached requests)
# TYPE nv_inference_compute_input_duration_us counter
nv_inference_compute_input_duration_us{model="add_sub",version="1"} 1
nv_inference_compute_input_duration_us{model="we\\"ird",version="2"} 0
# HELP nv_inference_compute_infer_duration_us Cumulative compute inference duration in microseconds (does not include cached requests)
# TYPE nv_inference_compute_infer_duration_us counter
nv_inference_compute_infer_duration_us{model="add_sub",version="1"} 250
nv_inference_compute_infer_duration_us{model="we\\"ird",version="2"} 0
# HELP nv_inference_compute_output_duration_us Cumulative inference compute output duration in microseconds (does not include cached requests)
# TYPE nv_inference_compute_output_duration_us counter
nv_inference_compute_output_duration_us{model="add_sub",version="1"} 2
nv_inference_compute_output_duration_us{model="we\\"ird",version="2"} 0
# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="add_sub",version="1"} 2
nv_inference_pending_request_count{model="we\\"ird",version="2"} 0
# HELP nv_cache_num_hits_per_model Number of cache hits per model
# TYPE nv_cache_num_hits_per_model counter
nv_cache_num_hits_per_model{model="add_sub",version="1"} 0
# HELP nv_cache_num_misses_per_model Number of cache misses per model
# TYPE nv_cache_num_misses_per_model counter
nv_cache_num_misses_per_model{model="add_sub",version="1"} 0
`,
  );
  assert.equal(renderMetrics([]), "");
});

Deno.test("renderMetrics() leaves out the latency and cache counters with counter_latencies=false", () => {
  const source = { stats: new ModelStatsRecorder("m", 1).snapshot(), pending: 0, cached: true };
  const on = renderMetrics([source]);
  assert.match(on, /^nv_inference_request_duration_us\{/m);
  assert.match(on, /^nv_cache_num_hits_per_model\{/m);
  const off = renderMetrics([source], { latencyCounters: false });
  assert.doesNotMatch(off, /_duration_us|nv_cache_/);
  assert.match(off, /^nv_inference_request_success\{model="m",version="1"\} 0$/m);
  assert.match(off, /^nv_inference_pending_request_count\{/m);
});
