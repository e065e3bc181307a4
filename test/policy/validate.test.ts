import { expect } from 'chai';
import fc from 'fast-check';
import { counterSpecOf } from '../../src/matching/counter-spec-of.js';
import { ALGORITHM_TYPES, type FieldError } from '../../src/policy/types.js';
import { validatePolicy, type PolicyInput } from '../../src/policy/validate.js';
import { ALGORITHM_KEYS, POLICY_KEYS } from '../../src/schema/policy.js';

const base = () => ({
  policy_id: 'p1',
  algorithm: { type: 'fixed_window', limit: 10, window: '1m' } as Record<string, unknown>,
});

function ok(raw: unknown, options?: { requireId?: boolean }): PolicyInput {
  const r = validatePolicy(raw, options);
  if (!r.ok) throw new Error(`expected valid, got ${JSON.stringify(r.errors)}`);
  return r.policy;
}

function errs(raw: unknown, options?: { requireId?: boolean }): FieldError[] {
  const r = validatePolicy(raw, options);
  if (r.ok) throw new Error(`expected errors, got valid ${JSON.stringify(r.policy)}`);
  for (const e of r.errors) {
    expect(e.field, JSON.stringify(e)).to.be.a('string').and.not.equal('');
    expect(e.message, JSON.stringify(e)).to.be.a('string').and.not.equal('');
  }
  return r.errors;
}

function fields(raw: unknown, options?: { requireId?: boolean }): string[] {
  return errs(raw, options).map((e) => e.field);
}

function withAlg(alg: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return { policy_id: 'p1', algorithm: alg, ...extra };
}

/** base() with every default of the contract applied. */
const BASE_WITH_DEFAULTS = {
  policy_id: 'p1',
  name: 'p1',
  description: '',
  enabled: true,
  priority: 0,
  scope: {},
  algorithm: { type: 'fixed_window', limit: 10, window: '1m' },
  action: 'deny',
  failure_mode: 'fail_open',
  enforcement_mode: 'enforce',
  rollout_percent: 100,
  metadata: {},
  valid_from_unix: 0,
  valid_to_unix: 0,
};

