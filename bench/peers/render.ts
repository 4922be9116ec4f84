/**
 * Re-renders a saved peers run (its `.json`) into its `.md` and `.svg` without measuring again,
 * optionally with findings written after the run (a Markdown file, shown before the tables and
 * kept in the `.json`).
 *
 *     deno run -A bench/peers/render.ts bench/results/peers-<date>-<machine>.json \
 *       [--findings findings.md]
 *
 * @module
 */

import { option } from "../args.ts";
import { formatWritten } from "../report.ts";
import { peersChart, peersMarkdown, type PeersRun } from "./report.ts";

const path = Deno.args.find((arg) => arg.endsWith(".json"));
if (path === undefined) throw new Error("Cannot render: give the run's .json file");
let run = JSON.parse(await Deno.readTextFile(path)) as PeersRun;
const findings = option("findings");
if (findings !== undefined) {
  run = { ...run, findings: await Deno.readTextFile(findings) };
  await Deno.writeTextFile(path, JSON.stringify(run, null, 2) + "\n");
}
const base = path.replace(/\.json$/, "");
const chart = `${base.split("/").at(-1)}.svg`;
await Deno.writeTextFile(`${base}.svg`, peersChart(run));
await Deno.writeTextFile(`${base}.md`, peersMarkdown(run, chart));
await formatWritten([`${base}.md`, `${base}.svg`]);
console.log(`rendered ${base}.md`);
