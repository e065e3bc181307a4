/**
 * Envoy's rate limit quota service end to end: real server processes (memory mode; two servers on one
 * real Redis), several simulated Envoys (test/support/envoy-rlqs-client.ts) each demanding more than
 * the window holds. Counted, never timed: the Envoys together admit no more than the limit, use at
 * least 90% of it, and once they close the counter has consumed exactly what they admitted. And the
 * store failing under a real server (its Redis link cut): the policy's failure mode, briefly.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import { checkoutPolicy, peekCheckout } from './checkout.js';
import { SimulatedEnvoy } from '../support/envoy-rlqs-client.js';
import { startLinkProxy } from '../support/link-proxy.js';
import { randomPrefix, startRedis, type RedisHandle } from '../support/redis.js';
import { startServerProcess, type ServerProcessHandle } from '../support/server-process.js';
import { tempDir } from '../support/temp-dir.js';

const LIMIT = 150;
const BUCKET = { user_id: 'alice', route: 'checkout' };
const POLICY = checkoutPolicy(LIMIT);

/** The bucket's counter as a peek sees it on `server`: what is left of the window. */
async function remaining(server: ServerProcessHandle): Promise<number> {
  const decision = await peekCheckout(server);
  expect(decision.matched_policy_id).to.equal('checkout');
  return decision.remaining;
}

async function rlqsInfo(server: ServerProcessHandle): Promise<{ streams: number; buckets: number; units_held: number }> {
  return ((await (await fetch(`${server.url}/rl/v1/info`)).json()) as { rlqs: { streams: number; buckets: number; units_held: number } }).rlqs;
}

