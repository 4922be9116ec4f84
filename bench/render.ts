/**
 * Re-renders a saved benchmark run (its `.json`) into its `.md` and `.svg`, and optionally the
 * README's "Benchmarks" section, without measuring again.
 *
 *     deno run -A bench/render.ts bench/results/<date>-<machine>.json [--readme]
 *
 * @module
 */

import {
  type BenchRun,
  headlines,
  markdownReport,
  ratioChart,
  readmeSection,
  replaceReadmeSection,
} from "./report.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const path = Deno.args.find((arg) => arg.endsWith(".json"));
if (path === undefined) throw new Error("Cannot render: give the run's .json file");
const run = JSON.parse(await Deno.readTextFile(path)) as BenchRun;
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
if (Deno.args.includes("--readme")) {
  const absolute = await Deno.realPath(`${base}.md`);
  const rel = absolute.startsWith(ROOT) ? absolute.slice(ROOT.length + 1) : absolute;
  const readme = await Deno.readTextFile(`${ROOT}/README.md`);
  await Deno.writeTextFile(
    `${ROOT}/README.md`,
    replaceReadmeSection(readme, readmeSection(run, rel, rel.replace(/\.md$/, ".svg"))),
  );
}
console.log(`rendered ${base}.md`);
