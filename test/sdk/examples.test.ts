/**
 * examples/koa-app.ts and examples/express-app.ts, run the way sdk/README.md shows (tsx, RL_URL,
 * PORT) against the real server with examples/policies.json.
 */
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createClient } from '@rl/client';
import { REPO_ROOT } from '../support/server-process.js';
import { serverProcessSuite } from '../support/server-suite.js';
import { freshUser } from './service.js';

interface Example {
  url: string;
  child: ChildProcess;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** `npx tsx examples/<file>` with PORT=0; resolves with the port from its `listening` line. */
function startExample(file: string, rlUrl: string): Promise<Example> {
  const child = spawn(process.execPath, ['--import', 'tsx', `examples/${file}`], {
    cwd: REPO_ROOT,
    // A generous timeout: on a busy test machine a 50 ms answer can be late, and this test counts exactly.
    env: { ...process.env, RL_URL: rlUrl, PORT: '0', RL_TIMEOUT_MS: '2000' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  let output = '';
  return new Promise((resolve, reject) => {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      const line = output.split('\n').find((l) => l.includes('"listening"'));
      if (line) resolve({ url: `http://127.0.0.1:${JSON.parse(line).port}`, child });
    });
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.once('exit', (code) => reject(new Error(`examples/${file} exited (${code}) before listening:\n${output}`)));
  });
}

describe('SDK examples', function () {
  this.timeout(60_000);
  const suite = serverProcessSuite('rl-sdk-examples-', { env: () => ({ RL_POLICY_FILE: join(REPO_ROOT, 'examples/policies.json') }) });

  for (const file of ['koa-app.ts', 'express-app.ts']) {
    describe(file, () => {
      let example: Example;
      before(async () => {
        example = await startExample(file, suite.server.url);
      });
      after(async () => {
        if (!example || example.child.exitCode !== null) return;
        const exited = new Promise((resolve) => example.child.once('exit', resolve));
        example.child.kill('SIGKILL');
        await exited;
      });

      it('GET /hello: 100 requests per user pass (acme-api-per-user), the 101st is a 429 with headers', async () => {
        const user = freshUser();
        for (let i = 1; i <= 100; i++) {
          const res = await fetch(`${example.url}/hello`, { headers: { 'x-user-id': user } });
          expect(res.status).to.equal(200);
          expect((await res.json()).remaining).to.equal(100 - i);
        }
        const refused = await fetch(`${example.url}/hello`, { headers: { 'x-user-id': user } });
        expect(refused.status).to.equal(429);
        expect(refused.headers.get('ratelimit-policy')).to.equal('"acme-api-per-user";q=100;w=60');
        expect((await refused.json())['violated-policies']).to.deep.equal(['acme-api-per-user']);
      });

      it('POST /complete reserves max_tokens and refunds the unused part; POST /reports holds a lease', async () => {
        const org = freshUser();
        const res = await fetch(`${example.url}/complete?max_tokens=400`, { method: 'POST', headers: { 'x-org-id': org } });
        expect(res.status).to.equal(200);
        expect(await res.json()).to.include({ tokens: 100 });
        const client = createClient({ url: suite.server.url, timeoutMs: 2000 });
        try {
          // Express refunds once the response is sent: ask until it has landed (bounded by a count).
          let remaining = 0;
          for (let attempt = 0; attempt < 100 && remaining !== 1_000_000 - 100; attempt++) {
            remaining = (await client.peek({ resource: 'llm-completions', org_id: org })).remaining;
            if (remaining !== 1_000_000 - 100) await new Promise((resolve) => setTimeout(resolve, 20));
          }
          expect(remaining).to.equal(1_000_000 - 100);
        } finally {
          await client.close();
        }
        const report = await fetch(`${example.url}/reports`, { method: 'POST', headers: { 'x-tenant-id': org } });
        expect(report.status).to.equal(200);
        expect(report.headers.get('ratelimit-policy')).to.equal('"report-export-concurrency";q=3;qu="concurrent-requests"');
      });
    });
  }
});
