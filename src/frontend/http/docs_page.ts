/**
 * The front end's description of itself: `GET /v2/openapi.json` (the OpenAPI document, built
 * for each request from the route tables, the models served at that moment and the restricted
 * endpoint groups) and the docs page at `/docs`, Swagger UI over that document, whose "Try it
 * out" calls the same server. The page works offline: Swagger UI's files come from the
 * `swagger-ui-dist` npm package (`_swagger_ui.ts`) and are served by the server itself, and the
 * page asks no other host for anything (its online validator is off).
 *
 * @module
 */

import type { Engine, ModelHandle } from "../../engine/engine.ts";
import type { ModelRepository } from "../../engine/repository.ts";
import { jsonResponse } from "./errors.ts";
import { openApiDocument } from "./openapi.ts";
import { jsonContent, type RouteDoc } from "./route_doc.ts";
import type { Router } from "./router.ts";
import type { RouteHandler } from "./router.ts";

/** Options of {@linkcode addDocRoutes}. */
export interface DocRoutesOptions {
  /** Every route table the front end serves (the one these routes join included). */
  readonly tables: readonly Router<unknown>[];
  /** The engine, whose models get their own paths. */
  readonly engine: Engine;
  /** The models served (a bound model's READY versions). */
  readonly repository: ModelRepository;
  /** The endpoint groups that need the access token. */
  readonly restricted: ReadonlySet<string>;
  /** Serve the docs page at `/docs`. */
  readonly docsPage: boolean;
}

/** The docs page's files, loaded once, when it is first asked for. */
let assets: Promise<typeof import("./_swagger_ui.ts")> | undefined;

function swaggerUi(): Promise<typeof import("./_swagger_ui.ts")> {
  assets ??= import("./_swagger_ui.ts");
  return assets;
}

// Relative URLs: the page works behind a proxy that serves the server under a path prefix.
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>DenoTriton API</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="docs/swagger-ui-bundle.js"></script>
<script src="docs/docs.js"></script>
</body>
</html>
`;

// validatorUrl null: Swagger UI would otherwise send the document to an online validator.
const SCRIPT = `"use strict";
window.ui = SwaggerUIBundle({
  url: new URL("v2/openapi.json", document.baseURI).href,
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
});
`;

// Swagger UI sets inline styles; scripts, styles and requests stay on this server.
const PAGE_HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "content-security-policy":
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; frame-ancestors 'self'",
  "x-content-type-options": "nosniff",
  "cache-control": "no-cache",
};

function asset(body: string, type: string): Response {
  return new Response(body, {
    headers: {
      "content-type": `${type}; charset=utf-8`,
      "x-content-type-options": "nosniff",
      "cache-control": "public, max-age=3600",
    },
  });
}

function assetDoc(operationId: string, summary: string, type: string): RouteDoc {
  return {
    operationId,
    summary,
    tag: "docs",
    responses: {
      200: { description: summary, content: { [type]: { schema: { type: "string" } } } },
    },
  };
}

function servedModels(engine: Engine, repository: ModelRepository): ModelHandle[] {
  const names = new Set(
    repository.index(true).filter((entry) => entry.state === "READY").map((entry) => entry.name),
  );
  const models: ModelHandle[] = [];
  // In name order, so that the document does not change with the order of loads.
  for (const name of [...names].sort()) {
    try {
      models.push(engine.model(name));
    } catch {
      // Unloaded since the index was read: it is not served, so it has no paths.
    }
  }
  return models;
}

/**
 * Adds `GET /v2/openapi.json` (endpoint group `metadata`: it names the models, as their metadata
 * does) and, unless turned off, the docs page at `/docs` with its files (no endpoint group: a
 * browser cannot send the token when it opens a page, and the page holds nothing of the server).
 *
 * @param router The route table to add them to.
 * @param options The tables to describe, the engine and repository, the restricted groups, and
 *   whether to serve the page.
 * @returns The router.
 */
export function addDocRoutes(
  router: Router<RouteHandler>,
  options: DocRoutesOptions,
): Router<RouteHandler> {
  router.add(
    "GET",
    "/v2/openapi.json",
    {
      group: "metadata",
      handler: () =>
        Promise.resolve(jsonResponse(openApiDocument({
          tables: options.tables,
          models: servedModels(options.engine, options.repository),
          restricted: options.restricted,
        }))),
      doc: {
        operationId: "openApiDocument",
        summary: "This API's OpenAPI 3.1 document, with a path for each model served",
        responses: {
          200: {
            description: "The document",
            content: jsonContent({ type: "object", required: ["openapi", "info", "paths"] }),
          },
        },
      },
    },
  );
  if (!options.docsPage) return router;
  const css = "text/css";
  const js = "text/javascript";
  return router
    .add(
      "GET",
      "/docs",
      {
        group: undefined,
        handler: () => Promise.resolve(new Response(PAGE, { headers: PAGE_HEADERS })),
        doc: {
          ...assetDoc("docsPage", "This page: Swagger UI over /v2/openapi.json", "text/html"),
          description: "Turned off by `httpDocs: false`.",
        },
      },
    )
    .add(
      "GET",
      "/docs/swagger-ui.css",
      {
        group: undefined,
        handler: async () => asset((await swaggerUi()).SWAGGER_UI_CSS, css),
        doc: assetDoc("docsStyle", "Swagger UI's style sheet", css),
      },
    )
    .add(
      "GET",
      "/docs/swagger-ui-bundle.js",
      {
        group: undefined,
        handler: async () => asset((await swaggerUi()).SWAGGER_UI_BUNDLE, js),
        doc: assetDoc("docsBundle", "Swagger UI's script", js),
      },
    )
    .add(
      "GET",
      "/docs/docs.js",
      {
        group: undefined,
        handler: () => Promise.resolve(asset(SCRIPT, js)),
        doc: assetDoc(
          "docsScript",
          "The script that starts Swagger UI on this server's document",
          js,
        ),
      },
    );
}
