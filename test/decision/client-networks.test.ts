/**
 * `source_ip_prefix` (README "Managing policies", counting by client network) end to end: a policy with
 * `source_ip: "*"` counts client networks on both counter stores (memory emulator, real Redis), over
 * both HTTP paths, over gRPC rl.v1 and over Envoy's remote_address.
 */
import { expect } from 'chai';
import { DecisionService } from '../../src/decision/decision-service.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { parseRequestContext } from '../../src/model/request-context.js';
import { DeniedIdentities } from '../../src/observability/denied-identities.js';
import { envoyClient, rateLimitClient, startGrpc, unary, type GrpcFixture } from '../grpc/helpers.js';
import { forEachStore } from '../support/counter-stores.js';
import { postJson, type TestServer } from '../support/http.js';
import { HTTP_PATHS, serveDecisions } from '../support/http-listeners.js';
import { makePolicy } from '../support/policies.js';

const window = { type: 'fixed_window', limit: 2, window: '1h' };
const POLICIES = [
  // Default prefixes: IPv6 /56, IPv4 /32.
  makePolicy({ policy_id: 'per-client', scope: { service: 'api', source_ip: '*' }, algorithm: window }),
  makePolicy({ policy_id: 'per-24', scope: { service: 'narrow', source_ip: '*' }, source_ip_prefix: { v4: 24, v6: 64 }, algorithm: window }),
  // An exact value still matches the string as sent.
  makePolicy({ policy_id: 'exact', scope: { service: 'exact', source_ip: '2001:db8::1' }, algorithm: window }),
  // Envoy traffic: remote_address fills source_ip.
  makePolicy({ policy_id: 'edge', scope: { source_ip: '*', tags: { domain: 'edge' } }, algorithm: window }),
  // Leases of one /56: a slot per address, whatever its spelling.
  makePolicy({ policy_id: 'jobs', scope: { service: 'jobs', source_ip: '*' }, algorithm: { type: 'concurrency', max_concurrency: 2 } }),
];

/** Allowed flags of successive decisions, one per source_ip, in order. */
type Decide = (service: string, sourceIp: string) => Promise<{ allowed: boolean; matched_policy_id: string }>;

async function allowedOf(decide: Decide, service: string, ips: string[]): Promise<boolean[]> {
  const out: boolean[] = [];
  for (const ip of ips) out.push((await decide(service, ip)).allowed);
  return out;
}

/** The shared scenarios: every transport and store must answer them alike. */
function scenarios(decide: () => Decide): void {
  it('every textual form of one IPv6 address, and every address of one /56, is one client', async () => {
    expect(await allowedOf(decide(), 'api', ['2001:DB8::1', '2001:db8:0:0::1', '2001:db8:0:ff:ffff::9'])).to.deep.equal([true, true, false]);
    // The next /56 is another client.
    expect(await allowedOf(decide(), 'api', ['2001:db8:0:100::1', '2001:db8:0:1ff::2', '2001:db8:0:100::3'])).to.deep.equal([true, true, false]);
  });

  it('an IPv4-mapped IPv6 address counts as the IPv4 address', async () => {
    expect(await allowedOf(decide(), 'api', ['10.0.0.1', '::ffff:10.0.0.1', '::FFFF:a00:1'])).to.deep.equal([true, true, false]);
    expect(await allowedOf(decide(), 'api', ['10.0.0.2'])).to.deep.equal([true]);
  });

  it('a value that is not an IP address counts as the string itself', async () => {
    expect(await allowedOf(decide(), 'api', ['gateway-7', 'GATEWAY-7', 'gateway-7', 'gateway-7'])).to.deep.equal([true, true, true, false]);
    // Leading zeros make an ambiguous IPv4 text: a string, not 10.0.0.1.
    expect(await allowedOf(decide(), 'api', ['010.0.0.1', '010.0.0.1', '010.0.0.1'])).to.deep.equal([true, true, false]);
  });

  it('the policy\'s own prefix lengths apply (v4 /24, v6 /64)', async () => {
    expect(await allowedOf(decide(), 'narrow', ['10.1.2.3', '10.1.2.200', '::ffff:10.1.2.9', '10.1.3.1'])).to.deep.equal([true, true, false, true]);
    expect(await allowedOf(decide(), 'narrow', ['2001:db8:0:1::1', '2001:db8:0:1:ffff::', '2001:db8:0:2::1'])).to.deep.equal([true, true, true]);
  });

  it('an exact scope value matches the string as sent, not another spelling', async () => {
    expect((await decide()('exact', '2001:db8::1')).matched_policy_id).to.equal('exact');
    expect((await decide()('exact', '2001:DB8::1')).matched_policy_id).to.equal('');
  });
}

