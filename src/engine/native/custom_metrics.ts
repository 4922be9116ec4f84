/**
 * The Triton engine's registry of the metrics models declare (`context.metrics`): each family
 * and metric is made in the core with its custom-metrics API (`TRITONSERVER_MetricFamilyNew`,
 * `TRITONSERVER_MetricNewWithArgs`, ...), so `TRITONSERVER_ServerMetrics` renders them with the
 * core's own families, as it does a C++ backend's. Calls are made on the engine's isolate (a
 * Worker instance's changes are posted there); the core's metric objects are thread-safe.
 *
 * The core's registry is process-wide: a family name two Triton engines of one process declare
 * is one family there, and the first engine to stop deletes it.
 *
 * @module
 */

import type { MetricChange, MetricKind, MetricsBackend } from "../../callable/metrics.ts";
import { TritonBadParameterError } from "../../errors.ts";
import type { NativeLibraries } from "../../native/ffi.ts";
import { pointerOf, takeError } from "./status.ts";

const KIND: Readonly<Record<MetricKind, number>> = { counter: 0, gauge: 1, histogram: 2 };
const PARAMETER_STRING = 0;

interface Family {
  readonly kind: MetricKind;
  readonly pointer: Deno.PointerValue;
  readonly metrics: Map<string, Deno.PointerValue>;
}

const encoder = new TextEncoder();
const cString = (text: string): Uint8Array => encoder.encode(`${text}\0`);

/** The models' own metrics of one Triton engine, kept in the core. */
export class CoreMetrics implements MetricsBackend {
  readonly #core: NativeLibraries["core"];
  readonly #families = new Map<string, Family>();
  readonly #out = new BigUint64Array(1);

  /**
   * A registry over the core.
   *
   * @param core The core's symbols.
   */
  constructor(core: NativeLibraries["core"]) {
    this.#core = core;
  }

  /**
   * Applies one change, making the family and the metric in the core on first use.
   *
   * @param change The change.
   * @throws {TritonBadParameterError} When the name is taken by another kind, or the core
   *   refuses (its message is given).
   */
  apply(change: MetricChange): void {
    const family = this.#family(change);
    const key = JSON.stringify(Object.entries(change.labels).sort(([a], [b]) => a < b ? -1 : 1));
    let metric = family.metrics.get(key);
    if (metric === undefined) {
      metric = this.#metric(family, change);
      family.metrics.set(key, metric);
    }
    const core = this.#core;
    switch (change.operation) {
      case "increment":
        this.#check(core.TRITONSERVER_MetricIncrement(metric, change.value), change);
        break;
      case "set":
        this.#check(core.TRITONSERVER_MetricSet(metric, change.value), change);
        break;
      case "observe":
        this.#check(core.TRITONSERVER_MetricObserve(metric, change.value), change);
        break;
    }
  }

  /** Deletes every metric, then every family, from the core (the engine stops). */
  close(): void {
    const core = this.#core;
    for (const family of this.#families.values()) {
      for (const metric of family.metrics.values()) {
        takeError(core, core.TRITONSERVER_MetricDelete(metric));
      }
      takeError(core, core.TRITONSERVER_MetricFamilyDelete(family.pointer));
    }
    this.#families.clear();
  }

  #family(change: MetricChange): Family {
    const { name, kind, description } = change.family;
    const known = this.#families.get(name);
    if (known !== undefined) {
      if (known.kind !== kind) {
        throw new TritonBadParameterError(
          `Cannot declare metric family '${name}': it is a ${known.kind}, not a ${kind}`,
        );
      }
      return known;
    }
    if (name.startsWith("nv_")) {
      throw new TritonBadParameterError(
        `Cannot declare metric family '${name}': names starting with nv_ are the server's`,
      );
    }
    const core = this.#core;
    this.#check(
      core.TRITONSERVER_MetricFamilyNew(this.#out, KIND[kind], cString(name), cString(description)),
      change,
    );
    const family = { kind, pointer: pointerOf(this.#out), metrics: new Map() };
    this.#families.set(name, family);
    return family;
  }

  #metric(family: Family, change: MetricChange): Deno.PointerValue {
    const core = this.#core;
    const labels = Object.entries(change.labels).map(([key, value]) =>
      core.TRITONSERVER_ParameterNew(
        cString(key),
        PARAMETER_STRING,
        cString(value),
      )
    );
    const array = new BigUint64Array(labels.length);
    labels.forEach((label, index) => array[index] = BigInt(Deno.UnsafePointer.value(label)));
    let args: Deno.PointerValue = null;
    try {
      if (family.kind === "histogram") {
        this.#check(core.TRITONSERVER_MetricArgsNew(this.#out), change);
        args = pointerOf(this.#out);
        const buckets = new Float64Array(change.buckets ?? []);
        this.#check(
          core.TRITONSERVER_MetricArgsSetHistogram(args, buckets, BigInt(buckets.length)),
          change,
        );
      }
      this.#check(
        core.TRITONSERVER_MetricNewWithArgs(
          this.#out,
          family.pointer,
          array,
          BigInt(labels.length),
          args,
        ),
        change,
      );
      return pointerOf(this.#out);
    } finally {
      // The core copies the labels and the buckets into the metric.
      for (const label of labels) core.TRITONSERVER_ParameterDelete(label);
      if (args !== null) takeError(core, core.TRITONSERVER_MetricArgsDelete(args));
    }
  }

  #check(error: Deno.PointerValue, change: MetricChange): void {
    const failure = takeError(this.#core, error);
    if (failure !== undefined) {
      throw new TritonBadParameterError(
        `Cannot change metric '${change.family.name}': ${failure.message}`,
        { cause: failure },
      );
    }
  }
}
