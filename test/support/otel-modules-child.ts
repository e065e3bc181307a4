/**
 * The server, started as main.ts starts it, that reports after one decision over HTTP which
 * OpenTelemetry packages its process has loaded (they load through the CommonJS loader, so its cache
 * sees them): test/observability/tracing.test.ts, "no tracing code without an endpoint".
 */
import { createRequire } from 'node:module';
import { loadServerConfig } from '../../src/config.js';
import { startServer } from '../../src/server.js';
import { log } from '../../src/util/log.js';

const server = await startServer(loadServerConfig(process.env));
process.once('SIGTERM', () => void server.drain().then(() => process.exit(0)));
await fetch(`http://127.0.0.1:${server.httpPort}/rl/v1/check`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"service":"probe"}' });
const packages = new Set<string>();
for (const path of Object.keys(createRequire(import.meta.url).cache)) {
  const name = /node_modules\/(@opentelemetry\/[^/]+)\//.exec(path)?.[1];
  if (name !== undefined) packages.add(name);
}
log.info('opentelemetry packages', { loaded: [...packages].sort() });