describe('client networks: source_ip_prefix', () => {
  forEachStore((_name, getStore) => {
    let service: DecisionService;
    beforeEach(() => {
      const { store, prefix, clock } = getStore();
      service = new DecisionService({ policies: new LiveMatcher(POLICIES), counters: store, keyPrefix: prefix, now: () => clock.now, denyCache: false }, { clockToStore: true });
    });
    scenarios(() => (svc, ip) => service.check(parseRequestContext({ service: svc, source_ip: ip })));

    it('a lease is named by the address, not its spelling: a release in another spelling frees it, another address of the network takes its own slot', async () => {
      const lease = (operation: 'acquire' | 'release', ip: string) => service[operation](parseRequestContext({ service: 'jobs', source_ip: ip }));
      const first = await lease('acquire', '2001:DB8::1');
      expect(first).to.deep.include({ allowed: true, reason: 'lease_acquired', remaining: 1 });
      // Another address of the same /56: the same counter, a lease of its own.
      const second = await lease('acquire', '2001:db8::2');
      expect(second).to.deep.include({ allowed: true, reason: 'lease_acquired', remaining: 0 });
      expect(second.metadata.lease_id).to.not.equal(first.metadata.lease_id);
      expect(await lease('acquire', '2001:db8::3')).to.deep.include({ allowed: false, reason: 'limit_exceeded' });
      // Re-acquiring in another spelling refreshes the lease, takes no slot.
      expect(await lease('acquire', '2001:0db8:0:0:0:0:0:1')).to.deep.include({ allowed: true, reason: 'lease_acquired', remaining: 0 });
      const released = await lease('release', '2001:db8:0:0::1%eth0');
      expect(released).to.deep.include({ allowed: true, reason: 'lease_released', remaining: 1 });
      expect(released.metadata.lease_id).to.equal(first.metadata.lease_id);
      expect(await lease('release', '2001:db8::2')).to.deep.include({ reason: 'lease_released', remaining: 2 });
      // An IPv4-mapped address is its IPv4 address.
      await lease('acquire', '10.0.0.1');
      expect(await lease('release', '::ffff:10.0.0.1')).to.deep.include({ reason: 'lease_released', remaining: 2 });
    });

    it('the denied-identities report names the network', async () => {
      const matcher = new LiveMatcher(POLICIES);
      const denied = new DeniedIdentities(matcher);
      const { store, prefix, clock } = getStore();
      const recorded = new DecisionService({ policies: matcher, counters: store, keyPrefix: prefix, now: () => clock.now, denyCache: false, recorder: denied }, { clockToStore: true });
      for (const ip of ['2001:db8::1', '2001:db8::2', '2001:DB8::3']) await recorded.check(parseRequestContext({ service: 'api', source_ip: ip }));
      expect(denied.top(5)).to.deep.equal([{ policy_id: 'per-client', identity: 'source_ip=2001:db8::/56', count: 1, error: 0 }]);
    });
  });

  for (const [path, build] of HTTP_PATHS) {
    describe(`HTTP (${path})`, () => {
      let server: TestServer;
      beforeEach(async () => {
        server = await serveDecisions(build, POLICIES, 4096);
      });
      afterEach(() => server.close());
      scenarios(() => async (svc, ip) => (await postJson(`${server.url}/rl/v1/check`, { service: svc, source_ip: ip })).body);
    });
  }

  describe('gRPC rl.v1 and Envoy remote_address', () => {
    let grpcServer: GrpcFixture;
    beforeEach(async () => {
      grpcServer = await startGrpc(POLICIES);
    });
    afterEach(() => grpcServer.close());

    describe('rl.v1 CheckLimit', () => {
      scenarios(() => {
        const client = rateLimitClient(grpcServer.target);
        return (svc, ip) => unary(client, 'CheckLimit', { service: svc, source_ip: ip });
      });
    });

    it('Envoy: remote_address counts client networks', async () => {
      const client = envoyClient(grpcServer.target);
      const codes: string[] = [];
      for (const ip of ['2001:db8::1', '2001:DB8:0:0:0:0:0:2', '2001:db8:0:ff::3', '::ffff:10.9.9.9', '10.9.9.9', '10.9.9.9']) {
        const answer = await unary(client, 'ShouldRateLimit', { domain: 'edge', descriptors: [{ entries: [{ key: 'remote_address', value: ip }] }] });
        codes.push(answer.overall_code);
      }
      expect(codes).to.deep.equal(['OK', 'OK', 'OVER_LIMIT', 'OK', 'OK', 'OVER_LIMIT']);
      client.close();
    });
  });
});
