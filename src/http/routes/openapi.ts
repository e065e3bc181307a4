import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import Router from '@koa/router';
import type Koa from 'koa';
import { openApiJson } from '../../schema/openapi.js';
import { sendError } from '../errors.js';

/**
 * The API reference: GET /rl/v1/openapi.json (schema/openapi.ts) and GET /rl/v1/docs, a page rendered
 * from it in the browser by Swagger UI (swagger-ui-dist), whose files are served from node_modules by
 * this server (no CDN). Public: the document describes the API, not any data, and is what a client
 * author needs before holding a key; the server mounts these routes before authentication.
 */

/**
 * The docs page's own Content-Security-Policy (every other answer keeps the strict default of
 * http/headers.ts): scripts, styles, fonts and fetches from this origin only, plus data: images
 * (Swagger UI's icons are inline SVG data URIs). No inline script or style markup is needed: the page's
 * start-up script is a file (docs-init.js), and Swagger UI styles elements through the CSSOM, which CSP
 * does not govern. test/http/openapi-docs.test.ts renders the page and fails on any violation.
 */
export const DOCS_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; " +
  "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export const DOCS_PATH = '/rl/v1/docs';
export const OPENAPI_PATH = '/rl/v1/openapi.json';

/** Swagger UI's files this page uses, and their content types: nothing else under /rl/v1/docs/ is served. */
const SWAGGER_FILES: Readonly<Record<string, string>> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
};

/** The page: no inline script (the CSP forbids it); docs-init.js starts Swagger UI. */
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Rate-limit decision service — API reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="${DOCS_PATH}/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${DOCS_PATH}/swagger-ui-bundle.js"></script>
<script src="${DOCS_PATH}/docs-init.js"></script>
</body>
</html>
`;

const INIT_SCRIPT = `window.ui = SwaggerUIBundle({ url: ${JSON.stringify(OPENAPI_PATH)}, dom_id: '#swagger-ui', deepLinking: true, tryItOutEnabled: false });\n`;

/** Where swagger-ui-dist is installed (resolved as Node resolves the package). */
function swaggerDir(): string {
  return dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
}

export function openApiRoutes(version?: string): Router {
  const router = new Router();
  const documentText = openApiJson(version);
  const files = new Map<string, Promise<Buffer>>();
  const asset = (name: string) => {
    let file = files.get(name);
    if (!file) {
      file = readFile(join(swaggerDir(), name));
      // A failed read is retried on the next request rather than remembered.
      file.catch(() => files.delete(name));
      files.set(name, file);
    }
    return file;
  };

  router.get(OPENAPI_PATH, (ctx) => {
    if (!ctx.accepts('application/json')) return sendError(ctx, 406, 'the Accept header admits no application/json');
    ctx.type = 'application/json';
    ctx.body = documentText;
  });
  router.get(DOCS_PATH, (ctx) => {
    if (!ctx.accepts('text/html')) return sendError(ctx, 406, 'the Accept header admits no text/html');
    docsHeaders(ctx);
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = PAGE;
  });
  router.get(`${DOCS_PATH}/docs-init.js`, (ctx) => {
    docsHeaders(ctx);
    ctx.type = 'text/javascript; charset=utf-8';
    ctx.body = INIT_SCRIPT;
  });
  router.get(`${DOCS_PATH}/:file`, async (ctx, next) => {
    const type = Object.prototype.hasOwnProperty.call(SWAGGER_FILES, ctx.params.file) ? SWAGGER_FILES[ctx.params.file] : undefined;
    if (type === undefined) return next();
    const body = await asset(ctx.params.file);
    docsHeaders(ctx);
    // The files change only with the installed swagger-ui-dist: let browsers keep them an hour.
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.type = type;
    ctx.body = body;
  });
  return router;
}

function docsHeaders(ctx: Koa.Context): void {
  ctx.set('Content-Security-Policy', DOCS_CSP);
}
