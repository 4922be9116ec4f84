/**
 * Serves Identity until SIGINT/SIGTERM.
 *
 *     deno run -A examples/identity/server.ts
 *
 * @module
 */

import { Triton } from "../../mod.ts";
import { bindIdentity } from "./model.ts";

await using triton = new Triton();
await bindIdentity(triton);
await triton.serve();
