/**
 * `startRedis()` never strands the suite (issue 22): whatever makes the Testcontainers attempt fail, a
 * private redis-server takes its place and one line says why.
 *
 * The attempt is forced through DOCKER_HOST: first at a socket nobody listens on (no engine answering
 * there; Testcontainers then tries the machine's own engine, if it has one), then at a stand-in engine
 * that answers the Docker API's start-up questions, holds one image and refuses every pull, as an engine
 * without registry access does: with Ryuk on, the Ryuk image cannot be pulled (Ryuk unavailable); with
 * TESTCONTAINERS_RYUK_DISABLED=true an image it does not hold cannot be pulled (pull refused), and the one
 * it holds does not start (start failure). Redis itself is real throughout. Each case runs `startRedis()` in a process of its own
 * (test/support/start-redis-child.ts): Testcontainers remembers the engine it found and a disabled Ryuk for
 * the life of a process, which would otherwise leak into the rest of the suite.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const UNPULLABLE = 'rl-test.invalid/no-such-redis:never';
/** The one image the stand-in engine holds. */
const PRESENT = 'rl-test.invalid/present-redis:1';

describe('startRedis: the Testcontainers attempt falls back to redis-server', function () {
  this.timeout(60_000);
  const dir = mkdtempSync(join(tmpdir(), 'rl-fake-docker-'));
  const socket = join(dir, 'docker.sock');
  const pulls: string[] = [];
  let engine: Server | undefined;

  before(async () => {
    engine = await fakeEngine(join(dir, 'engine.sock'), pulls);
  });

  after(async () => {
    await new Promise<void>((resolve) => (engine ? engine.close(() => resolve()) : resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  /** startRedis in a fresh process, its log captured; what it got must be a private redis-server that answers. */
  async function fallBack(image: string, env: { DOCKER_HOST: string; TESTCONTAINERS_RYUK_DISABLED?: string }): Promise<string[]> {
    const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env, REDIS_IMAGE: image };
    delete childEnv.REDIS_URL;
    if (env.TESTCONTAINERS_RYUK_DISABLED === undefined) delete childEnv.TESTCONTAINERS_RYUK_DISABLED;
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'test/support/start-redis-child.ts'], { env: childEnv, timeout: 50_000 });
    const got = JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as { lines: string[]; host: string; ping: string; executable: string };
    expect(got.host).to.equal('127.0.0.1');
    expect(got.ping).to.equal('PONG');
    expect(got.executable, 'a redis-server process of our own').to.match(/redis-server/);
    expect(got.lines, 'one line').to.have.length(1);
    expect(got.lines[0]).to.include(image).and.to.include('using a private redis-server instead');
    return got.lines;
  }

  const nobody = { DOCKER_HOST: `unix://${socket}` };
  const standIn = (): { DOCKER_HOST: string } => ({ DOCKER_HOST: `unix://${join(dir, 'engine.sock')}` });

  // With DOCKER_HOST dead, Testcontainers moves on to the machine's own engine, if one answers: then the
  // fallback is the same, and the line says why that engine could not run the image (its registry,
  // rl-test.invalid, never resolves). Without one, the line says no engine answered.
  it('no engine answering at DOCKER_HOST', async () => {
    const machineEngine = await engineFoundAfter(nobody);
    const [line] = await fallBack(UNPULLABLE, nobody);
    const why = line.slice(line.indexOf(UNPULLABLE) + UNPULLABLE.length);
    if (machineEngine) {
      expect(why, 'the machine\'s engine tried the image\'s registry').to.include('rl-test.invalid').and.not.match(/container runtime/i);
    } else {
      expect(why).to.match(/container runtime|ENOENT|connect/i);
    }
  });

  it('Ryuk unavailable: the engine refuses to pull its image', async () => {
    pulls.length = 0;
    const [line] = await fallBack(PRESENT, standIn());
    expect(pulls, 'pulls asked').to.have.length(1);
    expect(pulls[0]).to.match(/ryuk/);
    expect(line).to.match(/pull access denied for .*ryuk/);
  });

  it('pull refused: the Redis image cannot be pulled (Ryuk disabled)', async () => {
    pulls.length = 0;
    const [line] = await fallBack(UNPULLABLE, { ...standIn(), TESTCONTAINERS_RYUK_DISABLED: 'true' });
    expect(pulls).to.deep.equal([UNPULLABLE]);
    expect(line).to.match(/pull access denied for rl-test.invalid\/no-such-redis/);
  });

  it('start failure: the image is there, the container does not start', async () => {
    pulls.length = 0;
    const [line] = await fallBack(PRESENT, { ...standIn(), TESTCONTAINERS_RYUK_DISABLED: 'true' });
    expect(pulls, 'nothing to pull').to.deep.equal([]);
    expect(line).to.match(/cannot create containers/);
  });
});

/**
 * Whether Testcontainers, asked in a process of its own with this environment, finds an engine that
 * answers (the machine's own, past a dead DOCKER_HOST): the strategies it tries are its business.
 */
async function engineFoundAfter(env: { DOCKER_HOST: string }): Promise<boolean> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  const probe = "import('testcontainers').then((tc) => tc.getContainerRuntimeClient()).then(() => console.log('found'), () => console.log('none'))";
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', probe], { env: childEnv, timeout: 20_000 });
  return stdout.trim() === 'found';
}

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