/** Every Envoy demands a request a millisecond or so until the window is spent and no server holds a unit for them. */
async function demandUntilSpent(servers: ServerProcessHandle[], envoys: SimulatedEnvoy[]): Promise<void> {
  let spent = false;
  let polls = 0;
  let quiet = 0;
  const poll = async () => {
    // Three looks in a row: the window spent, nothing held or being taken on any server.
    while (!spent && polls++ < 600) {
      const held = await Promise.all(servers.map(rlqsInfo));
      quiet = (await remaining(servers[0]!)) === 0 && held.every((info) => info.units_held === 0) ? quiet + 1 : 0;
      if (quiet >= 3) spent = true;
      else await new Promise((resolve) => setTimeout(resolve, 50));
    }
    spent = true;
  };
  const drive = async (envoy: SimulatedEnvoy) => {
    while (!spent) {
      envoy.request(BUCKET);
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  };
  await Promise.all([poll(), ...envoys.map(drive)]);
}

async function runEnvoys(servers: ServerProcessHandle[], perServer: number): Promise<void> {
  const grpcPorts = servers.map((server) => Number(server.logs().find((l) => l.message === 'listening')!.grpc));
  const envoys = grpcPorts.flatMap((port) => Array.from({ length: perServer }, () => new SimulatedEnvoy({ target: `127.0.0.1:${port}`, domain: 'edge', reportEveryMs: 25 })));
  try {
    await demandUntilSpent(servers, envoys);
  } finally {
    await Promise.all(envoys.map((envoy) => envoy.close()));
  }
  const admitted = envoys.reduce((sum, envoy) => sum + envoy.admitted, 0);
  expect(admitted, 'admitted by every Envoy together').to.be.at.most(LIMIT);
  expect(admitted, 'of the window used').to.be.at.least(Math.ceil(LIMIT * 0.9));
  expect(LIMIT - (await remaining(servers[0]!)), 'the counter ends at what was admitted').to.equal(admitted);
  for (const server of servers) expect(await rlqsInfo(server)).to.deep.equal({ streams: 0, buckets: 0, units_held: 0 });
}

describe('RLQS end to end: simulated Envoys on real servers', function () {
  this.timeout(90_000);
  let dir: string;
  let policyFile: string;
  const servers: ServerProcessHandle[] = [];
  tempDir('rlqs-e2e-', { made: (path) => (dir = path) });

  before(() => {
    policyFile = join(dir, 'policies.json');
    writeFileSync(policyFile, JSON.stringify({ policies: [POLICY] }));
  });

  afterEach(async () => {
    for (const server of servers.splice(0)) await server.kill();
  });

  it('memory mode: three Envoys on one server', async () => {
    servers.push(await startServerProcess({ RL_DATA_DIR: join(dir, 'memory'), RL_POLICY_FILE: policyFile }));
    await runEnvoys(servers, 3);
  });

  describe('Redis', () => {
    let redis: RedisHandle;
    before(async () => {
      redis = await startRedis();
    });
    after(async () => {
      await redis.stop();
    });

    it('two servers on one Redis, two Envoys on each', async () => {
      // A generous store timeout: a take that times out may still run, and its units would be lost (under-admission).
      // No deny cache: the test's peeks must read the counter itself, not a refusal kept for up to a second.
      const env = { RL_COUNTERSTORE_ADDR: redis.url, RL_COUNTERSTORE_TIMEOUT_MS: '2000', RL_DENY_CACHE_SIZE: '0', RL_KEY_PREFIX: randomPrefix(), RL_POLICY_FILE: policyFile };
      servers.push(await startServerProcess({ ...env, RL_DATA_DIR: join(dir, 'a') }));
      servers.push(await startServerProcess({ ...env, RL_DATA_DIR: join(dir, 'b') }));
      await runEnvoys(servers, 2);
    });

    it('region mode (RL_REGION) does not serve RLQS: UNIMPLEMENTED, so Envoy keeps its no_assignment_behavior; /rl/v1/info has no rlqs', async () => {
      const globalPolicy = join(dir, 'global.json');
      writeFileSync(globalPolicy, JSON.stringify({ policies: [{ ...POLICY, budget: 'global' }] }));
      const env = { RL_REGION: 'eu', RL_COUNTERSTORE_ADDR: redis.url, RL_GLOBAL_COUNTERSTORE_ADDR: redis.url, RL_KEY_PREFIX: randomPrefix(), RL_POLICY_FILE: globalPolicy };
      const server = await startServerProcess({ ...env, RL_DATA_DIR: join(dir, 'region') });
      servers.push(server);
      const port = Number(server.logs().find((l) => l.message === 'listening')!.grpc);
      const envoy = new SimulatedEnvoy({ target: `127.0.0.1:${port}`, domain: 'edge', reportEveryMs: 25 });
      try {
        expect(envoy.request(BUCKET), 'DENY_ALL before any assignment').to.equal(false);
        expect((await envoy.closed).code).to.equal(grpc.status.UNIMPLEMENTED);
        expect(envoy.actions).to.deep.equal([]);
      } finally {
        envoy.cut();
      }
      const info = (await (await fetch(`${server.url}/rl/v1/info`)).json()) as Record<string, unknown>;
      expect(info).to.not.have.property('rlqs');
    });

    it('the store failing: a fail_closed bucket is assigned DENY_ALL for at most a second, then token buckets once the store answers', async () => {
      const proxy = await startLinkProxy({ host: redis.host, port: redis.port });
      const env = { RL_COUNTERSTORE_ADDR: proxy.url, RL_COUNTERSTORE_TIMEOUT_MS: '300', RL_DENY_CACHE_SIZE: '0', RL_KEY_PREFIX: randomPrefix(), RL_POLICY_FILE: policyFile };
      const server = await startServerProcess({ ...env, RL_DATA_DIR: join(dir, 'failing') });
      servers.push(server);
      const port = Number(server.logs().find((l) => l.message === 'listening')!.grpc);
      const envoy = new SimulatedEnvoy({ target: `127.0.0.1:${port}`, domain: 'edge', reportEveryMs: 25 });
      const strategyOf = (a: (typeof envoy.actions)[number]) => a.quota_assignment_action?.rate_limit_strategy;
      const driveUntil = async (done: () => boolean) => {
        for (let i = 0; i < 20_000 && !done(); i++) {
          envoy.request(BUCKET);
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
        expect(done(), 'the awaited assignment came').to.equal(true);
      };
      try {
        await proxy.stop();
        await driveUntil(() => envoy.actions.some((a) => strategyOf(a)?.blanket_rule === 'DENY_ALL'));
        const deny = envoy.actions.find((a) => strategyOf(a)?.blanket_rule === 'DENY_ALL')!.quota_assignment_action!.assignment_time_to_live!;
        expect(Number(deny.seconds ?? 0) * 1000 + Number(deny.nanos ?? 0) / 1e6).to.be.above(0).and.at.most(1000);
        expect(envoy.admitted, 'nothing admitted while the store is down').to.equal(0);
        const denied = envoy.actions.length;
        await proxy.start();
        await driveUntil(() => envoy.actions.slice(denied).some((a) => strategyOf(a)?.token_bucket !== undefined));
        // A token bucket starts full: the next request is admitted.
        expect(envoy.request(BUCKET)).to.equal(true);
      } finally {
        await envoy.close();
        await proxy.close();
      }
    });
  });
});
