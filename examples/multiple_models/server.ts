/**
 * Serves Multiply2 and Multiply4 until SIGINT/SIGTERM.
 *
 *     deno run -A examples/multiple_models/server.ts
 *
 * @module
 */

import { Triton } from "../../mod.ts";
import { bindMultipliers } from "./model.ts";

await using triton = new Triton();
await bindMultipliers(triton);
await triton.serve();
