/**
 * Metrics a model declares, in the shape of Triton's custom-metrics API (the core's
 * `TRITONSERVER_MetricFamily*`, the Python backend's `pb_utils.MetricFamily`): a callable asks
 * its context for a family (a name, a description, a kind: counter, gauge or histogram), then
 * for the family's metric with given labels, and changes it. They are exported on `/metrics`
 * beside Triton's own, on both engines: the built-in engine renders them itself, the Triton
 * engine creates them in the core, so they appear in the core's output. A Worker instance's
 * changes travel to the main isolate in order with its results, so a request's metrics are
 * counted before its response is sent.
 *
 * @module
 */

import { TritonBadParameterError } from "../errors.ts";

/** The kind of a metric family. */
export type MetricKind = "counter" | "gauge" | "histogram";

/** A metric family, as declared. */
export interface MetricFamilyOptions {
  /** Its name, as `/metrics` shows it (`[a-zA-Z_:][a-zA-Z0-9_:]*`). */
  readonly name: string;
  /** Its description (the `# HELP` line). */
  readonly description: string;
  /** Counter (only goes up), gauge (set or moved either way), or histogram (observations). */
  readonly kind: MetricKind;
}

/** A metric of a family. */
export interface MetricOptions {
  /**
   * Its labels.
   *
   * @default {{}}
   */
  readonly labels?: Readonly<Record<string, string>>;
  /**
   * Histograms: the upper bounds of the buckets, ascending (a `+Inf` bucket is added).
   *
   * @default {[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]}
   */
  readonly buckets?: readonly number[];
}

/** What happens to a metric. */
export type MetricOperation = "create" | "increment" | "set" | "observe";

/** One change of a metric, as a backend applies it. */
export interface MetricChange {
  /** The family. */
  readonly family: MetricFamilyOptions;
  /** The metric's labels. */
  readonly labels: Readonly<Record<string, string>>;
  /** Histograms: the buckets. */
  readonly buckets?: readonly number[];
  /** What to do (`create` makes the metric appear, at 0). */
  readonly operation: MetricOperation;
  /** The amount (ignored by `create`). */
  readonly value: number;
}

/** Where metric changes go: an engine's registry, or a Worker's messages to it. */
export interface MetricsBackend {
  /**
   * Applies one change, creating the family and the metric on first use.
   *
   * @throws {TritonBadParameterError} When the family's name is taken by another kind, or the
   *   change does not fit the kind.
   */
  apply(change: MetricChange): void;
}

/** The buckets of a histogram metric declared without any (Prometheus' defaults). */
export const DEFAULT_BUCKETS: readonly number[] = Object.freeze([
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
]);

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** One metric: a family's series with given labels. */
export class Metric {
  readonly #backend: MetricsBackend;
  readonly #family: MetricFamilyOptions;
  readonly #labels: Readonly<Record<string, string>>;
  readonly #buckets: readonly number[] | undefined;

  /**
   * Use {@linkcode MetricFamily.metric}, which checks the labels and buckets.
   *
   * @param backend Where changes go.
   * @param family The family.
   * @param options The labels and, for a histogram, the buckets.
   */
  constructor(backend: MetricsBackend, family: MetricFamilyOptions, options?: MetricOptions);
  /**
   * Use {@linkcode MetricFamily.metric}, which checks the labels and buckets.
   *
   * @deprecated Pass the labels and buckets as one options object:
   *   `new Metric(backend, family, { labels, buckets })`.
   * @param backend Where changes go.
   * @param family The family.
   * @param labels The labels.
   * @param buckets Histograms: the buckets.
   */
  constructor(
    backend: MetricsBackend,
    family: MetricFamilyOptions,
    labels: Readonly<Record<string, string>>,
    buckets: readonly number[] | undefined,
  );
  // A rest parameter: the implementation also takes the deprecated overload's four arguments
  // (public API, kept working); the options overload is the one to use.
  constructor(
    backend: MetricsBackend,
    family: MetricFamilyOptions,
    ...rest: unknown[]
  ) {
    this.#backend = backend;
    this.#family = family;
    // The deprecated form: two arguments after the family, or a labels record (string values)
    // where the options object would be.
    if (rest.length >= 2 || Object.values(rest[0] ?? {}).some((v) => typeof v === "string")) {
      this.#labels = (rest[0] ?? {}) as Readonly<Record<string, string>>;
      this.#buckets = rest[1] as readonly number[] | undefined;
    } else {
      const options = (rest[0] ?? {}) as MetricOptions;
      this.#labels = options.labels ?? {};
      this.#buckets = family.kind === "histogram"
        ? options.buckets ?? DEFAULT_BUCKETS
        : options.buckets;
    }
    this.#apply("create", 0);
  }

  /**
   * Adds to a counter (an amount >= 0) or a gauge.
   *
   * @param value The amount.
   * @throws {TritonBadParameterError} For a histogram, or a negative amount on a counter.
   */
  increment(value = 1): void {
    if (this.#family.kind === "histogram") throw this.#wrong("increment");
    if (this.#family.kind === "counter" && !(value >= 0)) {
      throw new TritonBadParameterError(
        `Cannot increment counter '${this.#family.name}' by ${value}: a counter only goes up`,
      );
    }
    this.#apply("increment", value);
  }

  /**
   * Sets a gauge.
   *
   * @param value The value.
   * @throws {TritonBadParameterError} For a counter or a histogram.
   */
  set(value: number): void {
    if (this.#family.kind !== "gauge") throw this.#wrong("set");
    this.#apply("set", value);
  }

  /**
   * Records an observation of a histogram.
   *
   * @param value The observation.
   * @throws {TritonBadParameterError} For a counter or a gauge.
   */
  observe(value: number): void {
    if (this.#family.kind !== "histogram") throw this.#wrong("observe");
    this.#apply("observe", value);
  }

  #wrong(operation: string): TritonBadParameterError {
    return new TritonBadParameterError(
      `Cannot ${operation} metric '${this.#family.name}': it is a ${this.#family.kind}`,
    );
  }

  #apply(operation: MetricOperation, value: number): void {
    this.#backend.apply({
      family: this.#family,
      labels: this.#labels,
      ...(this.#buckets === undefined ? {} : { buckets: this.#buckets }),
      operation,
      value,
    });
  }
}

