import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServerProcess, type ServerProcessHandle } from '../support/server-process.js';
import { healthClient, rateLimitClient, unary } from '../grpc/helpers.js';
import { tempDir } from '../support/temp-dir.js';

const body = JSON.stringify({ org_id: 'acme', signal_type: 'http', user_id: 'drain' });

/** Resolves once the process has logged `message` (a hang is caught by the test's timeout). */
async function logged(server: ServerProcessHandle, message: string): Promise<void> {
  while (!server.logs().some((l) => l.message === message)) await new Promise((r) => setTimeout(r, 10));
}

/**
 * SIGTERM: readiness goes 503 at once (see test/http/cross-cutting.test.ts for /readyz itself), the
 * request in flight finishes, and the process exits 0 within RL_DRAIN_SECS.
 */
describe('lifecycle: drain on SIGTERM (real process)', function () {
  this.timeout(40_000);
  let dataDir: string;
  tempDir('rl-lifecycle-', { per: 'test', made: (path) => (dataDir = path) });

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

  it('finishes the request in flight, then exits 0 (without waiting for the drain deadline)', async () => {
    // A drain deadline (an hour) far beyond this test's timeout: the process can only exit in time
    // because the request in flight finished, never because the deadline cut it.
    const server = await startServerProcess({ RL_DATA_DIR: dataDir, RL_DRAIN_SECS: '3600' });
    const { socket, response } = await startSlowRequest(server.port);
    await new Promise((r) => setTimeout(r, 100));
    process.kill(server.pid, 'SIGTERM');
    // The drain has begun (readiness failed at the same moment): the rest of the body comes during it.
    await logged(server, 'draining');
    socket.end(body.slice(10));
    const text = await response;
    expect(text).to.match(/^HTTP\/1\.1 200 OK/);
    expect(text).to.contain('"matched_policy_id":"acme-api-per-user"');
    const exit = await server.exited;
    expect(exit).to.deep.equal({ code: 0, signal: null });
    expect(server.logs().map((l) => l.message)).to.include.members(['draining', 'stopped']);
    expect(server.logs().find((l) => l.message === 'draining')).to.deep.include({ drain_secs: 3600 });
  });

  it('exits 0 at RL_DRAIN_SECS even when a request never completes, cutting it off unanswered', async () => {
    const server = await startServerProcess({ RL_DATA_DIR: dataDir, RL_DRAIN_SECS: '1' });
    const { socket, response } = await startSlowRequest(server.port);
    await new Promise((r) => setTimeout(r, 100));
    const signalled = Date.now();
    process.kill(server.pid, 'SIGTERM');
    const exit = await server.exited;
    // The request never completes, so only the drain deadline can have let the process exit: it
    // cut the connection without an answer, and not before the deadline (a lower bound; how much
    // later depends on the machine, and a process that never exits fails by the test's timeout).
    expect(await response).to.equal('');
    socket.destroy();
    expect(exit).to.deep.equal({ code: 0, signal: null });
    expect(Date.now() - signalled, 'the request in flight was given the drain deadline').to.be.at.least(900);
  });
});

describe('lifecycle: shutdown delay (real process)', function () {
  this.timeout(40_000);
  let dataDir: string;
  tempDir('rl-lifecycle-', { per: 'test', made: (path) => (dataDir = path) });

  it('after SIGTERM, /readyz on a new connection answers 503 and gRPC health NOT_SERVING while decisions keep being answered; then it exits 0', async () => {
    const server = await startServerProcess({ RL_DATA_DIR: dataDir, RL_SHUTDOWN_DELAY_SECS: '2', RL_DRAIN_SECS: '5' });
    const grpcPort = Number(server.logs().find((l) => l.message === 'listening')!.grpc);
    const health = healthClient(`127.0.0.1:${grpcPort}`);
    const rl = rateLimitClient(`127.0.0.1:${grpcPort}`);
    try {
      expect((await fetch(`${server.url}/readyz`)).status).to.equal(200);
      const signalled = Date.now();
      process.kill(server.pid, 'SIGTERM');
      await logged(server, 'draining');
      // Fresh connections (no keep-alive agent): the listener is still accepting.
      const readyz = await fetch(`${server.url}/readyz`, { headers: { connection: 'close' } });
      expect(readyz.status).to.equal(503);
      expect((await fetch(`${server.url}/healthz`, { headers: { connection: 'close' } })).status).to.equal(200);
      const check = await fetch(`${server.url}/rl/v1/check`, { method: 'POST', headers: { 'content-type': 'application/json', connection: 'close' }, body });
      expect(check.status).to.equal(200);
      expect((await unary(health, 'Check', { service: '' })).status).to.equal('NOT_SERVING');
      expect((await unary(rl, 'CheckLimit', { org_id: 'acme', signal_type: 'http', user_id: 'drain' })).matched_policy_id).to.equal('acme-api-per-user');
      const exit = await server.exited;
      expect(exit).to.deep.equal({ code: 0, signal: null });
      expect(Date.now() - signalled, 'the listeners stayed open for the shutdown delay').to.be.at.least(1900);
      const draining = server.logs().find((l) => l.message === 'draining');
      expect(draining).to.deep.include({ shutdown_delay_secs: 2, drain_secs: 5 });
    } finally {
      health.close();
      rl.close();
    }
  });
});

