import { expect } from 'chai';
import fc from 'fast-check';
import { lengthPrefixed } from '../../src/counters/keys.js';
import { SCOPE_FIELDS, type RequestContext } from '../../src/model/request-context.js';
import { compileMatchExpr } from '../../src/policy/match-expr.js';
import { Matcher, rolloutBucket, type PolicyFamily } from '../../src/matching/matcher.js';
import type { Policy } from '../../src/policy/types.js';
import { validatePolicy } from '../../src/policy/validate.js';

const NOW = 1_900_000_000_000;
const FIXED = { type: 'fixed_window', limit: 10, window: '1m' };
const LEASES = { type: 'concurrency', max_concurrency: 2 };

function policy(fields: Record<string, unknown>): Policy {
  const r = validatePolicy({ algorithm: FIXED, ...fields });
  if (!r.ok) throw new Error(`invalid test policy: ${JSON.stringify(r.errors)}`);
  return { ...r.policy, version: 1, created_at: '2030-01-01T00:00:00.000Z', updated_at: '2030-01-01T00:00:00.000Z' };
}

function req(fields: { tags?: Record<string, string>; quantity?: number; [field: string]: unknown } = {}): RequestContext {
  const { tags, quantity, ...rest } = fields;
  return { ...rest, quantity: quantity ?? 1, tags: tags ?? {} } as RequestContext;
}

function winner(m: Matcher, ctx: RequestContext, family: PolicyFamily = 'rate', now = NOW): string | undefined {
  return m.match(ctx, family, now).enforce?.compiled.policy.policy_id;
}

