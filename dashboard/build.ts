/**
 * Builds the dashboard's static assets into `dist/dashboard/` (or `outDir`): the TypeScript bundled
 * by esbuild into one ES module, the page, its stylesheet and uPlot's stylesheet, all served by the
 * server itself (src/http/routes/dashboard.ts), nothing from a CDN. The RequestContext's JSON Schema
 * goes into the bundle as a constant, so the page's decision form always offers the server's fields.
 * Run: `npm run build:dashboard` (type-checks first) or `tsx dashboard/build.ts [outDir]`.
 */
import { copyFile, mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { RequestContextSchema } from '../src/schema/request-context.js';

const HERE = dirname(fileURLToPath(import.meta.url));
export const DEFAULT_OUT_DIR = resolve(HERE, '../dist/dashboard');

export async function buildDashboard(outDir = DEFAULT_OUT_DIR): Promise<string> {
  await mkdir(outDir, { recursive: true });
  await build({
    entryPoints: [join(HERE, 'src/main.ts')],
    outfile: join(outDir, 'app.js'),
    bundle: true,
    format: 'esm',
    target: 'es2020',
    minify: true,
    sourcemap: false,
    legalComments: 'none',
    logLevel: 'warning',
    // The form of "Try a decision" is built from this (dashboard/src/request-context-schema.ts).
    define: { __RL_REQUEST_CONTEXT_SCHEMA__: JSON.stringify(RequestContextSchema) },
  });
  const uplotCss = join(dirname(createRequire(import.meta.url).resolve('uplot')), 'uPlot.min.css');
  await Promise.all([
    copyFile(join(HERE, 'static/index.html'), join(outDir, 'index.html')),
    copyFile(join(HERE, 'static/dashboard.css'), join(outDir, 'dashboard.css')),
    copyFile(join(HERE, 'static/favicon.svg'), join(outDir, 'favicon.svg')),
    copyFile(uplotCss, join(outDir, 'uPlot.min.css')),
  ]);
  return outDir;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outDir = await buildDashboard(process.argv[2] ? resolve(process.argv[2]) : undefined);
  console.log(`dashboard built into ${outDir}`);
}
