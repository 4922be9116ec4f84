/**
 * Serves AddSubOptional until SIGINT/SIGTERM.
 *
 *     deno run -A examples/add_sub_optionals/server.ts
 *
 * @module
 */

import { Triton } from "../../mod.ts";
import { bindAddSubOptional } from "./model.ts";

await using triton = new Triton();
await bindAddSubOptional(triton);
await triton.serve();
