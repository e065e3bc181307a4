/**
 * RLQS streams when their server drains (SIGTERM), on a real process over a real Redis: the streams are
 * ended cleanly, not cut. Each Envoy is told to stop spending (DENY_ALL, so it reports what it spent), its
 * reports settle every grant, and the server ends the stream with OK before it exits. Counted: the
 * counter, read by a second server on the same Redis, has consumed exactly what the Envoys admitted
 * (a cut stream's unreported units would stay consumed). A stream whose reports stopped cannot be settled:
 * it is cut at RL_DRAIN_SECS, its units stay consumed, and the server still exits.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import { checkoutPolicy, peekCheckout } from './checkout.js';
import { SimulatedEnvoy } from '../support/envoy-rlqs-client.js';
import { randomPrefix, startRedis, type RedisHandle } from '../support/redis.js';
import { startServerProcess, type ServerProcessHandle } from '../support/server-process.js';

const LIMIT = 10_000;
const BUCKET = { user_id: 'alice', route: 'checkout' };
const POLICY = checkoutPolicy(LIMIT, { lease: { max_hold: '2s' } });

async function consumed(server: ServerProcessHandle): Promise<number> {
  return LIMIT - (await peekCheckout(server)).remaining;
}

const grpcPort = (server: ServerProcessHandle) => Number(server.logs().find((l) => l.message === 'listening')!.grpc);

describe('RLQS on drain (SIGTERM, real process, real Redis)', function () {
  this.timeout(60_000);
  let dir: string;
  let redis: RedisHandle;
  let env: Record<string, string>;
  const servers: ServerProcessHandle[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rlqs-drain-'));
    writeFileSync(join(dir, 'policies.json'), JSON.stringify({ policies: [POLICY] }));
    redis = await startRedis();
    env = { RL_COUNTERSTORE_ADDR: redis.url, RL_COUNTERSTORE_TIMEOUT_MS: '2000', RL_DENY_CACHE_SIZE: '0', RL_KEY_PREFIX: randomPrefix(), RL_POLICY_FILE: join(dir, 'policies.json') };
  });

  after(async () => {
    for (const server of servers.splice(0)) await server.kill();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('ends every stream with OK once its reports settle its grants: the counter keeps exactly what was admitted', async () => {
    const draining = await startServerProcess({ ...env, RL_DATA_DIR: join(dir, 'a') });
    servers.push(draining);
    const envoys = [1, 2].map(() => new SimulatedEnvoy({ target: `127.0.0.1:${grpcPort(draining)}`, domain: 'edge', reportEveryMs: 25 }));
    // Each Envoy holds a token bucket (a grant of a hold's worth, most of it unspent) and keeps spending from it.
    for (const envoy of envoys) envoy.request(BUCKET);
    await Promise.all(envoys.map((envoy) => envoy.waitFor((a) => a.quota_assignment_action?.rate_limit_strategy?.token_bucket !== undefined)));
    let stop = false;
    const drive = async (envoy: SimulatedEnvoy) => {
      while (!stop) {
        envoy.request(BUCKET);
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
    };
    const driving = envoys.map(drive);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const exit = draining.stop('SIGTERM');
    const statuses = await Promise.all(envoys.map((envoy) => envoy.closed));
    stop = true;
    await Promise.all(driving);
    expect((await exit).code).to.equal(0);
    expect(statuses.map((s) => s.code)).to.deep.equal([grpc.status.OK, grpc.status.OK]);
    // Told to stop before the end: the last assignment each Envoy had was DENY_ALL.
    for (const envoy of envoys) {
      const last = envoy.actions.at(-1)!;
      expect(last.quota_assignment_action?.rate_limit_strategy?.blanket_rule).to.equal('DENY_ALL');
    }
    const admitted = envoys.reduce((sum, envoy) => sum + envoy.admitted, 0);
    expect(admitted).to.be.above(0);
    for (const envoy of envoys) await envoy.close();
    const reader = await startServerProcess({ ...env, RL_DATA_DIR: join(dir, 'b') });
    servers.push(reader);
    expect(await consumed(reader)).to.equal(admitted);
  });

  it('cuts a stream whose reports stopped at RL_DRAIN_SECS, and still exits 0: its units stay consumed (they lapse)', async () => {
    const draining = await startServerProcess({ ...env, RL_DATA_DIR: join(dir, 'c'), RL_DRAIN_SECS: '1' });
    servers.push(draining);
    const envoy = new SimulatedEnvoy({ target: `127.0.0.1:${grpcPort(draining)}`, domain: 'edge', reportEveryMs: 25 });
    envoy.request(BUCKET);
    await envoy.waitFor((a) => a.quota_assignment_action?.rate_limit_strategy?.token_bucket !== undefined);
    const before = await consumed(draining);
    envoy.silence();
    const exit = await draining.stop('SIGTERM');
    expect(exit).to.deep.equal({ code: 0, signal: null });
    expect((await envoy.closed).code).to.not.equal(grpc.status.OK);
    envoy.cut();
    const reader = await startServerProcess({ ...env, RL_DATA_DIR: join(dir, 'd') });
    servers.push(reader);
    // Nothing was given back for the silent stream: what it was granted stays consumed, never more.
    expect(await consumed(reader)).to.equal(before);
  });
});
