/**
 * The container files as found when they were run against a real Docker engine (issue 22): what made a
 * build or a stop go wrong is held here, read from the files themselves.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { loadAgentConfig } from '../src/agent/config.js';
import { loadServerConfig } from '../src/config.js';
import { parseDuration } from '../src/util/duration.js';
import { composeRedisImage, containerRedisImage } from './support/redis.js';

const root = new URL('../', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, root), 'utf8');

interface ComposeService {
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  stop_grace_period?: string;
}

/** `${NAME:-default}` as compose expands it with NAME unset. */
function withDefaults(environment: Record<string, string> = {}): Record<string, string> {
  return Object.fromEntries(Object.entries(environment).map(([k, v]) => [k, String(v).replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1')]));
}

describe('deployment files', () => {
  const compose = parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, ComposeService> };

  it('every service that drains stops within a grace period longer than its shutdown delay + drain', () => {
    const checked: string[] = [];
    for (const [name, service] of Object.entries(compose.services)) {
      if (service.image !== 'rl-decision-service:local') continue;
      const env = withDefaults(service.environment);
      const agent = service.command?.includes('dist/agent/main.js') ?? false;
      // What the process itself will take after SIGTERM, from its own config loader and defaults.
      const stopSecs = agent
        ? loadAgentConfig(env).drainSecs
        : (({ shutdownDelaySecs, drainSecs }) => shutdownDelaySecs + drainSecs)(loadServerConfig(env));
      expect(service.stop_grace_period, `${name}: stop_grace_period`).to.be.a('string');
      const grace = parseDuration(service.stop_grace_period);
      if (!('ms' in grace)) throw new Error(`${name}: stop_grace_period ${grace.error}`);
      expect(grace.ms / 1000, `${name}: stop_grace_period vs delay + drain`).to.be.greaterThan(stopSecs);
      checked.push(name);
    }
    expect(checked.sort()).to.deep.equal(['agent', 'server-a', 'server-b']);
  });

  it("the docs' and the Dockerfile's docker run give the same room (--stop-timeout above 5 + 10 s)", () => {
    const docs = read('docs/deployment.md').split('\n').filter((line) => /^docker run /.test(line));
    const dockerfile = read('Dockerfile').split('\n').filter((line) => /^#.*\bdocker run /.test(line));
    expect(docs.length, 'docs/deployment.md').to.be.greaterThan(0);
    expect(dockerfile.length, 'Dockerfile').to.be.greaterThan(0);
    const runs = [...docs, ...dockerfile];
    for (const line of runs) {
      const timeout = /--stop-timeout (\d+)/.exec(line);
      expect(timeout, line).to.not.equal(null);
      expect(Number(timeout![1]), line).to.be.greaterThan(5 + 10);
    }
  });

  it('the Dockerfile needs no frontend image, and .dockerignore keeps every node_modules and dist out', () => {
    expect(read('Dockerfile')).to.not.match(/^#\s*syntax=/m);
    const ignored = read('.dockerignore').split('\n').map((line) => line.trim());
    expect(ignored).to.include.members(['**/node_modules', '**/dist']);
  });

  it('compose and the tests run one Redis image tag, pinned to a minor version', () => {
    expect(composeRedisImage()).to.equal(compose.services.redis.image);
    expect(compose.services.redis.image).to.match(/^redis:\d+\.\d+(\.\d+)?-alpine$/);
    const saved = process.env.REDIS_IMAGE;
    delete process.env.REDIS_IMAGE;
    try {
      expect(containerRedisImage()).to.equal(compose.services.redis.image);
    } finally {
      if (saved !== undefined) process.env.REDIS_IMAGE = saved;
    }
  });
});
