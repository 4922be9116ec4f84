/**
 * Re-renders a saved benchmark run (its `.json`) into its `.md` and `.svg`, and optionally the
 * README's "Benchmarks" section, without measuring again.
 *
 *     deno run -A bench/render.ts bench/results/<date>-<machine>.json [--readme]
 *       [--replace <other>.json]
 *
 * `--replace` takes the cells of the scenarios measured in another run (`run.ts --scenarios`)
 * in place of this run's, and notes it.
 *
 * @module
 */

import {
  type BenchRun,
  formatWritten,
  headlines,
  markdownReport,
  ratioChart,
  readmeSection,
  replaceReadmeSection,
} from "./report.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const path = Deno.args.find((arg, i) => arg.endsWith(".json") && Deno.args[i - 1] !== "--replace");
if (path === undefined) throw new Error("Cannot render: give the run's .json file");
let run = JSON.parse(await Deno.readTextFile(path)) as BenchRun;
const replaceIndex = Deno.args.indexOf("--replace");
if (replaceIndex >= 0) {
  const otherPath = Deno.args[replaceIndex + 1]!;
  const other = JSON.parse(await Deno.readTextFile(otherPath)) as BenchRun;
  const models = new Set(other.cells.map((cell) => cell.model));
  run = {
    ...run,
    cells: [...run.cells.filter((cell) => !models.has(cell.model)), ...other.cells],
    profiles: [
      ...run.profiles.filter((profile) => !models.has(profile.model)),
      ...other.profiles,
    ],
    notes: [
      ...run.notes,
      `The ${[...models].join(", ")} cells come from a second run (${other.date}, load average ` +
      `${other.facts["load average at start"]} → ${other.facts["load average at end"]}), ` +
      "all servers measured in it as here.",
    ],
  };
  await Deno.writeTextFile(path, JSON.stringify(run, null, 2) + "\n");
}
const base = path.replace(/\.json$/, "");
const chart = `${base.split("/").at(-1)}.svg`;
await Deno.writeTextFile(
  `${base}.svg`,
  ratioChart(
    headlines(run),
    `DenoTriton / PyTriton, ${run.date.slice(0, 10)}, ${run.facts["cores"]} cores`,
  ),
);
await Deno.writeTextFile(`${base}.md`, markdownReport(run, chart));
await formatWritten([`${base}.md`, `${base}.svg`]);
if (Deno.args.includes("--readme")) {
  const absolute = await Deno.realPath(`${base}.md`);
  const rel = absolute.startsWith(ROOT) ? absolute.slice(ROOT.length + 1) : absolute;
  const readme = await Deno.readTextFile(`${ROOT}/README.md`);
  await Deno.writeTextFile(
    `${ROOT}/README.md`,
    replaceReadmeSection(readme, readmeSection(run, rel, rel.replace(/\.md$/, ".svg"))),
  );
  await formatWritten([`${ROOT}/README.md`]);
}
console.log(`rendered ${base}.md`);