describe('validatePolicy', () => {
  describe('defaults', () => {
    it('applies every documented default', () => {
      const p = ok(base());
      expect(JSON.parse(JSON.stringify(p))).to.deep.equal(BASE_WITH_DEFAULTS);
    });

    it('keeps explicit values', () => {
      const p = ok({
        ...base(),
        name: 'N',
        description: 'D',
        enabled: false,
        priority: -5,
        scope: { org_id: 'acme', user_id: '*', tags: { env: 'prod' } },
        action: 'delay',
        failure_mode: 'fail_closed',
        enforcement_mode: 'shadow',
        rollout_percent: 0,
        metadata: { owner: 'team-a' },
        valid_from_unix: 10,
        valid_to_unix: 20,
      });
      expect(p.name).to.equal('N');
      expect(p.description).to.equal('D');
      expect(p.enabled).to.equal(false);
      expect(p.priority).to.equal(-5);
      expect(p.scope).to.deep.equal({ org_id: 'acme', user_id: '*', tags: { env: 'prod' } });
      expect(p.action).to.equal('delay');
      expect(p.failure_mode).to.equal('fail_closed');
      expect(p.enforcement_mode).to.equal('shadow');
      expect(p.rollout_percent).to.equal(0);
      expect(p.metadata).to.deep.equal({ owner: 'team-a' });
      expect([p.valid_from_unix, p.valid_to_unix]).to.deep.equal([10, 20]);
    });

    it('treats null as absent for optional fields', () => {
      const p = ok({ ...base(), name: null, priority: null, scope: null, metadata: null, action: null });
      expect(p.name).to.equal('p1');
      expect(p.priority).to.equal(0);
      expect(p.action).to.equal('deny');
    });

    it('ignores server-set fields, so a policy read can be written back', () => {
      const p = ok({ ...base(), version: 7, created_at: 'x', updated_at: 'y' }) as unknown as Record<string, unknown>;
      expect(p).to.not.have.property('version');
      expect(p).to.not.have.property('created_at');
      expect(p).to.not.have.property('updated_at');
    });

    it('refuses unknown top-level fields, each by name, with the nearest known one', () => {
      expect(errs({ ...base(), acton: 'delay', descripton: 'd', extra: 1 })).to.deep.equal([
        { field: 'acton', message: 'unknown field; did you mean `action`?' },
        { field: 'descripton', message: 'unknown field; did you mean `description`?' },
        { field: 'extra', message: `unknown field (policy fields: ${POLICY_KEYS.join(', ')})` },
      ]);
      expect(errs({ policy_id: 'p1', '': 1, algorithm: base().algorithm })).to.deep.equal([{ field: '""', message: `unknown field (policy fields: ${POLICY_KEYS.join(', ')})` }]);
    });

    it('names at most 20 unknown keys of an object, cut at 64 characters, and counts the rest in one error', () => {
      // A megabyte body holds tens of thousands of made-up keys: naming each would stall the server
      // and answer tens of megabytes.
      const many = (prefix: string): Record<string, number> => Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`${prefix}${i}`, 1]));
      const e = errs({ ...base(), ...many('k'), algorithm: { ...base().algorithm, ...many('a') }, source_ip_prefix: many('s'), lease: many('l') });
      for (const [path, field] of [['', 'body'], ['algorithm.', 'algorithm'], ['source_ip_prefix.', 'source_ip_prefix'], ['lease.', 'lease']]) {
        const named = e.filter((x) => x.field.startsWith(path) && x.message.startsWith('unknown field') && (path !== '' || !x.field.includes('.')));
        expect(named, path).to.have.length(20);
        expect(e.filter((x) => x.field === field && x.message.startsWith('9980 more unknown fields')), path).to.have.length(1);
      }
      const long = `x${'y'.repeat(100_000)}`;
      expect(fields({ ...base(), [long]: 1, scope: { [long]: 'a' } })).to.deep.equal([`x${'y'.repeat(63)}…`, `scope.x${'y'.repeat(63)}…`]);
    });

    it('a field written in the wrong object of the policy: says where it belongs', () => {
      const e = errs({ ...base(), endpoint: '/x', limit: 5, max_units: 2, algorithm: { ...base().algorithm, action: 'deny' }, scope: { window: '1s' }, lease: { v4: 24 } });
      expect(e).to.deep.equal([
        { field: 'endpoint', message: 'unknown field here; did you mean `scope.endpoint`?' },
        { field: 'limit', message: 'unknown field here; did you mean `algorithm.limit`?' },
        { field: 'max_units', message: 'unknown field here; did you mean `lease.max_units`?' },
        { field: 'scope.window', message: 'unknown field here; did you mean `algorithm.window`?' },
        { field: 'algorithm.action', message: 'unknown field here; did you mean `action` at the top level?' },
        { field: 'lease.v4', message: 'unknown field here; did you mean `source_ip_prefix.v4`?' },
      ]);
    });

    it('a misspelt required field gives both the unknown key and the missing one', () => {
      const { algorithm, ...rest } = base();
      expect(errs({ ...rest, algoritm: algorithm })).to.deep.equal([
        { field: 'algoritm', message: 'unknown field; did you mean `algorithm`?' },
        { field: 'algorithm', message: 'is required (an object with "type": one of fixed_window, sliding_window_log, sliding_window_counter, token_bucket, leaky_bucket, concurrency, quota)' },
      ]);
    });
  });

  describe('body and policy_id', () => {
    for (const bad of [null, 1, 'x', [], true]) {
      it(`rejects a non-object body ${JSON.stringify(bad)}`, () => {
        expect(fields(bad)).to.deep.equal(['body']);
      });
    }
    it('requires policy_id unless requireId is false', () => {
      expect(fields({ algorithm: base().algorithm })).to.deep.equal(['policy_id']);
      const p = ok({ algorithm: base().algorithm }, { requireId: false });
      expect(p.policy_id).to.equal('');
    });
    it('accepts the allowed characters and lengths', () => {
      for (const id of ['a', '0', 'a.b_c:d-e', 'A'.repeat(128), 'tenant:acme.v2']) expect(ok({ ...base(), policy_id: id }).policy_id).to.equal(id);
    });
    for (const id of ['', '-a', '.a', '_a', ':a', 'a b', 'a/b', 'ä', 'A'.repeat(129), 'a{b}']) {
      it(`rejects policy_id ${JSON.stringify(id.length > 20 ? id.slice(0, 10) + '…' : id)}`, () => {
        expect(fields({ ...base(), policy_id: id })).to.deep.equal(['policy_id']);
      });
    }
    it('rejects a non-string policy_id', () => {
      expect(fields({ ...base(), policy_id: 5 })).to.deep.equal(['policy_id']);
    });
  });

  describe('top-level fields', () => {
    const cases: [string, unknown][] = [
      ['name', 5],
      ['name', 'x'.repeat(257)],
      ['description', {}],
      ['enabled', 'true'],
      ['enabled', 1],
      ['priority', 1.5],
      ['priority', '1'],
      ['priority', 2 ** 53],
      ['action', 'block'],
      ['action', 'allow'],
      ['failure_mode', 'open'],
      ['enforcement_mode', 'dry_run'],
      ['rollout_percent', 101],
      ['rollout_percent', -1],
      ['rollout_percent', 50.5],
      ['rollout_percent', '50'],
      ['valid_from_unix', -1],
      ['valid_to_unix', 1.5],
      ['valid_to_unix', '100'],
      ['scope', 'org'],
      ['scope', []],
      ['metadata', 'x'],
      ['metadata', []],
      ['budget', 'planet'],
      ['budget', 'GLOBAL'],
      ['budget', true],
    ];
    for (const [field, value] of cases) {
      it(`rejects ${field} = ${JSON.stringify(value).slice(0, 30)}`, () => {
        expect(fields({ ...base(), [field]: value })).to.deep.equal([field]);
      });
    }
    it('accepts every action, failure mode and enforcement mode', () => {
      for (const action of ['deny', 'delay', 'drop', 'downgrade', 'drop_low_priority']) expect(ok({ ...base(), action }).action).to.equal(action);
      expect(ok({ ...base(), action: 'sample', algorithm: { ...base().algorithm, sample_rate: 0.5 } }).action).to.equal('sample');
      expect(ok({ ...base(), failure_mode: 'fail_closed' }).failure_mode).to.equal('fail_closed');
      expect(ok({ ...base(), enforcement_mode: 'shadow' }).enforcement_mode).to.equal('shadow');
    });
    it('keeps budget only when given: regional or global', () => {
      expect(ok(base())).to.not.have.property('budget');
      expect(ok({ ...base(), budget: 'global' }).budget).to.equal('global');
      expect(ok({ ...base(), budget: 'regional' }).budget).to.equal('regional');
      const quotaShaped = { id: 'q', algorithm: 'quota', config: { quota: 5, window_seconds: 60 }, budget: 'global' };
      expect(ok(quotaShaped).budget).to.equal('global');
    });
    it('requires valid_from < valid_to when both are non-zero', () => {
      expect(fields({ ...base(), valid_from_unix: 20, valid_to_unix: 20 })).to.deep.equal(['valid_to_unix']);
      expect(fields({ ...base(), valid_from_unix: 30, valid_to_unix: 20 })).to.deep.equal(['valid_to_unix']);
      ok({ ...base(), valid_from_unix: 30, valid_to_unix: 0 });
      ok({ ...base(), valid_from_unix: 0, valid_to_unix: 30 });
    });
    it('accepts rollout bounds 0 and 100', () => {
      expect(ok({ ...base(), rollout_percent: 0 }).rollout_percent).to.equal(0);
      expect(ok({ ...base(), rollout_percent: 100 }).rollout_percent).to.equal(100);
    });
  });

  describe('algorithm', () => {
    it('requires algorithm and its type', () => {
      expect(fields({ policy_id: 'p1' })).to.deep.equal(['algorithm']);
      expect(fields(withAlg({ limit: 1 }))).to.deep.equal(['algorithm.type']);
      expect(fields(withAlg({ type: 'gcra', limit: 1 }))).to.deep.equal(['algorithm.type']);
      expect(fields({ policy_id: 'p1', algorithm: 'fixed_window' }).length).to.be.greaterThan(0);
      expect(fields({ policy_id: 'p1', algorithm: [1] })).to.deep.equal(['algorithm']);
    });

    for (const type of ['fixed_window', 'sliding_window_log', 'sliding_window_counter', 'token_bucket', 'leaky_bucket']) {
      it(`${type}: requires limit and window`, () => {
        expect(fields(withAlg({ type })).sort()).to.deep.equal(['algorithm.limit', 'algorithm.window']);
        ok(withAlg({ type, limit: 5, window: '10s' }));
      });
    }

    it('limit must be a positive safe integer', () => {
      for (const limit of [0, -1, 1.5, '10', 2 ** 53, Infinity, true]) {
        expect(fields(withAlg({ type: 'fixed_window', limit, window: '1s' }))).to.deep.equal(['algorithm.limit']);
      }
    });

    it('window must be a duration string; a bare number is rejected', () => {
      for (const window of [10, '10', '', '0s', 'ten seconds', '1x', {}, '-1s']) {
        const e = errs(withAlg({ type: 'fixed_window', limit: 5, window }));
        expect(e.map((x) => x.field)).to.deep.equal(['algorithm.window']);
      }
      const [bare] = errs(withAlg({ type: 'fixed_window', limit: 5, window: '10' }));
      expect(bare.message).to.contain('"10" is not a duration');
      const [num] = errs(withAlg({ type: 'fixed_window', limit: 5, window: 10 }));
      expect(num.message).to.contain('bare number');
      for (const window of ['500ms', '10s', '1m', '1h', '1d', '1h30m']) ok(withAlg({ type: 'fixed_window', limit: 5, window }));
    });

    it('sliding_window_counter: sub_window_count 1..60 dividing the window', () => {
      expect(ok(withAlg({ type: 'sliding_window_counter', limit: 5, window: '1m', sub_window_count: 6 })).algorithm.sub_window_count).to.equal(6);
      expect(ok(withAlg({ type: 'sliding_window_counter', limit: 5, window: '1m', sub_window_count: 60 })).algorithm.sub_window_count).to.equal(60);
      for (const sub of [0, 61, 1.5, '6', -2]) {
        expect(fields(withAlg({ type: 'sliding_window_counter', limit: 5, window: '1m', sub_window_count: sub }))).to.deep.equal(['algorithm.sub_window_count']);
      }
      const e = errs(withAlg({ type: 'sliding_window_counter', limit: 5, window: '1m', sub_window_count: 7 }));
      expect(e.map((x) => x.field)).to.deep.equal(['algorithm.sub_window_count']);
      expect(e[0].message).to.contain('60000ms');
      expect(ok(withAlg({ type: 'sliding_window_counter', limit: 5, window: '1m' })).algorithm).to.not.have.property('sub_window_count');
    });

    for (const [type, rateKey] of [['token_bucket', 'refill_rate'], ['leaky_bucket', 'leak_rate']] as const) {
      it(`${type}: burst, ${rateKey}; window optional with an explicit rate`, () => {
        const p = ok(withAlg({ type, limit: 10, window: '1s', burst: 20, [rateKey]: 2.5 }));
        expect(p.algorithm).to.deep.equal({ type, limit: 10, window: '1s', burst: 20, [rateKey]: 2.5 });
        ok(withAlg({ type, limit: 10, [rateKey]: 3 }));
        for (const burst of [0, 1.5, '2']) expect(fields(withAlg({ type, limit: 10, window: '1s', burst }))).to.deep.equal(['algorithm.burst']);
        for (const rate of [0, -1, Infinity, NaN, '1']) {
          expect(fields(withAlg({ type, limit: 10, window: '1s', [rateKey]: rate }))).to.deep.equal([`algorithm.${rateKey}`]);
        }
      });
    }

    it('concurrency: max_concurrency or limit, lease_ttl as duration or whole seconds', () => {
      expect(ok(withAlg({ type: 'concurrency', max_concurrency: 3 })).algorithm).to.deep.equal({ type: 'concurrency', max_concurrency: 3 });
      expect(ok(withAlg({ type: 'concurrency', limit: 3 })).algorithm).to.deep.equal({ type: 'concurrency', limit: 3 });
      expect(fields(withAlg({ type: 'concurrency' }))).to.deep.equal(['algorithm.max_concurrency']);
      expect(fields(withAlg({ type: 'concurrency', max_concurrency: 0 }))).to.deep.equal(['algorithm.max_concurrency']);
      expect(ok(withAlg({ type: 'concurrency', limit: 3, lease_ttl: '30s' })).algorithm.lease_ttl).to.equal('30s');
      expect(ok(withAlg({ type: 'concurrency', limit: 3, lease_ttl: 30 })).algorithm.lease_ttl).to.equal(30);
      for (const ttl of [0, -5, 1.5, '30', 'abc', {}, true]) {
        expect(fields(withAlg({ type: 'concurrency', limit: 3, lease_ttl: ttl }))).to.deep.equal(['algorithm.lease_ttl']);
      }
    });

    it('quota: limit and quota_period (or window)', () => {
      expect(ok(withAlg({ type: 'quota', limit: 100, quota_period: '1d' })).algorithm).to.deep.equal({ type: 'quota', limit: 100, quota_period: '1d' });
      expect(ok(withAlg({ type: 'quota', limit: 100, window: '1h' })).algorithm).to.deep.equal({ type: 'quota', limit: 100, window: '1h' });
      expect(fields(withAlg({ type: 'quota', limit: 100 }))).to.deep.equal(['algorithm.quota_period']);
      expect(fields(withAlg({ type: 'quota', quota_period: '1d' }))).to.deep.equal(['algorithm.limit']);
      expect(fields(withAlg({ type: 'quota', limit: 100, quota_period: 86400 }))).to.deep.equal(['algorithm.quota_period']);
    });

    it('common fields: cost_per_request and sample_rate', () => {
      expect(ok(withAlg({ type: 'quota', limit: 100, quota_period: '1d', cost_per_request: 5 })).algorithm.cost_per_request).to.equal(5);
      for (const cost of [0, 1.5, '5', -1]) {
        expect(fields(withAlg({ type: 'quota', limit: 100, quota_period: '1d', cost_per_request: cost }))).to.deep.equal(['algorithm.cost_per_request']);
      }
      for (const rate of [0, 0.25, 1]) expect(ok(withAlg({ type: 'fixed_window', limit: 1, window: '1s', sample_rate: rate })).algorithm.sample_rate).to.equal(rate);
      for (const rate of [-0.1, 1.1, '0.5', NaN]) {
        expect(fields(withAlg({ type: 'fixed_window', limit: 1, window: '1s', sample_rate: rate }))).to.deep.equal(['algorithm.sample_rate']);
      }
    });

    it('action sample requires algorithm.sample_rate', () => {
      const e = errs({ ...base(), action: 'sample' });
      expect(e.map((x) => x.field)).to.deep.equal(['algorithm.sample_rate']);
      expect(e[0].message).to.contain('sample');
    });

    it('refuses fields that do not belong to the type, and unknown ones, each by name', () => {
      const e = errs(withAlg({ type: 'fixed_window', limit: 1, window: '1s', burst: 'x', leak_rate: -1, max_concurrency: 2, lease_ttl: 'bad', quota_period: 5, frobnicate: 1, limt: 2 }));
      const fixedFields = 'type, limit, window, calendar, timezone, cost_per_request, sample_rate';
      expect(e).to.deep.equal([
        ...['burst', 'leak_rate', 'max_concurrency', 'lease_ttl', 'quota_period'].map((k) => ({ field: `algorithm.${k}`, message: `does not apply to fixed_window (fixed_window fields: ${fixedFields})` })),
        { field: 'algorithm.frobnicate', message: `unknown field (fixed_window fields: ${fixedFields})` },
        { field: 'algorithm.limt', message: 'unknown field; did you mean `limit`?' },
      ]);
      expect(errs(withAlg({ type: 'token_bucket', limit: 5, window: '1s', burts: 2 }))).to.deep.equal([{ field: 'algorithm.burts', message: 'unknown field; did you mean `burst`?' }]);
    });

    it('a bad type hides none of the other problems', () => {
      expect(errs(withAlg({ type: 'fixed_windw', limit: 0, window: 60, burts: 1 }))).to.deep.equal([
        { field: 'algorithm.type', message: 'must be one of fixed_window, sliding_window_log, sliding_window_counter, token_bucket, leaky_bucket, concurrency, quota, got the string "fixed_windw"; did you mean `fixed_window`?' },
        { field: 'algorithm.burts', message: 'unknown field; did you mean `burst`?' },
        { field: 'algorithm.limit', message: 'must be a positive integer, got number 0' },
        { field: 'algorithm.window', message: 'must be a duration string such as "60s" or "60ms" (a bare number is ambiguous), got number 60' },
      ]);
      expect(fields(withAlg({ limit: 'x', window: '1m' }))).to.deep.equal(['algorithm.type', 'algorithm.limit']);
    });

    it('every valid algorithm yields a counter spec', () => {
      const configs = [
        { type: 'fixed_window', limit: 1, window: '1s' },
        { type: 'sliding_window_log', limit: 1, window: '1s' },
        { type: 'sliding_window_counter', limit: 1, window: '1s', sub_window_count: 10 },
        { type: 'token_bucket', limit: 1, refill_rate: 1 },
        { type: 'leaky_bucket', limit: 1, window: '1s' },
        { type: 'concurrency', limit: 1, lease_ttl: 5 },
        { type: 'quota', limit: 1, window: '1d' },
      ];
      expect(configs.map((c) => c.type)).to.have.members([...ALGORITHM_TYPES]);
      for (const c of configs) expect(() => counterSpecOf(ok(withAlg(c)).algorithm)).to.not.throw();
    });
  });

  describe('scope', () => {
    it('accepts every scope field, exact and *', () => {
      const scope = { org_id: 'a', tenant_id: '*', application: 'app', service: 's', environment: 'prod', signal_type: 'http', operation: 'op', endpoint: '/x', method: 'GET', user_id: '*', api_key: 'k', client_id: 'c', source_ip: '1.2.3.4', region: 'r', resource: 'res', severity: 'info', span_name: 'sp', topic: 't', consumer_group: 'cg', job_type: 'j', tags: { env: 'prod', team: '*' } };
      expect(ok({ ...base(), scope }).scope).to.deep.equal(scope);
    });
    it('names an unknown scope field', () => {
      const e = errs({ ...base(), scope: { usr_id: 'x' } });
      expect(e).to.deep.equal([{ field: 'scope.usr_id', message: e[0].message }]);
      expect(e[0].message).to.equal('unknown field; did you mean `user_id`?');
      expect(fields({ ...base(), scope: { request_id: 'r' } })).to.deep.equal(['scope.request_id']);
      expect(fields({ ...base(), scope: { quantity: '1' } })).to.deep.equal(['scope.quantity']);
    });
    it('scope values must be non-empty strings', () => {
      for (const v of ['', 1, true, [], {}]) expect(fields({ ...base(), scope: { user_id: v } })).to.deep.equal(['scope.user_id']);
    });
    it('scope.signal_type must be a known signal type or *', () => {
      expect(fields({ ...base(), scope: { signal_type: 'smoke' } })).to.deep.equal(['scope.signal_type']);
      ok({ ...base(), scope: { signal_type: '*' } });
    });
    it('tag values name their key', () => {
      expect(fields({ ...base(), scope: { tags: { env: '' } } })).to.deep.equal(['scope.tags.env']);
      expect(fields({ ...base(), scope: { tags: { env: 5 } } })).to.deep.equal(['scope.tags.env']);
      expect(fields({ ...base(), scope: { tags: 'env' } })).to.deep.equal(['scope.tags']);
      expect(fields({ ...base(), scope: { tags: { '': 'x' } } })).to.deep.equal(['scope.tags']);
    });
    it('reports every scope problem at once', () => {
      expect(fields({ ...base(), scope: { usr_id: 'x', org_id: '', tags: { a: 1, b: 'ok', c: '' } } }).sort()).to.deep.equal(
        ['scope.org_id', 'scope.tags.a', 'scope.tags.c', 'scope.usr_id'],
      );
    });
  });

  describe('metadata', () => {
    it('coerces numbers and booleans to strings', () => {
      expect(ok({ ...base(), metadata: { a: 1, b: true, c: 'x' } }).metadata).to.deep.equal({ a: '1', b: 'true', c: 'x' });
    });
    it('rejects other value types, naming the key', () => {
      expect(fields({ ...base(), metadata: { a: {}, b: [1], c: null } }).sort()).to.deep.equal(['metadata.a', 'metadata.b', 'metadata.c']);
    });
    it('compiles match_expr', () => {
      ok({ ...base(), metadata: { match_expr: 'severity in ["debug","info"] && tags["env"] == "prod"' } });
      ok({ ...base(), metadata: { match_expr: 'quantity > 10 && has(tags.tier)' } });
      for (const expr of ['severity ==', 'severity == 1', 'unknown_var == "x"', 'severity', 'quantity + 1', '', 'tags["a"] == 1']) {
        const e = errs({ ...base(), metadata: { match_expr: expr } });
        expect(e.map((x) => x.field), expr).to.deep.equal(['metadata.match_expr']);
      }
    });
    it('min_severity is a known level', () => {
      for (const level of ['trace', 'debug', 'info', 'warn', 'error', 'fatal']) ok({ ...base(), metadata: { min_severity: level } });
      expect(fields({ ...base(), metadata: { min_severity: 'warning' } })).to.deep.equal(['metadata.min_severity']);
    });
  });

  it('returns every problem at once, each naming its field', () => {
    const e = errs({
      policy_id: '-bad',
      enabled: 'yes',
      priority: 'high',
      action: 'explode',
      failure_mode: 'x',
      enforcement_mode: 'y',
      rollout_percent: 200,
      valid_from_unix: -1,
      scope: { nope: 'x' },
      algorithm: { type: 'token_bucket', limit: 0, window: '10', burst: -1 },
      metadata: { match_expr: '1 +', min_severity: 'loud' },
    });
    expect(e.map((x) => x.field).sort()).to.deep.equal([
      'action',
      'algorithm.burst',
      'algorithm.limit',
      'algorithm.window',
      'enabled',
      'enforcement_mode',
      'failure_mode',
      'metadata.match_expr',
      'metadata.min_severity',
      'policy_id',
      'priority',
      'rollout_percent',
      'scope.nope',
      'valid_from_unix',
    ]);
  });

  describe('quota-shaped body', () => {
    const quota = () => ({ id: 'q1', resource: 'llm', algorithm: 'quota', config: { quota: 1000, window_seconds: 3600 }, action_deny: true, metadata: { team: 'ml' } });

    it('normalises to the Policy shape', () => {
      const p = ok(quota());
      expect(JSON.parse(JSON.stringify(p))).to.deep.equal({
        ...BASE_WITH_DEFAULTS,
        policy_id: 'q1',
        name: 'q1',
        scope: { resource: 'llm' },
        algorithm: { type: 'quota', limit: 1000, quota_period: '3600s' },
        metadata: { team: 'ml' },
      });
      expect(counterSpecOf(p.algorithm)).to.deep.equal({ type: 'quota', limit: 1000, periodMs: 3_600_000 });
    });

    it('action_deny false means shadow enforcement', () => {
      const p = ok({ ...quota(), action_deny: false });
      expect(p.enforcement_mode).to.equal('shadow');
      expect(p.action).to.equal('deny');
    });

    it('action_deny absent means deny and enforce', () => {
      const { action_deny: _, ...rest } = quota();
      const p = ok(rest);
      expect([p.action, p.enforcement_mode]).to.deep.equal(['deny', 'enforce']);
    });

    it('is detected without the algorithm string when config is present', () => {
      const { algorithm: _, ...rest } = quota();
      expect(ok(rest).algorithm.type).to.equal('quota');
    });

    it('names the fields the user wrote', () => {
      expect(fields({ ...quota(), config: { quota: 0, window_seconds: 3600 } })).to.deep.equal(['config.quota']);
      expect(fields({ ...quota(), config: { quota: 5, window_seconds: '1h' } })).to.deep.equal(['config.window_seconds']);
      expect(fields({ ...quota(), config: { window_seconds: 60 } })).to.deep.equal(['config.quota']);
      expect(fields({ ...quota(), config: 7 })).to.deep.equal(['config']);
      const { config: _, ...noConfig } = quota();
      expect(fields({ ...noConfig, algorithm: 'quota' })).to.deep.equal(['config']);
      expect(fields({ ...quota(), id: 'bad id' })).to.deep.equal(['id']);
      expect(fields({ ...quota(), id: undefined })).to.deep.equal(['id']);
      expect(fields({ ...quota(), resource: '' })).to.deep.equal(['resource']);
      expect(fields({ ...quota(), algorithm: 'fixed_window' })).to.deep.equal(['algorithm']);
      expect(fields({ ...quota(), action_deny: 'yes' })).to.deep.equal(['action_deny']);
      expect(fields({ ...quota(), metadata: { match_expr: '((' } })).to.deep.equal(['metadata.match_expr']);
    });

    it('passes other policy fields through', () => {
      const p = ok({ ...quota(), priority: 9, failure_mode: 'fail_closed', rollout_percent: 30, description: 'd' });
      expect([p.priority, p.failure_mode, p.rollout_percent, p.description]).to.deep.equal([9, 'fail_closed', 30, 'd']);
    });
  });

  describe('prototype pollution', () => {
    it('__proto__ keys of policy objects are unknown fields, and pollute nothing', () => {
      const raw = JSON.parse('{"policy_id":"p1","__proto__":{"polluted":true},"algorithm":{"type":"fixed_window","limit":1,"window":"1s","__proto__":{"polluted":true}}}');
      expect(fields(raw)).to.deep.equal(['__proto__', 'algorithm.__proto__']);
      expect(Object.prototype).to.not.have.property('polluted');
    });
    it('__proto__ keys of free maps (tags, metadata) are harmless', () => {
      const raw = JSON.parse('{"policy_id":"p1","algorithm":{"type":"fixed_window","limit":1,"window":"1s"},"scope":{"tags":{"__proto__":"x"}},"metadata":{"__proto__":"y","constructor":"z"}}');
      const p = ok(raw);
      expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
      expect(Object.prototype).to.not.have.property('polluted');
      expect((p as unknown as Record<string, unknown>).polluted).to.equal(undefined);
      expect(Object.getPrototypeOf(p.metadata)).to.equal(null);
      expect(Object.keys(p.metadata).sort()).to.deep.equal(['__proto__', 'constructor']);
      expect(p.metadata['__proto__']).to.equal('y');
      expect(Object.getPrototypeOf(p.scope.tags!)).to.equal(null);
      expect(p.scope.tags!['__proto__']).to.equal('x');
      expect(Object.keys(p.algorithm).sort()).to.deep.equal(['limit', 'type', 'window']);
    });
    it('a __proto__ scope key is an unknown scope field', () => {
      expect(fields(JSON.parse('{"policy_id":"p1","algorithm":{"type":"fixed_window","limit":1,"window":"1s"},"scope":{"__proto__":{"org_id":"x"}}}'))).to.deep.equal(['scope.__proto__']);
    });
    it('inherited properties are not read', () => {
      const raw = Object.create({ policy_id: 'p1', algorithm: { type: 'fixed_window', limit: 1, window: '1s' } });
      expect(fields(raw).sort()).to.deep.equal(['algorithm', 'policy_id']);
    });
  });

  it('fuzz: near-valid policies either validate into a usable policy or name a field', () => {
    let valid = 0;
    const arb = fc.record(
      {
        policy_id: fc.constantFrom('p1', 'a.b', 'c:d', 'bad id'),
        scope: fc.dictionary(
          fc.constantFrom('org_id', 'user_id', 'tags', 'org_id', 'user_id', 'nope'),
          fc.oneof(fc.constantFrom('x', '*', 'y', ''), fc.dictionary(fc.constantFrom('env', 'team'), fc.constantFrom('prod', '*', ''))),
          { maxKeys: 2 },
        ),
        algorithm: fc.record(
          {
            type: fc.constantFrom(...ALGORITHM_TYPES),
            limit: fc.constantFrom(1, 5, 100, 0),
            window: fc.constantFrom('1s', '1m', '90ms', '10'),
            sub_window_count: fc.constantFrom(1, 2, 6, 7, 61),
            quota_period: fc.constantFrom('1d', '1h', 'x'),
            max_concurrency: fc.constantFrom(1, 3, 0),
            lease_ttl: fc.constantFrom(5, '30s', -1, 'x'),
            refill_rate: fc.constantFrom(0.5, 10, -1),
            burst: fc.constantFrom(1, 20, 0),
            sample_rate: fc.constantFrom(0, 0.5, 1, 2),
          },
          { requiredKeys: ['type', 'limit', 'window'] },
        )
          // Mostly the type's own fields (a foreign one is refused, naming it).
          .chain((alg) => fc.boolean().map((keepAll) => (keepAll ? alg : Object.fromEntries(Object.entries(alg).filter(([k]) => ALGORITHM_KEYS[alg.type].includes(k)))))),
        action: fc.constantFrom('deny', 'sample', 'delay', 'drop'),
        metadata: fc.dictionary(fc.constantFrom('match_expr', 'min_severity', 'owner'), fc.constantFrom('severity == "info"', 'warn', 'severity =='), { maxKeys: 1 }),
      },
      { requiredKeys: ['algorithm'] },
    );
    fc.assert(
      fc.property(arb, (raw) => {
        const r = validatePolicy(raw);
        if (r.ok) {
          valid++;
          expect(() => counterSpecOf(r.policy.algorithm)).to.not.throw();
        } else {
          for (const e of r.errors) expect(e.field).to.match(/^(policy_id|scope|algorithm|metadata)(\.|$)/);
        }
      }),
      { numRuns: 1500 },
    );
    expect(valid).to.be.greaterThan(50);
  });

  it('fuzz: never throws on arbitrary JSON, and valid results are well formed', () => {
    const policyLike = fc.record(
      {
        policy_id: fc.oneof(fc.string(), fc.constantFrom('p1', 'a.b', '__proto__')),
        name: fc.jsonValue(),
        enabled: fc.oneof(fc.boolean(), fc.jsonValue()),
        priority: fc.oneof(fc.integer(), fc.jsonValue()),
        scope: fc.oneof(fc.dictionary(fc.constantFrom('org_id', 'user_id', 'tags', 'usr', '__proto__'), fc.jsonValue()), fc.jsonValue()),
        algorithm: fc.oneof(
          fc.record(
            {
              type: fc.constantFrom(...ALGORITHM_TYPES, 'x'),
              limit: fc.oneof(fc.integer(), fc.jsonValue()),
              window: fc.oneof(fc.constantFrom('1s', '10', '1m', '7ms'), fc.jsonValue()),
              sub_window_count: fc.oneof(fc.integer({ min: -2, max: 70 }), fc.jsonValue()),
              burst: fc.jsonValue(),
              refill_rate: fc.oneof(fc.double(), fc.jsonValue()),
              leak_rate: fc.double(),
              max_concurrency: fc.integer(),
              lease_ttl: fc.oneof(fc.integer(), fc.string()),
              quota_period: fc.oneof(fc.constantFrom('1d', '1h'), fc.jsonValue()),
              cost_per_request: fc.integer(),
              sample_rate: fc.double(),
            },
            { requiredKeys: [] },
          ),
          fc.jsonValue(),
        ),
        action: fc.oneof(fc.constantFrom('deny', 'sample', 'delay'), fc.jsonValue()),
        rollout_percent: fc.oneof(fc.integer({ min: -5, max: 105 }), fc.jsonValue()),
        metadata: fc.oneof(fc.dictionary(fc.constantFrom('match_expr', 'min_severity', 'x'), fc.oneof(fc.string(), fc.constantFrom('severity == "info"', 'warn'))), fc.jsonValue()),
        valid_from_unix: fc.integer(),
        valid_to_unix: fc.integer(),
        // quota shape
        id: fc.string(),
        config: fc.oneof(fc.record({ quota: fc.integer(), window_seconds: fc.integer() }), fc.jsonValue()),
        action_deny: fc.jsonValue(),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), policyLike), fc.boolean(), (raw, requireId) => {
        const r = validatePolicy(raw, { requireId });
        if (r.ok) {
          const p = r.policy;
          expect(p.policy_id).to.be.a('string');
          expect(ALGORITHM_TYPES).to.include(p.algorithm.type);
          expect(() => counterSpecOf(p.algorithm)).to.not.throw();
          expect(p.rollout_percent).to.be.within(0, 100);
        } else {
          expect(r.errors.length).to.be.greaterThan(0);
          for (const e of r.errors) {
            expect(e.field).to.be.a('string').and.not.equal('');
            expect(e.message).to.be.a('string').and.not.equal('');
            expect(e.message).to.not.match(/could not be validated/);
          }
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('source_ip_prefix: absent stays absent; given, both lengths are stored; bad values name the field', () => {
    expect(ok(base())).to.not.have.property('source_ip_prefix');
    expect(ok({ ...base(), source_ip_prefix: { v6: 64 } }).source_ip_prefix).to.deep.equal({ v4: 32, v6: 64 });
    expect(ok({ ...base(), source_ip_prefix: { v4: 8, v6: 128 } }).source_ip_prefix).to.deep.equal({ v4: 8, v6: 128 });
    expect(ok({ ...base(), source_ip_prefix: null })).to.not.have.property('source_ip_prefix');
    expect(fields({ ...base(), source_ip_prefix: { v4: 7, v6: 129 } })).to.deep.equal(['source_ip_prefix.v4', 'source_ip_prefix.v6']);
    expect(fields({ ...base(), source_ip_prefix: { v4: 33, v6: 15 } })).to.deep.equal(['source_ip_prefix.v4', 'source_ip_prefix.v6']);
    expect(fields({ ...base(), source_ip_prefix: { v4: 24.5, v6: '56' } })).to.deep.equal(['source_ip_prefix.v4', 'source_ip_prefix.v6']);
    expect(fields({ ...base(), source_ip_prefix: { v5: 1 } })).to.deep.equal(['source_ip_prefix.v5']);
    expect(fields({ ...base(), source_ip_prefix: 56 })).to.deep.equal(['source_ip_prefix']);
    expect(fields({ id: 'q', config: { quota: 1, window_seconds: 60 }, source_ip_prefix: { v6: 8 } })).to.deep.equal(['source_ip_prefix.v6']);
  });
});
