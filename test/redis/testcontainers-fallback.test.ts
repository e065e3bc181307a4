/**
 * `startRedis()` never strands the suite (issue 22): whatever makes the Testcontainers attempt fail, a
 * private redis-server takes its place and one line says why.
 *
 * This machine has no Docker engine, so the attempt is forced through DOCKER_HOST: first at a socket
 * nobody listens on (no engine answering), then at a stand-in engine that answers the Docker API's
 * start-up questions, holds one image and refuses every pull, as an engine without registry access does:
 * with Ryuk on, the Ryuk image cannot be pulled (Ryuk unavailable); with TESTCONTAINERS_RYUK_DISABLED=true
 * an image it does not hold cannot be pulled (pull refused), and the one it holds does not start (start
 * failure). Redis itself is real throughout. (Testcontainers remembers a working engine and a disabled
 * Ryuk for the process, hence the order.)
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { command, startRedis, type RedisHandle } from '../support/redis.js';

const UNPULLABLE = 'rl-test.invalid/no-such-redis:never';
/** The one image the stand-in engine holds. */
const PRESENT = 'rl-test.invalid/present-redis:1';

describe('startRedis: the Testcontainers attempt falls back to redis-server', function () {
  this.timeout(60_000);
  const saved = { ...process.env };
  const dir = mkdtempSync(join(tmpdir(), 'rl-fake-docker-'));
  const socket = join(dir, 'docker.sock');
  const pulls: string[] = [];
  let engine: Server | undefined;
  const handles: RedisHandle[] = [];

  before(() => {
    delete process.env.REDIS_URL;
    process.env.DOCKER_HOST = `unix://${socket}`;
    process.env.REDIS_IMAGE = UNPULLABLE;
  });

  after(async () => {
    await Promise.all(handles.map((h) => h.stop()));
    await new Promise<void>((resolve) => (engine ? engine.close(() => resolve()) : resolve()));
    rmSync(dir, { recursive: true, force: true });
    for (const name of ['REDIS_URL', 'DOCKER_HOST', 'REDIS_IMAGE', 'TESTCONTAINERS_RYUK_DISABLED']) {
      if (saved[name] === undefined) delete process.env[name];
      else process.env[name] = saved[name];
    }
  });

  /** startRedis with its log captured; the handle must be a private redis-server that answers. */
  async function fallBack(image: string): Promise<string[]> {
    process.env.REDIS_IMAGE = image;
    const lines: string[] = [];
    const redis = await startRedis({ log: (line) => lines.push(line), containerTimeoutMs: 20_000 });
    handles.push(redis);
    expect(redis.host).to.equal('127.0.0.1');
    expect(await command(redis.host, redis.port, ['PING'])).to.equal('PONG');
    const info = String(await command(redis.host, redis.port, ['INFO', 'server']));
    expect(info, 'a redis-server process of our own').to.match(/executable:.*redis-server/);
    expect(lines, "one line").to.have.length(1);
    expect(lines[0]).to.include(image).and.to.include('using a private redis-server instead');
    return lines;
  }

  it('no engine answering at DOCKER_HOST', async () => {
    const [line] = await fallBack(UNPULLABLE);
    expect(line).to.match(/container runtime|ENOENT|connect/i);
  });

  it('Ryuk unavailable: the engine refuses to pull its image', async () => {
    engine = await fakeEngine(socket, pulls);
    const [line] = await fallBack(PRESENT);
    expect(pulls, 'pulls asked').to.have.length(1);
    expect(pulls[0]).to.match(/ryuk/);
    expect(line).to.match(/pull access denied for .*ryuk/);
  });

  it('pull refused: the Redis image cannot be pulled (Ryuk disabled)', async () => {
    process.env.TESTCONTAINERS_RYUK_DISABLED = 'true';
    pulls.length = 0;
    const [line] = await fallBack(UNPULLABLE);
    expect(pulls).to.deep.equal([UNPULLABLE]);
    expect(line).to.match(/pull access denied for rl-test.invalid\/no-such-redis/);
  });

  it('start failure: the image is there, the container does not start', async () => {
    pulls.length = 0;
    const [line] = await fallBack(PRESENT);
    expect(pulls, 'nothing to pull').to.deep.equal([]);
    expect(line).to.match(/cannot create containers/);
  });
});

/**
 * A stand-in Docker engine on a unix socket: it answers what Testcontainers asks at start-up (info, the
 * bridge network, the container list), holds one image, refuses every pull (as an engine cut off from
 * its registry does) and creates no container.
 */
function fakeEngine(path: string, pulls: string[]): Promise<Server> {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://docker');
    const route = url.pathname.replace(/^\/v\d+\.\d+/, '');
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    req.resume();
    if (req.method === 'GET' && (route === '/_ping' || route === '/version')) return json(200, { ApiVersion: '1.43', Version: 'fake' });
    if (req.method === 'GET' && route === '/info') {
      return json(200, { ServerVersion: 'fake', OperatingSystem: 'fake', OSType: 'linux', Architecture: 'x86_64', NCPU: 1, MemTotal: 1, IndexServerAddress: '' });
    }
    // Asked when the tests themselves run in a container: where published ports are reached.
    if (req.method === 'GET' && route === '/networks/bridge') return json(200, { Name: 'bridge', IPAM: { Config: [{ Gateway: '127.0.0.1' }] } });
    if (req.method === 'GET' && route === '/containers/json') return json(200, []);
    const inspected = /^\/images\/(.+)\/json$/.exec(route);
    if (req.method === 'GET' && inspected) {
      const name = decodeURIComponent(inspected[1]);
      return name === PRESENT ? json(200, { Id: 'sha256:0', RepoTags: [PRESENT] }) : json(404, { message: `No such image: ${name}` });
    }
    if (req.method === 'POST' && route === '/containers/create') return json(500, { message: 'this engine cannot create containers' });
    if (req.method === 'POST' && route === '/images/create') {
      const image = `${url.searchParams.get('fromImage')}:${url.searchParams.get('tag')}`;
      pulls.push(image);
      return json(404, { message: `pull access denied for ${image}, repository does not exist or may require 'docker login'` });
    }
    return json(404, { message: `no such object: ${req.method} ${route}` });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve(server));
  });
}
