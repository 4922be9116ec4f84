/**
 * `Fixed` (tests/_openai_models.ts) as a Worker instance module.
 *
 * @module
 */

import { generateFunc } from "../../mod.ts";
import { fixedTokens } from "../_openai_models.ts";

/** The factory. */
export default function factory(): ReturnType<typeof generateFunc> {
  return generateFunc(fixedTokens);
}
