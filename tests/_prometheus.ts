/**
 * A tiny parser of the Prometheus text exposition format for the metrics tests: samples with
 * labels, `# HELP` and `# TYPE` lines.
 *
 * @module
 */

/** One sample line. */
export interface Sample {
  /** Metric name. */
  readonly name: string;
  /** Labels by name. */
  readonly labels: Readonly<Record<string, string>>;
  /** The value. */
  readonly value: number;
}

/** A parsed exposition. */
export interface Exposition {
  /** Every sample, in order. */
  readonly samples: readonly Sample[];
  /** `# TYPE` of each metric family. */
  readonly types: ReadonlyMap<string, string>;
  /** `# HELP` of each metric family. */
  readonly help: ReadonlyMap<string, string>;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$/;
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)/y;

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < text.length) {
    const start = LABEL.lastIndex;
    const match = LABEL.exec(text);
    if (match === null) throw new Error(`Invalid labels at ${start} in line: ${line}`);
    labels[match[1]!] = match[2]!.replace(/\\(.)/g, (_, c: string) => c === "n" ? "\n" : c);
  }
  return labels;
}

function parseValue(text: string, line: string): number {
  if (text === "+Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  if (text === "NaN") return NaN;
  const value = Number(text);
  if (Number.isNaN(value)) throw new Error(`Invalid value in line: ${line}`);
  return value;
}

/**
 * Parses Prometheus text; throws on any line that is not a comment, blank or a sample.
 *
 * @param text The exposition.
 * @returns Samples, types and help texts.
 */
export function parsePrometheus(text: string): Exposition {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  const help = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    if (line.startsWith("#")) {
      const match = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (match?.[1] === "TYPE") types.set(match[2]!, match[3]!);
      else if (match?.[1] === "HELP") help.set(match[2]!, match[3]!);
      continue;
    }
    const match = SAMPLE.exec(line);
    if (match === null) throw new Error(`Invalid sample line: ${line}`);
    samples.push({
      name: match[1]!,
      labels: match[2] === undefined ? {} : parseLabels(match[2], line),
      value: parseValue(match[3]!, line),
    });
  }
  return { samples, types, help };
}

/**
 * The value of the one sample with a name whose labels include the given ones.
 *
 * @param exposition The parsed exposition.
 * @param name Metric name.
 * @param labels Labels the sample must have.
 * @returns The value, or `undefined` when no sample matches.
 * @throws {Error} When several samples match.
 */
export function valueOf(
  exposition: Exposition,
  name: string,
  labels: Readonly<Record<string, string>> = {},
): number | undefined {
  const found = exposition.samples.filter((s) =>
    s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)
  );
  if (found.length > 1) {
    throw new Error(`Several samples of ${name} match ${JSON.stringify(labels)}`);
  }
  return found[0]?.value;
}

/**
 * Scrapes and parses `${metricsUrl}/metrics`.
 *
 * @param metricsUrl The metrics base URL.
 * @returns The parsed exposition.
 */
export async function scrape(metricsUrl: string): Promise<Exposition> {
  const response = await fetch(`${metricsUrl}/metrics`);
  if (response.status !== 200) throw new Error(`Scrape failed: ${response.status}`);
  return parsePrometheus(await response.text());
}