describe('Matcher', () => {
  describe('scope', () => {
    const m = Matcher.build([policy({ policy_id: 'acme', scope: { org_id: 'acme', signal_type: 'http' } })]);

    it('matches exact values', () => {
      expect(winner(m, req({ org_id: 'acme', signal_type: 'http', user_id: 'x' }))).to.equal('acme');
      expect(winner(m, req({ org_id: 'acme', signal_type: 'grpc' }))).to.equal(undefined);
      expect(winner(m, req({ org_id: 'ACME', signal_type: 'http' }))).to.equal(undefined);
    });

    it('an exact scope field needs the request field', () => {
      expect(winner(m, req({ org_id: 'acme' }))).to.equal(undefined);
    });

    it('an empty scope matches everything, with an empty identity', () => {
      const all = Matcher.build([policy({ policy_id: 'all' })]);
      const r = all.match(req(), 'rate', NOW);
      expect(r.enforce?.compiled.policy.policy_id).to.equal('all');
      expect(r.enforce?.identity).to.deep.equal([]);
    });

    it('* needs the field present and non-empty, and gives each value its own identity', () => {
      const star = Matcher.build([policy({ policy_id: 'per-user', scope: { org_id: 'acme', user_id: '*' } })]);
      expect(winner(star, req({ org_id: 'acme' }))).to.equal(undefined);
      expect(winner(star, req({ org_id: 'acme', user_id: '' }))).to.equal(undefined);
      const a = star.match(req({ org_id: 'acme', user_id: 'alice' }), 'rate', NOW).enforce!;
      const b = star.match(req({ org_id: 'acme', user_id: 'bob' }), 'rate', NOW).enforce!;
      expect(a.identity).to.deep.equal(['user_id', 'alice']);
      expect(b.identity).to.deep.equal(['user_id', 'bob']);
    });

    it('identity lists * fields in sorted name order, tags as tags.<key>', () => {
      const m2 = Matcher.build([policy({ policy_id: 'p', scope: { user_id: '*', api_key: '*', org_id: 'o', tags: { zone: '*', env: '*', team: 'core' } } })]);
      const r = m2.match(req({ org_id: 'o', user_id: 'u', api_key: 'k', tags: { zone: 'z1', env: 'prod', team: 'core', other: 'x' } }), 'rate', NOW);
      expect(r.enforce?.identity).to.deep.equal(['api_key', 'k', 'tags.env', 'prod', 'tags.zone', 'z1', 'user_id', 'u']);
    });

    it('matches tags exactly and with *', () => {
      const t = Matcher.build([
        policy({ policy_id: 'prod', scope: { tags: { env: 'prod' } } }),
        policy({ policy_id: 'any-team', scope: { tags: { team: '*' } } }),
      ]);
      expect(winner(t, req({ tags: { env: 'prod' } }))).to.equal('prod');
      expect(winner(t, req({ tags: { env: 'dev' } }))).to.equal(undefined);
      expect(winner(t, req({ tags: { team: 'a' } }))).to.equal('any-team');
      expect(winner(t, req({ tags: { team: '' } }))).to.equal(undefined);
      expect(winner(t, req())).to.equal(undefined);
      expect(winner(t, { quantity: 1 } as RequestContext)).to.equal(undefined);
    });

    it('does not see prototype properties as tags', () => {
      const t = Matcher.build([policy({ policy_id: 'p', scope: { tags: { constructor: '*', toString: '*' } } })]);
      expect(winner(t, req({ tags: {} }))).to.equal(undefined);
      expect(winner(t, req({ tags: { constructor: 'a', toString: 'b' } as Record<string, string> }))).to.equal('p');
    });

    it('every scope field can be exact or *', () => {
      for (const field of SCOPE_FIELDS) {
        const value = field === 'signal_type' ? 'log' : 'v';
        const mm = Matcher.build([policy({ policy_id: 'exact', scope: { [field]: value } }), policy({ policy_id: 'star', scope: { [field]: '*' } })]);
        expect(winner(mm, req({ [field]: value })), field).to.equal('exact');
        expect(winner(mm, req({ [field]: field === 'signal_type' ? 'http' : 'w' })), field).to.equal('star');
        expect(winner(mm, req()), field).to.equal(undefined);
      }
    });
  });

  describe('match_expr', () => {
    const m = Matcher.build([
      policy({ policy_id: 'debug-prod', scope: { signal_type: 'log' }, metadata: { match_expr: 'severity in ["debug","info"] && tags["env"] == "prod"' } }),
      policy({ policy_id: 'logs', scope: { signal_type: 'log' } }),
    ]);

    it('applies the expression and counts it 1 point', () => {
      expect(winner(m, req({ signal_type: 'log', severity: 'debug', tags: { env: 'prod' } }))).to.equal('debug-prod');
      expect(winner(m, req({ signal_type: 'log', severity: 'error', tags: { env: 'prod' } }))).to.equal('logs');
    });

    it('an evaluation error is false (missing tag, absent field)', () => {
      expect(winner(m, req({ signal_type: 'log', severity: 'debug' }))).to.equal('logs');
      expect(winner(m, req({ signal_type: 'log', tags: { env: 'prod' } }))).to.equal('logs');
    });

    it('an expression alone can scope a policy', () => {
      const big = Matcher.build([policy({ policy_id: 'big', metadata: { match_expr: 'quantity >= 100' } })]);
      expect(winner(big, req({ quantity: 100 }))).to.equal('big');
      expect(winner(big, req({ quantity: 99 }))).to.equal(undefined);
    });
  });

  describe('winner order', () => {
    it('specificity: exact 2, * 1, tags as fields, match_expr 1', () => {
      const m = Matcher.build([
        policy({ policy_id: 'a-exact-1', scope: { org_id: 'o' }, priority: 100 }), // 2
        policy({ policy_id: 'b-star-3', scope: { org_id: '*', user_id: '*', tenant_id: '*' } }), // 3
        policy({ policy_id: 'c-exact-star', scope: { org_id: 'o', user_id: '*' } }), // 3
      ]);
      // 3 beats 2 despite priority; between the two 3s, the smaller policy_id.
      expect(winner(m, req({ org_id: 'o', user_id: 'u', tenant_id: 't' }))).to.equal('b-star-3');
      expect(winner(m, req({ org_id: 'o', user_id: 'u' }))).to.equal('c-exact-star');
      const withExpr = Matcher.build([
        policy({ policy_id: 'a', scope: { org_id: 'o' } }), // 2
        policy({ policy_id: 'b', scope: { org_id: 'o' }, metadata: { match_expr: 'true' } }), // 3
        policy({ policy_id: 'c', scope: { tags: { env: 'prod' } }, metadata: { match_expr: 'true' } }), // 3
        policy({ policy_id: 'd', scope: { org_id: 'o', tags: { env: '*' } } }), // 3
        policy({ policy_id: 'e', scope: { org_id: 'o', tags: { env: 'prod' } } }), // 4
      ]);
      expect(withExpr.match(req({ org_id: 'o', tags: { env: 'prod' } }), 'rate', NOW).enforce?.compiled.specificity).to.equal(4);
      expect(winner(withExpr, req({ org_id: 'o', tags: { env: 'prod' } }))).to.equal('e');
      expect(winner(withExpr, req({ org_id: 'o', tags: { env: 'dev' } }))).to.equal('b');
      expect(winner(withExpr, req({ org_id: 'x', tags: { env: 'prod' } }))).to.equal('c');
    });

    it('then the highest priority, then the smallest policy_id (plain string compare)', () => {
      const m = Matcher.build([
        policy({ policy_id: 'b', scope: { org_id: 'o' }, priority: 1 }),
        policy({ policy_id: 'a', scope: { org_id: 'o' }, priority: 1 }),
        policy({ policy_id: 'c', scope: { org_id: 'o' }, priority: 0 }),
        policy({ policy_id: 'B', scope: { org_id: 'o' }, priority: 1 }),
      ]);
      expect(winner(m, req({ org_id: 'o' }))).to.equal('B');
      const p = Matcher.build([policy({ policy_id: 'a', scope: { org_id: 'o' }, priority: -1 }), policy({ policy_id: 'z', scope: { org_id: 'o' }, priority: 7 })]);
      expect(winner(p, req({ org_id: 'o' }))).to.equal('z');
    });
  });

  describe('enabled and validity', () => {
    it('ignores disabled policies', () => {
      const m = Matcher.build([policy({ policy_id: 'off', scope: { org_id: 'o' }, enabled: false }), policy({ policy_id: 'on' })]);
      expect(winner(m, req({ org_id: 'o' }))).to.equal('on');
      expect(m.size).to.equal(1);
      expect(m.get('off')).to.equal(undefined);
    });

    it('honours valid_from_unix and valid_to_unix (0 = unbounded, to is exclusive)', () => {
      const from = NOW / 1000;
      const m = Matcher.build([
        policy({ policy_id: 'window', scope: { org_id: 'o' }, valid_from_unix: from, valid_to_unix: from + 60 }),
        policy({ policy_id: 'open-end', scope: { org_id: 'p' }, valid_from_unix: from }),
        policy({ policy_id: 'open-start', scope: { org_id: 'q' }, valid_to_unix: from }),
      ]);
      const o = req({ org_id: 'o' });
      expect(winner(m, o, 'rate', NOW - 1)).to.equal(undefined);
      expect(winner(m, o, 'rate', NOW)).to.equal('window');
      expect(winner(m, o, 'rate', NOW + 59_999)).to.equal('window');
      expect(winner(m, o, 'rate', NOW + 60_000)).to.equal(undefined);
      expect(winner(m, req({ org_id: 'p' }), 'rate', NOW + 1e12)).to.equal('open-end');
      expect(winner(m, req({ org_id: 'p' }), 'rate', NOW - 1)).to.equal(undefined);
      expect(winner(m, req({ org_id: 'q' }), 'rate', 0)).to.equal('open-start');
      expect(winner(m, req({ org_id: 'q' }), 'rate', NOW)).to.equal(undefined);
    });
  });

  describe('rollout', () => {
    it('rolloutBucket is stable, in 0..99, and unambiguous', () => {
      expect(rolloutBucket('p', ['user_id', 'alice'])).to.equal(rolloutBucket('p', ['user_id', 'alice']));
      for (let i = 0; i < 500; i++) expect(rolloutBucket(`p${i}`, ['user_id', String(i)])).to.be.within(0, 99).and.satisfy(Number.isInteger);
      // Pinned values: the hash must not change between releases (who is inside a rollout depends on it).
      expect(rolloutBucket('policy', ['user_id', 'alice'])).to.equal(69);
      expect(rolloutBucket('api-per-user', [])).to.equal(14);
      expect(rolloutBucket('p', ['tags.env', 'prod', 'user_id', 'é😀'])).to.equal(67);
      const differs = [0, 1, 2, 3, 4, 5, 6, 7].some((i) => rolloutBucket(`a${i}:b`, ['c']) !== rolloutBucket(`a${i}`, ['b:c']));
      expect(differs).to.equal(true);
      expect(rolloutBucket('p', ['x', 'é😀'])).to.be.within(0, 99);
      expect(rolloutBucket('p', ['x', '\ud800'])).to.be.within(0, 99);
    });

    it('rolloutBucket = fmix32(FNV-1a over the UTF-8 bytes of the length-prefixed parts) mod 100', () => {
      const byBuffer = (id: string, identity: string[]): number => {
        let h = 0x811c9dc5;
        for (const byte of Buffer.from(lengthPrefixed([id, ...identity]), 'utf8')) h = Math.imul(h ^ byte, 0x01000193);
        h ^= h >>> 16;
        h = Math.imul(h, 0x85ebca6b);
        h ^= h >>> 13;
        h = Math.imul(h, 0xc2b2ae35);
        h ^= h >>> 16;
        return (h >>> 0) % 100;
      };
      fc.assert(
        fc.property(fc.string({ unit: 'binary' }), fc.array(fc.string({ unit: 'grapheme' }), { maxLength: 6 }), fc.array(fc.string()), (id, a, b) => {
          const identity = [...a, ...b];
          expect(rolloutBucket(id, identity)).to.equal(byBuffer(id, identity));
        }),
        { numRuns: 500 },
      );
    });

    it('about rollout_percent of the identities are inside, stably', () => {
      const m = Matcher.build([policy({ policy_id: 'half', scope: { user_id: '*' }, rollout_percent: 50 })]);
      let inside = 0;
      for (let i = 0; i < 2000; i++) {
        const ctx = req({ user_id: `user-${i}` });
        const first = winner(m, ctx);
        expect(winner(m, ctx)).to.equal(first);
        if (first === 'half') {
          inside++;
          expect(rolloutBucket('half', ['user_id', `user-${i}`])).to.be.lessThan(50);
        }
      }
      expect(inside).to.be.within(900, 1100);
    });

    it('the rollout percent is a threshold on one bucket: raising it only adds identities', () => {
      for (let i = 0; i < 20; i++) {
        const b = rolloutBucket('grow', ['user_id', `u${i}`]);
        const at = (pct: number) => winner(Matcher.build([policy({ policy_id: 'grow', scope: { user_id: '*' }, rollout_percent: pct })]), req({ user_id: `u${i}` }));
        expect(at(b)).to.equal(undefined);
        expect(at(b + 1)).to.equal('grow');
      }
    });

    it('0 is nobody, 100 is everybody; outside the rollout the next candidate decides', () => {
      const m = Matcher.build([
        policy({ policy_id: 'zero', scope: { org_id: 'o', user_id: '*' }, rollout_percent: 0 }),
        policy({ policy_id: 'fallback', scope: { org_id: 'o' } }),
      ]);
      for (let i = 0; i < 100; i++) expect(winner(m, req({ org_id: 'o', user_id: `u${i}` }))).to.equal('fallback');
      const half = Matcher.build([
        policy({ policy_id: 'half', scope: { org_id: 'o', user_id: '*' }, rollout_percent: 50 }),
        policy({ policy_id: 'fallback', scope: { org_id: 'o' } }),
      ]);
      const seen = new Set<string | undefined>();
      for (let i = 0; i < 100; i++) seen.add(winner(half, req({ org_id: 'o', user_id: `u${i}` })));
      expect([...seen].sort()).to.deep.equal(['fallback', 'half']);
    });

    it('without * fields the identity is empty: all requests in or all out', () => {
      const id = 'no-star';
      const inside = rolloutBucket(id, []) < 50;
      const m = Matcher.build([policy({ policy_id: id, scope: { org_id: 'o' }, rollout_percent: 50 })]);
      for (let i = 0; i < 20; i++) expect(winner(m, req({ org_id: 'o', user_id: `u${i}` }))).to.equal(inside ? id : undefined);
    });
  });

  describe('enforce and shadow', () => {
    it('returns the best shadow candidate beside the best enforce candidate', () => {
      const m = Matcher.build([
        policy({ policy_id: 'enforce-general', scope: { org_id: 'o' } }),
        policy({ policy_id: 'shadow-specific', scope: { org_id: 'o', user_id: '*' }, enforcement_mode: 'shadow' }),
        policy({ policy_id: 'shadow-general', scope: { org_id: 'o' }, enforcement_mode: 'shadow' }),
      ]);
      const r = m.match(req({ org_id: 'o', user_id: 'u' }), 'rate', NOW);
      expect(r.enforce?.compiled.policy.policy_id).to.equal('enforce-general');
      expect(r.enforce?.identity).to.deep.equal([]);
      expect(r.shadow?.compiled.policy.policy_id).to.equal('shadow-specific');
      expect(r.shadow?.identity).to.deep.equal(['user_id', 'u']);
    });

    it('a shadow candidate alone', () => {
      const m = Matcher.build([policy({ policy_id: 's', enforcement_mode: 'shadow' })]);
      const r = m.match(req(), 'rate', NOW);
      expect(r.enforce).to.equal(undefined);
      expect(r.shadow?.compiled.policy.policy_id).to.equal('s');
    });
  });

  describe('families', () => {
    it('check sees every algorithm but concurrency; acquire/release only concurrency', () => {
      const m = Matcher.build([
        policy({ policy_id: 'rate', scope: { org_id: 'o' } }),
        policy({ policy_id: 'leases', scope: { org_id: 'o', user_id: '*' }, algorithm: LEASES }),
        policy({ policy_id: 'quota', scope: { org_id: 'q' }, algorithm: { type: 'quota', limit: 5, quota_period: '1d' } }),
        policy({ policy_id: 'bucket', scope: { org_id: 'b' }, algorithm: { type: 'token_bucket', limit: 5, window: '1s' } }),
      ]);
      expect(winner(m, req({ org_id: 'o', user_id: 'u' }), 'rate')).to.equal('rate');
      expect(winner(m, req({ org_id: 'o', user_id: 'u' }), 'concurrency')).to.equal('leases');
      expect(winner(m, req({ org_id: 'q' }), 'rate')).to.equal('quota');
      expect(winner(m, req({ org_id: 'q' }), 'concurrency')).to.equal(undefined);
      expect(winner(m, req({ org_id: 'b' }), 'rate')).to.equal('bucket');
      const leases = m.match(req({ org_id: 'o', user_id: 'u' }), 'concurrency', NOW).enforce!;
      expect(leases.compiled.family).to.equal('concurrency');
      expect(leases.compiled.spec).to.deep.equal({ type: 'concurrency', maxConcurrency: 2, leaseTtlMs: 120_000 });
      expect(m.get('rate')?.family).to.equal('rate');
      expect(m.size).to.equal(4);
    });
  });

  it('skips (and reports) a policy it cannot compile instead of failing the build', () => {
    const bad = { ...policy({ policy_id: 'bad' }), metadata: { match_expr: 'nope ==' } };
    const m = Matcher.build([bad, policy({ policy_id: 'good' })]);
    expect(m.skipped.map((s) => s.policy_id)).to.deep.equal(['bad']);
    expect(winner(m, req())).to.equal('good');
  });

  it('buckets are visited for every indexed field and tag, whichever is rarer', () => {
    // Many policies share org_id=o, so the user-specific ones are indexed under user_id or a tag.
    const policies: Policy[] = [];
    for (let i = 0; i < 50; i++) policies.push(policy({ policy_id: `org-${i}`, scope: { org_id: 'o', operation: `op${i}` } }));
    policies.push(policy({ policy_id: 'user', scope: { org_id: 'o', user_id: 'alice' }, priority: 1 }));
    policies.push(policy({ policy_id: 'tag', scope: { org_id: 'o', tags: { env: 'prod' } } }));
    const m = Matcher.build(policies);
    expect(winner(m, req({ org_id: 'o', user_id: 'alice', tags: { env: 'prod' } }))).to.equal('user');
    expect(winner(m, req({ org_id: 'o', tags: { env: 'prod' } }))).to.equal('tag');
    expect(winner(m, req({ org_id: 'o', operation: 'op7' }))).to.equal('org-7');
    // Many request tags and few indexed tag keys, and the other way round.
    const manyTags: Record<string, string> = {};
    for (let i = 0; i < 50; i++) manyTags[`k${i}`] = 'v';
    manyTags.env = 'prod';
    expect(winner(m, req({ org_id: 'o', tags: manyTags }))).to.equal('tag');
  });

  describe('what a compiled policy holds (a snapshot keeps one per policy)', () => {
    const perUser = (id: string, tenant: string, algorithm: Record<string, unknown> = FIXED) =>
      policy({ policy_id: id, scope: { org_id: 'acme', tenant_id: tenant, user_id: '*' }, algorithm });
    const m = Matcher.build([
      perUser('a', 't-1'),
      perUser('b', 't-2'),
      perUser('c', 't-3', { type: 'fixed_window', limit: 11, window: '1m' }),
      policy({ policy_id: 'd', scope: { org_id: 'acme', tenant_id: 't-4', api_key: '*' } }),
    ]);

    it('policies with the same algorithm parameters share one counter spec', () => {
      expect(m.get('a')!.spec).to.equal(m.get('b')!.spec);
      expect(m.get('a')!.spec).to.deep.equal({ type: 'fixed_window', limit: 10, windowMs: 60_000 });
      expect(m.get('c')!.spec).to.not.equal(m.get('a')!.spec);
      expect(m.get('c')!.spec).to.deep.equal({ type: 'fixed_window', limit: 11, windowMs: 60_000 });
    });

    it("a global budget's spec carries the policy's lease.max_hold for the region holder, 1s without a lease", () => {
      const global = (id: string, lease?: Record<string, unknown>) =>
        policy({ policy_id: id, scope: { org_id: 'acme', tenant_id: id }, budget: 'global', ...(lease ? { lease } : {}) });
      const g = Matcher.build([global('held', { max_hold: '5s' }), global('default'), global('units-only', { max_units: 7 })]);
      expect(g.get('held')!.spec).to.deep.include({ global: { policyId: 'held', lease: { shape: 'window', maxUnits: Infinity, maxHoldMs: 5000 } } });
      expect(g.get('default')!.spec).to.deep.include({ global: { policyId: 'default', lease: { shape: 'window', maxUnits: Infinity, maxHoldMs: 1000 } } });
      expect(g.get('units-only')!.spec).to.deep.include({ global: { policyId: 'units-only', lease: { shape: 'window', maxUnits: Infinity, maxHoldMs: 1000 } } });
    });

    it('policies with the same * fields share one wildcard list', () => {
      expect(m.get('a')!.wildcards).to.equal(m.get('b')!.wildcards);
      expect(m.get('a')!.wildFields).to.equal(m.get('c')!.wildFields);
      expect(m.get('d')!.wildcards).to.deep.equal([{ name: 'api_key', field: 'api_key' }]);
      const a = m.match(req({ org_id: 'acme', tenant_id: 't-1', user_id: 'u' }), 'rate', NOW).enforce!;
      const d = m.match(req({ org_id: 'acme', tenant_id: 't-4', api_key: 'k' }), 'rate', NOW).enforce!;
      expect([a.compiled.policy.policy_id, a.identity]).to.deep.equal(['a', ['user_id', 'u']]);
      expect([d.compiled.policy.policy_id, d.identity]).to.deep.equal(['d', ['api_key', 'k']]);
    });

    it('keeps only what matching reads and the pair it is indexed under: no build-only lists', () => {
      expect(Object.keys(m.get('a')!)).to.have.members([
        'rank', 'enforce', 'rolloutPercent', 'validFromMs', 'validToMs', 'checkFields', 'wildFields', 'checkTags',
        'wildTags', 'matchExpr', 'policy', 'spec', 'specificity', 'family', 'layer', 'wildcards', 'lease', 'home', 'homeValue',
      ]);
    });
  });

  describe('index agrees with a brute-force reference (fast-check)', () => {
    const VALUES: Record<string, string[]> = {
      org_id: ['a', 'b', '*'],
      user_id: ['u1', 'u2', '*'],
      region: ['eu', 'us', '*'],
      signal_type: ['http', 'log', '*'],
    };
    const EXPRS = ['severity == "debug"', 'tags["env"] == "prod"', 'quantity > 1', 'true'];
    const optional = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });

    const policyArb = fc.record({
      org_id: optional(fc.constantFrom(...VALUES.org_id)),
      user_id: optional(fc.constantFrom(...VALUES.user_id)),
      region: optional(fc.constantFrom(...VALUES.region)),
      signal_type: optional(fc.constantFrom(...VALUES.signal_type)),
      env: optional(fc.constantFrom('prod', 'dev', '*')),
      team: optional(fc.constantFrom('t1', '*')),
      expr: optional(fc.constantFrom(...EXPRS)),
      priority: fc.integer({ min: -2, max: 2 }),
      shadow: fc.boolean(),
      enabled: fc.boolean(),
      rollout: fc.constantFrom(0, 30, 100, 100),
      window: fc.constantFrom('always', 'past', 'future', 'now'),
      concurrency: fc.boolean(),
    });
    const requestArb = fc.record({
      org_id: optional(fc.constantFrom('a', 'b', 'c', '')),
      user_id: optional(fc.constantFrom('u1', 'u2', 'u3')),
      region: optional(fc.constantFrom('eu', 'us')),
      signal_type: optional(fc.constantFrom('http', 'log')),
      severity: optional(fc.constantFrom('debug', 'info')),
      env: optional(fc.constantFrom('prod', 'dev')),
      team: optional(fc.constantFrom('t1', 't2')),
      quantity: fc.integer({ min: 1, max: 3 }),
    });

    function toPolicy(p: {
      org_id?: string; user_id?: string; region?: string; signal_type?: string; env?: string; team?: string; expr?: string;
      priority: number; shadow: boolean; enabled: boolean; rollout: number; window: string; concurrency: boolean;
    }, i: number): Policy {
      const scope: Record<string, unknown> = {};
      for (const f of ['org_id', 'user_id', 'region', 'signal_type'] as const) if (p[f] !== undefined) scope[f] = p[f];
      const tags: Record<string, string> = {};
      if (p.env !== undefined) tags.env = p.env;
      if (p.team !== undefined) tags.team = p.team;
      if (Object.keys(tags).length) scope.tags = tags;
      const s = NOW / 1000;
      const windows: Record<string, [number, number]> = { always: [0, 0], past: [s - 100, s - 10], future: [s + 10, 0], now: [s - 10, s + 10] };
      const [from, to] = windows[p.window];
      return policy({
        policy_id: `p${String(i).padStart(2, '0')}${['x', 'A', '_'][i % 3]}`,
        scope,
        priority: p.priority,
        enforcement_mode: p.shadow ? 'shadow' : 'enforce',
        enabled: p.enabled,
        rollout_percent: p.rollout,
        valid_from_unix: from,
        valid_to_unix: to,
        metadata: p.expr ? { match_expr: p.expr } : {},
        algorithm: p.concurrency ? LEASES : FIXED,
      });
    }

    function toRequest(r: Record<string, unknown>): RequestContext {
      const o = r as Record<string, string | number | undefined>;
      const ctx: Record<string, unknown> = { quantity: o.quantity, tags: {} };
      for (const f of ['org_id', 'user_id', 'region', 'signal_type', 'severity']) if (o[f] !== undefined) ctx[f] = o[f];
      const tags = ctx.tags as Record<string, string>;
      if (o.env !== undefined) tags.env = o.env as string;
      if (o.team !== undefined) tags.team = o.team as string;
      return ctx as RequestContext;
    }

    /** The matching rule (docs/reference.md "Matching and specificity"), written as plainly as possible. */
    function reference(policies: Policy[], ctx: RequestContext, family: PolicyFamily, nowMs: number) {
      const candidates: { p: Policy; spec: number; identity: string[] }[] = [];
      for (const p of policies) {
        if (!p.enabled) continue;
        if ((p.algorithm.type === 'concurrency') !== (family === 'concurrency')) continue;
        if (p.valid_from_unix && nowMs < p.valid_from_unix * 1000) continue;
        if (p.valid_to_unix && nowMs >= p.valid_to_unix * 1000) continue;
        let ok = true;
        let spec = 0;
        const wild: [string, string][] = [];
        for (const [f, v] of Object.entries(p.scope)) {
          if (f === 'tags') continue;
          const actual = (ctx as Record<string, unknown>)[f] as string | undefined;
          if (v === '*') {
            spec += 1;
            if (!actual) ok = false;
            else wild.push([f, actual]);
          } else {
            spec += 2;
            if (actual !== v) ok = false;
          }
        }
        for (const [k, v] of Object.entries(p.scope.tags ?? {})) {
          const actual = Object.hasOwn(ctx.tags, k) ? ctx.tags[k] : undefined;
          if (v === '*') {
            spec += 1;
            if (!actual) ok = false;
            else wild.push([`tags.${k}`, actual]);
          } else {
            spec += 2;
            if (actual !== v) ok = false;
          }
        }
        if (p.metadata.match_expr !== undefined) {
          spec += 1;
          const c = compileMatchExpr(p.metadata.match_expr);
          if (!c.ok || !c.evaluate(ctx)) ok = false;
        }
        if (!ok) continue;
        wild.sort((a, b) => (a[0] < b[0] ? -1 : 1));
        const identity = wild.flat();
        if (rolloutBucket(p.policy_id, identity) >= p.rollout_percent) continue;
        candidates.push({ p, spec, identity });
      }
      candidates.sort((a, b) => b.spec - a.spec || b.p.priority - a.p.priority || (a.p.policy_id < b.p.policy_id ? -1 : 1));
      const best = (mode: string) => candidates.find((c) => c.p.enforcement_mode === mode);
      const e = best('enforce');
      const s = best('shadow');
      return { enforce: e && [e.p.policy_id, e.identity], shadow: s && [s.p.policy_id, s.identity] };
    }

    it('on random policy sets and requests', () => {
      fc.assert(
        fc.property(fc.array(policyArb, { maxLength: 40 }), fc.array(requestArb, { minLength: 1, maxLength: 15 }), (rawPolicies, rawRequests) => {
          const policies = rawPolicies.map(toPolicy);
          const m = Matcher.build(policies);
          for (const raw of rawRequests) {
            const ctx = toRequest(raw);
            for (const family of ['rate', 'concurrency'] as const) {
              const got = m.match(ctx, family, NOW);
              const want = reference(policies, ctx, family, NOW);
              expect({
                enforce: got.enforce && [got.enforce.compiled.policy.policy_id, got.enforce.identity],
                shadow: got.shadow && [got.shadow.compiled.policy.policy_id, got.shadow.identity],
              }).to.deep.equal(want);
            }
          }
        }),
        { numRuns: 400 },
      );
    });
  });
});
