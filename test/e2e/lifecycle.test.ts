import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServerProcess } from '../support/server-process.js';

/**
 * SIGTERM: readiness goes 503 at once (see test/http/cross-cutting.test.ts for /readyz itself), the
 * request in flight finishes, and the process exits 0 within RL_DRAIN_SECS.
 */
describe('lifecycle: drain on SIGTERM (real process)', function () {
  this.timeout(40_000);
  let dataDir: string;
  beforeEach(() => (dataDir = mkdtempSync(join(tmpdir(), 'rl-lifecycle-'))));
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

  const body = JSON.stringify({ org_id: 'acme', signal_type: 'http', user_id: 'drain' });

  /** Sends the request line, headers and the first half of the body; the rest is up to the caller. */
  function startSlowRequest(port: number): Promise<{ socket: Socket; response: Promise<string> }> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(
          `POST /rl/v1/check HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n` +
            body.slice(0, 10),
        );
        let text = '';
        const response = new Promise<string>((done) => {
          socket.setEncoding('utf8');
          socket.on('data', (chunk: string) => (text += chunk));
          socket.on('close', () => done(text));
        });
        resolve({ socket, response });
      });
      socket.on('error', reject);
    });
  }

  it('finishes the request in flight, then exits 0', async () => {
    const server = await startServerProcess({ RL_DATA_DIR: dataDir, RL_DRAIN_SECS: '10' });
    const { socket, response } = await startSlowRequest(server.port);
    await new Promise((r) => setTimeout(r, 100));
    const signalled = Date.now();
    process.kill(server.pid, 'SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    socket.end(body.slice(10));
    const text = await response;
    expect(text).to.match(/^HTTP\/1\.1 200 OK/);
    expect(text).to.contain('"matched_policy_id":"acme-api-per-user"');
    const exit = await server.exited;
    expect(exit).to.deep.equal({ code: 0, signal: null });
    expect(Date.now() - signalled).to.be.below(10_000);
    expect(server.logs().map((l) => l.message)).to.include.members(['draining', 'stopped']);
  });

  it('exits 0 within RL_DRAIN_SECS even when a request never completes', async () => {
    const server = await startServerProcess({ RL_DATA_DIR: dataDir, RL_DRAIN_SECS: '1' });
    const { socket } = await startSlowRequest(server.port);
    await new Promise((r) => setTimeout(r, 100));
    const signalled = Date.now();
    process.kill(server.pid, 'SIGTERM');
    const exit = await server.exited;
    socket.destroy();
    expect(exit).to.deep.equal({ code: 0, signal: null });
    expect(Date.now() - signalled).to.be.within(900, 5_000);
  });
});

describe('lifecycle: a bad configuration stops start-up (real process)', function () {
  this.timeout(40_000);

  /** Starts `entry` with `env`; returns the error startServerProcess rejects with (the process never listens). */
  async function startFailure(env: Record<string, string>, entry?: string): Promise<string> {
    try {
      const handle = await startServerProcess(env, { entry });
      await handle.kill();
    } catch (error) {
      return (error as Error).message;
    }
    throw new Error('the process started');
  }

  for (const [entry, variable, value] of [
    ['src/main.ts', 'RL_COUNTERSTORE_ADDR', 'ftp://redis:6379'],
    ['src/main.ts', 'RL_DRAIN_SECS', 'soon'],
    ['src/agent/main.ts', 'RL_COUNTERSTORE_ADDR', 'redis://h:0'],
    ['src/agent/main.ts', 'RL_AGENT_LISTEN', '18080'],
  ] as const) {
    it(`${entry} exits 1 on ${variable}=${value}, naming the variable in one line`, async () => {
      const message = await startFailure({ [variable]: value }, entry);
      expect(message).to.include('exited before listening (code 1, signal null)');
      const line = message.split('\n').find((l) => l.includes('"level":"error"'));
      expect(line, message).to.be.a('string');
      expect(JSON.parse(line!).message).to.match(new RegExp(`^cannot start: ${variable}: `));
    });
  }
});