describe('lifecycle: slow clients are cut off by the HTTP timeouts (real process)', function () {
  this.timeout(40_000);

  /**
   * Writes `atOnce` on connecting, then `text` one byte every `everyMs` until the server closes the
   * socket; resolves with what it answered and when.
   */
  function trickle(port: number, text: string, everyMs: number, atOnce = ''): Promise<{ answer: string; closedAfterMs: number }> {
    return new Promise((resolve) => {
      const started = Date.now();
      const socket = connect(port, '127.0.0.1', () => socket.write(atOnce));
      let answer = '';
      let at = 0;
      const timer = setInterval(() => {
        if (at < text.length && !socket.destroyed) socket.write(text[at++]);
      }, everyMs);
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (answer += chunk));
      socket.on('error', () => undefined);
      socket.on('close', () => {
        clearInterval(timer);
        resolve({ answer, closedAfterMs: Date.now() - started });
      });
    });
  }

  it('closes a header-trickling socket after RL_HTTP_HEADERS_TIMEOUT_SECS and a slow body after RL_HTTP_REQUEST_TIMEOUT_SECS', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'rl-lifecycle-'));
    const server = await startServerProcess({ RL_DATA_DIR: dataDir, RL_HTTP_HEADERS_TIMEOUT_SECS: '1', RL_HTTP_REQUEST_TIMEOUT_SECS: '2' });
    try {
      const headers = 'GET /healthz HTTP/1.1\r\nHost: x\r\n' + 'X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n';
      const slowBody = `POST /rl/v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
      const [trickledHeaders, trickledBody] = await Promise.all([
        trickle(server.port, headers, 100),
        // Headers at once, then the body one byte every 200 ms (it would take ~12 s to arrive).
        trickle(server.port, body, 200, slowBody),
      ]);
      // Both would take 11-12 s to arrive: a 408 means the server cut them off (a server that waited
      // would answer 200, or hang past the test's timeout). Neither can be cut before its own bound
      // (lower bounds only, 100 ms of clock slack; Node checks once a second, so it is usually later).
      expect(trickledHeaders.answer).to.match(/^HTTP\/1\.1 408/);
      expect(trickledHeaders.closedAfterMs).to.be.at.least(900);
      expect(trickledBody.answer).to.match(/^HTTP\/1\.1 408/);
      expect(trickledBody.closedAfterMs).to.be.at.least(1900);
      expect((await fetch(`${server.url}/healthz`)).status).to.equal(200);
    } finally {
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
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

  it('src/main.ts exits 1 on a bad RL_POLICY_FILE, naming the variable, the file, the policy and the field', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'rl-bad-policy-file-'));
    try {
      const file = join(dataDir, 'policies.yaml');
      writeFileSync(file, 'policy_id: bad\nalgorithm: {type: fixed_window, limit: 5, window: soon}\n');
      const message = await startFailure({ RL_DATA_DIR: join(dataDir, 'data'), RL_POLICY_FILE: file });
      expect(message).to.include('exited before listening (code 1, signal null)');
      const line = message.split('\n').find((l) => l.includes('"level":"error"'));
      expect(line, message).to.be.a('string');
      expect(JSON.parse(line!).message).to.match(new RegExp(`^cannot start: RL_POLICY_FILE: ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: policy "bad" \\(index 0\\): algorithm\\.window: `));
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
