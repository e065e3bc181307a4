/**
 * The live dashboard (docs/dashboard.md): its static assets at /dashboard, served without credentials
 * (they hold no data; the page asks for a key and sends it on every API call), and its one stream
 * endpoint, GET /rl/v1/stream, behind the same authentication as every read route: a subscription to
 * the DashboardHub (analytics/dashboard-hub.ts), which builds the snapshots (past its cap, a 503).
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import Router from '@koa/router';
import type Koa from 'koa';
import { RlError } from '../../errors.js';
import type { DashboardHub } from '../../analytics/dashboard-hub.js';
import { sendError } from '../errors.js';

// ---------------------------------------------------------------------------------------------------
// Static assets

/**
 * Only self-hosted scripts, styles and fetches to this origin: no inline script or style markup (uPlot
 * sets element styles through the CSSOM, which CSP does not govern), no frames, no forms posted anywhere.
 */
export const DASHBOARD_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** The files `npm run build:dashboard` writes, and their content types: nothing else is served. */
const DASHBOARD_FILES: Readonly<Record<string, string>> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'dashboard.css': 'text/css; charset=utf-8',
  'uPlot.min.css': 'text/css; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
};

/**
 * Where the built assets are: `dist/dashboard` beside the compiled server (`dist/http/routes/` → `dist/`),
 * or, when the server runs from source, `dist/dashboard` of the repository.
 */
function defaultAssetDirs(): string[] {
  return [fileURLToPath(new URL('../../dashboard/', import.meta.url)), fileURLToPath(new URL('../../../dist/dashboard/', import.meta.url))];
}

/**
 * Reads the assets on first use and keeps them (a few hundred KB). Missing assets (the dashboard was not
 * built) are a 503 saying how to build them, retried on the next request.
 */
class AssetCache {
  private files: Map<string, Buffer> | undefined;

  constructor(private readonly dirs: string[]) {}

  async get(name: string): Promise<Buffer> {
    this.files ??= await this.load();
    const file = this.files?.get(name);
    if (!file) throw new RlError('unavailable', 'dashboard assets are not built: run `npm run build:dashboard`');
    return file;
  }

  private async load(): Promise<Map<string, Buffer> | undefined> {
    for (const dir of this.dirs) {
      const files = new Map<string, Buffer>();
      try {
        for (const name of Object.keys(DASHBOARD_FILES)) files.set(name, await readFile(dir + name));
        return files;
      } catch {
        // Not (completely) built here; try the next place.
      }
    }
    return undefined;
  }
}

/** GET /dashboard (redirect), /dashboard/ (the page), /dashboard/<asset> and /favicon.ico. Mount before authentication. */
export function dashboardAssetRoutes(options: { assetDirs?: string[] } = {}): Router {
  const cache = new AssetCache(options.assetDirs ?? defaultAssetDirs());
  const router = new Router();
  const send = async (ctx: Koa.Context, name: string) => {
    const type = Object.prototype.hasOwnProperty.call(DASHBOARD_FILES, name) ? DASHBOARD_FILES[name] : undefined;
    if (!type) return sendError(ctx, 404, `no dashboard asset ${JSON.stringify(name.slice(0, 80))}`);
    const body = await cache.get(name);
    ctx.set('Content-Security-Policy', DASHBOARD_CSP);
    ctx.type = type;
    ctx.body = body;
  };
  // The router takes a trailing slash as optional: one route for both, so relative asset URLs resolve under /dashboard/.
  router.get('/dashboard', (ctx) => (ctx.path.endsWith('/') ? send(ctx, 'index.html') : ctx.redirect('/dashboard/')));
  router.get('/dashboard/:file', (ctx) => send(ctx, ctx.params.file));
  // Browsers and tools ask the site root for an icon whatever the page links: the same image, not a 404.
  router.get('/favicon.ico', (ctx) => send(ctx, 'favicon.svg'));
  return router;
}

// ---------------------------------------------------------------------------------------------------
// Stream

/** GET /rl/v1/stream: server-sent events, `hello` then a `snapshot` per tick. Any reader may subscribe. */
export function dashboardStreamRoutes(hub: DashboardHub): Router {
  const router = new Router({ prefix: '/rl/v1' });
  router.get('/stream', (ctx) => {
    const principal = (ctx.state as { principal?: { subject: string; role: string | null; orgs?: readonly string[] } }).principal;
    const role = principal?.role ?? null;
    // A viewer limited to organisations gets their view (the hub's per-organisation feeds).
    const stream = hub.subscribe({ subject: principal?.subject ?? 'anonymous', role, can_edit: role === 'admin' }, principal?.orgs);
    // The response closes when the viewer goes away (or the stream ended): the subscription goes with it.
    ctx.res.once('close', () => stream.destroy());
    ctx.status = 200;
    ctx.type = 'text/event-stream';
    ctx.set('X-Accel-Buffering', 'no');
    ctx.body = stream;
  });
  return router;
}