/** A metric family: its metrics differ by their labels. */
export class MetricFamily {
  /** The declaration. */
  readonly options: MetricFamilyOptions;
  readonly #backend: MetricsBackend;
  readonly #metrics = new Map<string, Metric>();

  /**
   * Use {@linkcode ModelMetrics.family}.
   *
   * @param backend Where changes go.
   * @param options The declaration.
   */
  constructor(backend: MetricsBackend, options: MetricFamilyOptions) {
    this.#backend = backend;
    this.options = options;
  }

  /**
   * The family's metric with these labels (made, at 0, on the first call).
   *
   * @param options Labels and, for a histogram, buckets.
   * @returns The metric.
   * @throws {TritonBadParameterError} For an invalid label name, buckets on a family that is not
   *   a histogram, or buckets that are not ascending.
   */
  metric(options: MetricOptions = {}): Metric {
    const labels = options.labels ?? {};
    for (const [name, value] of Object.entries(labels)) {
      if (!LABEL.test(name) || name.startsWith("__")) {
        throw new TritonBadParameterError(
          `Cannot make a metric of '${this.options.name}': invalid label name '${name}'`,
        );
      }
      if (typeof value !== "string") {
        throw new TritonBadParameterError(
          `Cannot make a metric of '${this.options.name}': label '${name}' must be a string`,
        );
      }
    }
    const key = JSON.stringify(Object.entries(labels).sort(([a], [b]) => a < b ? -1 : 1));
    const known = this.#metrics.get(key);
    if (known !== undefined) return known;
    let buckets: readonly number[] | undefined;
    if (this.options.kind === "histogram") {
      buckets = options.buckets ?? DEFAULT_BUCKETS;
      if (buckets.length === 0 || buckets.some((b, i) => i > 0 && !(b > buckets![i - 1]!))) {
        throw new TritonBadParameterError(
          `Cannot make a metric of '${this.options.name}': buckets must be ascending numbers`,
        );
      }
    } else if (options.buckets !== undefined) {
      throw new TritonBadParameterError(
        `Cannot make a metric of '${this.options.name}': only histograms have buckets`,
      );
    }
    const metric = new Metric(this.#backend, this.options, {
      labels: { ...labels },
      ...(buckets === undefined ? {} : { buckets }),
    });
    this.#metrics.set(key, metric);
    return metric;
  }
}

/**
 * A model's metrics: `context.metrics` in a callable.
 *
 * @example A counter and a histogram with labels
 * ```ts
 * import { inferContext } from "../../mod.ts";
 * import assert from "node:assert/strict";
 *
 * const context = inferContext({ modelName: "Echo" });
 * const served = context.metrics.family({
 *   name: "echo_served_total", description: "Requests served", kind: "counter",
 * });
 * served.metric({ labels: { route: "a" } }).increment(2);
 * const sizes = context.metrics.family({
 *   name: "echo_size", description: "Input sizes", kind: "histogram",
 * });
 * sizes.metric({ buckets: [1, 10] }).observe(4);
 * assert.throws(() => served.metric().increment(-1), {
 *   message: "Cannot increment counter 'echo_served_total' by -1: a counter only goes up",
 * });
 * ```
 */
export class ModelMetrics {
  readonly #backend: MetricsBackend;
  readonly #families = new Map<string, MetricFamily>();

  /**
   * A model's metrics.
   *
   * @param backend Where changes go.
   */
  constructor(backend: MetricsBackend) {
    this.#backend = backend;
  }

  /**
   * The family of this name (declared on the first call; later calls must agree).
   *
   * @param options Name, description and kind.
   * @returns The family.
   * @throws {TritonBadParameterError} For an invalid name or kind, or a name declared before
   *   with another kind or description.
   */
  family(options: MetricFamilyOptions): MetricFamily {
    const { name, description, kind } = options;
    if (typeof name !== "string" || !NAME.test(name)) {
      throw new TritonBadParameterError(`Cannot declare metric family: invalid name '${name}'`);
    }
    if (kind !== "counter" && kind !== "gauge" && kind !== "histogram") {
      throw new TritonBadParameterError(
        `Cannot declare metric family '${name}': kind must be counter, gauge or histogram, got '${kind}'`,
      );
    }
    const known = this.#families.get(name);
    if (known !== undefined) {
      if (known.options.kind !== kind || known.options.description !== description) {
        throw new TritonBadParameterError(
          `Cannot declare metric family '${name}': it was declared as a ${known.options.kind} with description '${known.options.description}'`,
        );
      }
      return known;
    }
    const family = new MetricFamily(this.#backend, {
      name,
      description: String(description ?? ""),
      kind,
    });
    this.#families.set(name, family);
    return family;
  }
}

/**
 * A backend that keeps nothing: the metrics of a context made outside a server
 * (`inferContext()` in a test) take every change and show it nowhere.
 */
export const DISCARDED_METRICS: MetricsBackend = Object.freeze({ apply: (): void => {} });
