/**
 * Swagger UI's files for the docs page, from the `swagger-ui-dist` npm package, imported as text.
 * A text import is resolved like any module, from Deno's npm cache, so serving the page needs no
 * `--allow-read`, and the files are not copied into this repository or the JSR package.
 * `docs_page.ts` imports this module only when the page is first asked for, so a server that
 * never serves it never loads its 1.9 MB.
 *
 * @module
 */

import bundle from "swagger-ui-dist/swagger-ui-bundle.js" with { type: "text" };
import css from "swagger-ui-dist/swagger-ui.css" with { type: "text" };

/** `swagger-ui-bundle.js`: Swagger UI with its dependencies, for a browser. */
export const SWAGGER_UI_BUNDLE: string = bundle;

/** `swagger-ui.css`. */
export const SWAGGER_UI_CSS: string = css;
