import { expect } from 'chai';
import { RlError, type ErrorKind } from '../../src/errors.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { PolicyService } from '../../src/policy-service/policy-service.js';
import { mergePatch } from '../../src/util/merge-patch.js';
import type { PolicyStore } from '../../src/policy-store/policy-store.js';
import type { Policy } from '../../src/policy/types.js';
import { policyStoreBackends } from '../support/policy-store-backends.js';

const BASE = {
  policy_id: 'p1',
  name: 'first',
  scope: { org_id: 'acme', user_id: '*' },
  algorithm: { type: 'fixed_window', limit: 10, window: '1m' },
};

/** Awaits `promise` and returns the RlError kind it rejected with (fails when it resolved). */
async function rejectsWith(promise: Promise<unknown>): Promise<{ kind: ErrorKind; error: RlError }> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof RlError) return { kind: error.kind, error };
    throw error;
  }
  throw new Error('expected a rejection');
}

function content(p: Policy): Omit<Policy, 'version' | 'created_at' | 'updated_at'> {
  const { version: _v, created_at: _c, updated_at: _u, ...rest } = p;
  return rest;
}

const BACKENDS = policyStoreBackends('rl-policy-service-');

for (const backend of BACKENDS) {
  describe(`PolicyService (${backend.name} store)`, function () {
    this.timeout(20_000);
    let store: PolicyStore;
    let cleanup: () => Promise<void>;
    let service: PolicyService;
    let matcher: LiveMatcher;
    let clock: number;

    beforeEach(async () => {
      ({ store, cleanup } = await backend.open());
      matcher = new LiveMatcher();
      clock = Date.UTC(2030, 0, 1);
      service = new PolicyService({ store, matcher, now: () => (clock += 1000) });
    });
    afterEach(async () => {
      service.close();
      await cleanup();
    });

    it('creates version 1 with every default, refuses duplicates, and lists sorted by policy_id', async () => {
      const created = await service.create({ ...BASE, policy_id: 'zeta' }, 'alice');
      expect(created).to.deep.include({ policy_id: 'zeta', version: 1, enabled: true, priority: 0, action: 'deny', failure_mode: 'fail_open', enforcement_mode: 'enforce', rollout_percent: 100 });
      expect(created.created_at).to.equal(created.updated_at);
      await service.create({ ...BASE, policy_id: 'alpha' }, 'alice');
      expect(service.list().map((p) => p.policy_id)).to.deep.equal(['alpha', 'zeta']);
      expect((await rejectsWith(service.create({ ...BASE, policy_id: 'zeta' }, 'bob'))).kind).to.equal('conflict');
      expect(service.get('zeta')).to.deep.equal(created);
    });

    it('rejects bad bodies: 400 when not an object, 422 naming the field when invalid', async () => {
      expect((await rejectsWith(service.create(undefined, 'a'))).kind).to.equal('invalid_argument');
      expect((await rejectsWith(service.create([1, 2], 'a'))).kind).to.equal('invalid_argument');
      const invalid = await rejectsWith(service.create({ ...BASE, algorithm: { type: 'fixed_window', limit: -1, window: '1m' } }, 'a'));
      expect(invalid.kind).to.equal('failed_validation');
      expect(invalid.error.message).to.include('algorithm.limit');
      expect((invalid.error.details!.errors as { field: string }[]).map((e) => e.field)).to.deep.equal(['algorithm.limit']);
      expect((await rejectsWith(service.create({ ...BASE, policy_id: undefined }, 'a'))).error.field).to.equal('policy_id');
      expect(service.list()).to.deep.equal([]);
    });

    it('records versions and audit through create → update → patch → rollout → rollback → delete', async () => {
      const v1 = await service.create(BASE, 'alice');
      const v2 = await service.replace('p1', { ...BASE, name: 'second', algorithm: { type: 'fixed_window', limit: 20, window: '1m' } }, 'bob');
      const v3 = await service.patch('p1', { priority: 7, scope: { user_id: null, region: 'eu' } }, 'carol');
      const v4 = await service.rollout('p1', { rollout_percent: 25 }, 'dave');
      const v5 = await service.rollback('p1', { version: 1 }, 'erin');
      expect([v1, v2, v3, v4, v5].map((p) => p.version)).to.deep.equal([1, 2, 3, 4, 5]);
      expect(v2.algorithm.limit).to.equal(20);
      expect(v3.scope).to.deep.equal({ org_id: 'acme', region: 'eu' });
      expect(v3.priority).to.equal(7);
      expect(v3.name).to.equal('second');
      expect(v4.rollout_percent).to.equal(25);
      expect(content(v5)).to.deep.equal(content(v1));
      expect(v5.created_at).to.equal(v1.created_at);
      expect(v5.updated_at > v4.updated_at).to.equal(true);
      expect(matcher.current().get('p1')?.policy.version).to.equal(5);

      expect(await service.delete('p1', 'frank')).to.deep.equal({ deleted: true, policy_id: 'p1' });
      expect((await rejectsWith(Promise.resolve().then(() => service.get('p1')))).kind).to.equal('not_found');
      expect(matcher.current().get('p1')).to.equal(undefined);

      const versions = await service.versions('p1');
      expect(versions.map((v) => v.version)).to.deep.equal([1, 2, 3, 4, 5]);
      expect(versions.map((v) => v.snapshot)).to.deep.equal([v1, v2, v3, v4, v5]);
      for (const v of versions) {
        expect(v.created_at).to.equal(v.snapshot.updated_at);
        expect(v.created_at_unix).to.equal(Math.floor(Date.parse(v.created_at) / 1000));
      }

      const audit = await service.audit('p1');
      expect(audit.map((e) => [e.action_type, e.changed_by, e.version])).to.deep.equal([
        ['create', 'alice', 1],
        ['update', 'bob', 2],
        ['patch', 'carol', 3],
        ['rollout', 'dave', 4],
        ['rollback', 'erin', 5],
        ['delete', 'frank', 5],
      ]);
      expect(audit.map((e) => e.new_value)).to.deep.equal([v1, v2, v3, v4, v5, null]);
      expect(audit.map((e) => e.old_value)).to.deep.equal([null, v1, v2, v3, v4, v5]);
      // A rollback names the version it restored; no other change carries the field.
      expect(audit.map((e) => e.restored_version)).to.deep.equal([undefined, undefined, undefined, undefined, 1, undefined]);
      expect(new Set(audit.map((e) => e.audit_id)).size).to.equal(6);
      for (const e of audit) {
        expect(e.policy_id).to.equal('p1');
        expect(e.changed_at_unix).to.equal(Math.floor(Date.parse(e.changed_at) / 1000));
      }
      expect(Object.keys(audit[0]).sort()).to.deep.equal(
        ['action_type', 'audit_id', 'changed_at', 'changed_at_unix', 'changed_by', 'new_value', 'old_value', 'policy_id', 'version'],
      );

      // A re-create continues the numbering, so versions of one id never repeat.
      const again = await service.create(BASE, 'alice');
      expect(again.version).to.equal(6);
      expect((await service.versions('p1')).map((v) => v.version)).to.deep.equal([1, 2, 3, 4, 5, 6]);
    });

    it('rollback: unknown version 404, bad body 400, unknown or deleted policy 404', async () => {
      await service.create(BASE, 'a');
      expect((await rejectsWith(service.rollback('p1', { version: 2 }, 'a'))).kind).to.equal('not_found');
      expect((await rejectsWith(service.rollback('p1', { version: 99 }, 'a'))).error.message).to.include('version 99');
      for (const body of [undefined, {}, { version: 0 }, { version: 1.5 }, { version: '1' }, []]) {
        expect((await rejectsWith(service.rollback('p1', body, 'a'))).kind, JSON.stringify(body)).to.equal('invalid_argument');
      }
      expect((await rejectsWith(service.rollback('nope', { version: 1 }, 'a'))).kind).to.equal('not_found');
      await service.delete('p1', 'a');
      expect((await rejectsWith(service.rollback('p1', { version: 1 }, 'a'))).kind).to.equal('not_found');
      expect((await service.audit('p1')).length).to.equal(2);
    });

    it('rollout: 0–100 integers only', async () => {
      await service.create(BASE, 'a');
      for (const body of [undefined, {}, { rollout_percent: -1 }, { rollout_percent: 101 }, { rollout_percent: 50.5 }, { rollout_percent: '50' }, 'x']) {
        expect((await rejectsWith(service.rollout('p1', body, 'a'))).kind, JSON.stringify(body)).to.equal('invalid_argument');
      }
      expect((await service.rollout('p1', { rollout_percent: 0 }, 'a')).rollout_percent).to.equal(0);
      expect((await rejectsWith(service.rollout('nope', { rollout_percent: 5 }, 'a'))).kind).to.equal('not_found');
    });

    it('of concurrent PUTs stating the same version exactly one wins; the others get 409', async () => {
      await service.create(BASE, 'a');
      const results = await Promise.allSettled(
        Array.from({ length: 10 }, (_, i) => service.replace('p1', { ...BASE, version: 1, priority: i }, `writer-${i}`)),
      );
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(won).to.have.length(1);
      expect(lost).to.have.length(9);
      for (const r of lost) expect((r.reason as RlError).kind).to.equal('conflict');
      expect(service.get('p1').version).to.equal(2);
      expect((await service.audit('p1')).length).to.equal(2);
    });

    it('of concurrent creates of one policy_id exactly one wins; the others get 409', async () => {
      const results = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => service.create({ ...BASE, priority: i }, 'a')));
      expect(results.filter((r) => r.status === 'fulfilled')).to.have.length(1);
      for (const r of results) if (r.status === 'rejected') expect((r.reason as RlError).kind).to.equal('conflict');
      expect((await service.audit('p1')).length).to.equal(1);
    });

    it('concurrent changes that state no version are all applied, one after another', async () => {
      await service.create(BASE, 'a');
      await Promise.all(Array.from({ length: 4 }, (_, i) => service.patch('p1', { metadata: { [`k${i}`]: 'v' } }, 'a')));
      const p = service.get('p1');
      expect(p.version).to.equal(5);
      expect(Object.keys(p.metadata).sort()).to.deep.equal(['k0', 'k1', 'k2', 'k3']);
    });

    it('checks a stale version in the body or If-Match (409) on every kind of change', async () => {
      await service.create(BASE, 'a');
      await service.patch('p1', { priority: 1 }, 'a'); // now version 2
      const stale = { ifMatch: '"1"' };
      expect((await rejectsWith(service.replace('p1', { ...BASE, version: 1 }, 'a'))).kind).to.equal('conflict');
      expect((await rejectsWith(service.patch('p1', { version: 1, priority: 3 }, 'a'))).kind).to.equal('conflict');
      expect((await rejectsWith(service.replace('p1', BASE, 'a', stale))).kind).to.equal('conflict');
      expect((await rejectsWith(service.patch('p1', { priority: 3 }, 'a', stale))).kind).to.equal('conflict');
      expect((await rejectsWith(service.rollout('p1', { rollout_percent: 3 }, 'a', stale))).kind).to.equal('conflict');
      expect((await rejectsWith(service.rollback('p1', { version: 1 }, 'a', stale))).kind).to.equal('conflict');
      expect((await rejectsWith(service.delete('p1', 'a', stale))).kind).to.equal('conflict');
      expect((await rejectsWith(service.delete('p1', 'a', { ifMatch: 'garbage' }))).kind).to.equal('conflict');
      expect((await rejectsWith(service.replace('p1', { ...BASE, version: 'two' }, 'a'))).kind).to.equal('invalid_argument');
      expect(service.get('p1').version).to.equal(2);
      // Current versions pass, in every accepted spelling.
      expect((await service.patch('p1', { version: 2, priority: 4 }, 'a')).version).to.equal(3);
      expect((await service.patch('p1', { priority: 5 }, 'a', { ifMatch: 'W/"3"' })).version).to.equal(4);
      expect((await service.patch('p1', { priority: 6 }, 'a', { ifMatch: '"1", "4"' })).version).to.equal(5);
      expect((await service.patch('p1', { priority: 7 }, 'a', { ifMatch: '*' })).version).to.equal(6);
      expect((await service.replace('p1', { ...BASE, version: 6 }, 'a', { ifMatch: '6' })).version).to.equal(7);
    });

    it('PUT: body policy_id must equal the path id (422); a missing one is taken from the path', async () => {
      await service.create(BASE, 'a');
      const mismatch = await rejectsWith(service.replace('p1', { ...BASE, policy_id: 'other' }, 'a'));
      expect(mismatch.kind).to.equal('failed_validation');
      expect(mismatch.error.field).to.equal('policy_id');
      const { policy_id: _drop, name: _name, ...noId } = BASE;
      const replaced = await service.replace('p1', noId, 'a');
      expect(replaced).to.deep.include({ policy_id: 'p1', name: 'p1', version: 2 });
      expect((await rejectsWith(service.replace('nope', { ...BASE, policy_id: 'nope' }, 'a'))).kind).to.equal('not_found');
      expect((await rejectsWith(service.replace('p1', { ...BASE, algorithm: 'nope' }, 'a'))).kind).to.equal('failed_validation');
    });

    it('PATCH: RFC 7396 merge over the public shape, validated; invalid results store nothing', async () => {
      await service.create({ ...BASE, metadata: { a: '1', b: '2' } }, 'a');
      const patched = await service.patch('p1', { metadata: { a: null, c: '3' }, algorithm: { limit: 5 }, version: 1 }, 'a');
      expect(patched.metadata).to.deep.equal({ b: '2', c: '3' });
      expect(patched.algorithm).to.deep.equal({ type: 'fixed_window', limit: 5, window: '1m' });
      // Server-set fields in the patch are not content.
      const ignored = await service.patch('p1', { created_at: 'yesterday', updated_at: 'x' }, 'a');
      expect(ignored.created_at).to.equal(patched.created_at);
      const bad = await rejectsWith(service.patch('p1', { algorithm: { window: '10' } }, 'a'));
      expect(bad.kind).to.equal('failed_validation');
      expect(bad.error.message).to.include('algorithm.window');
      expect((await rejectsWith(service.patch('p1', { policy_id: 'renamed' }, 'a'))).kind).to.equal('failed_validation');
      expect((await rejectsWith(service.patch('p1', { policy_id: null }, 'a'))).kind).to.equal('failed_validation');
      expect((await rejectsWith(service.patch('p1', [], 'a'))).kind).to.equal('invalid_argument');
      expect((await rejectsWith(service.patch('nope', {}, 'a'))).kind).to.equal('not_found');
      expect(service.get('p1').version).to.equal(3);
    });

    it('PATCH: an oversized collection is refused naming it, before the merge reads any of it', async () => {
      await service.create(BASE, 'a');
      let valuesRead = 0;
      const tags = new Proxy(Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`k${i}`, 'v'])), {
        get(target, key, receiver) {
          if (typeof key === 'string') valuesRead++;
          return Reflect.get(target, key, receiver);
        },
      });
      const refused = await rejectsWith(service.patch('p1', { scope: { tags } }, 'a'));
      expect(refused.kind).to.equal('failed_validation');
      expect(refused.error.message).to.include('scope.tags');
      expect(valuesRead).to.equal(0);
      expect(service.get('p1').version).to.equal(1);
    });

    it('accepts the quota-shaped body on create, PUT and PATCH (a quota changed live)', async () => {
      const quota = { id: 'q1', resource: 'tokens', algorithm: 'quota', config: { quota: 1000, window_seconds: 3600 }, action_deny: true, metadata: { team: 'ml' } };
      const created = await service.create(quota, 'a');
      expect(created).to.deep.include({ policy_id: 'q1', action: 'deny', enforcement_mode: 'enforce' });
      expect(created.scope).to.deep.equal({ resource: 'tokens' });
      expect(created.algorithm).to.deep.equal({ type: 'quota', limit: 1000, quota_period: '3600s' });
      const patched = await service.patch('q1', { config: { quota: 500 } }, 'a');
      expect(patched.algorithm).to.deep.equal({ type: 'quota', limit: 500, quota_period: '3600s' });
      const shadow = await service.patch('q1', { action_deny: false }, 'a');
      expect(shadow.enforcement_mode).to.equal('shadow');
      const replaced = await service.replace('q1', { ...quota, config: { quota: 7, window_seconds: 60 } }, 'a');
      expect(replaced.algorithm).to.deep.equal({ type: 'quota', limit: 7, quota_period: '60s' });
      expect(replaced.version).to.equal(4);
      expect((await rejectsWith(service.patch('q1', { config: { quota: 'lots' } }, 'a'))).kind).to.equal('failed_validation');
    });

    it('validate: 200-style report for anything, never a throw', () => {
      expect(service.validate({ algorithm: { type: 'fixed_window', limit: 1, window: '1s' } })).to.deep.equal({ valid: true, errors: [] });
      const report = service.validate({ algorithm: { type: 'fixed_window', limit: 1, window: 5 } });
      expect(report.valid).to.equal(false);
      expect(report.errors[0].field).to.equal('algorithm.window');
      for (const body of [undefined, null, 3, 'x', [], {}]) expect(service.validate(body).valid).to.equal(false);
      let deep: unknown = {};
      for (let i = 0; i < 10_000; i++) deep = { a: deep };
      expect(service.validate(deep).valid).to.equal(false);
    });

    it('keys such as __proto__ in bodies and patches pollute nothing', async () => {
      const refused = JSON.parse('{"policy_id":"p1","algorithm":{"type":"fixed_window","limit":1,"window":"1s"},"__proto__":{"polluted":true},"metadata":{"__proto__":"x"}}');
      expect((await rejectsWith(service.create(refused, 'a'))).kind).to.equal('failed_validation');
      const created = await service.create(JSON.parse('{"policy_id":"p1","algorithm":{"type":"fixed_window","limit":1,"window":"1s"},"metadata":{"__proto__":"x"}}'), 'a');
      await service.patch('p1', JSON.parse('{"__proto__":{"polluted":true},"scope":{"__proto__":{"org_id":"x"}}}'), 'a').catch(() => undefined);
      expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
      expect(Object.getPrototypeOf(service.get('p1'))).to.equal(Object.prototype);
      expect(created.version).to.equal(1);
    });

    it('versions and audit of a policy that never existed are 404', async () => {
      expect((await rejectsWith(service.versions('ghost'))).kind).to.equal('not_found');
      expect((await rejectsWith(service.audit('ghost'))).kind).to.equal('not_found');
      expect((await rejectsWith(service.delete('ghost', 'a'))).kind).to.equal('not_found');
    });
  });
}

describe('mergePatch (RFC 7396 examples)', () => {
  const cases: [unknown, unknown, unknown][] = [
    [{ a: 'b' }, { a: 'c' }, { a: 'c' }],
    [{ a: 'b' }, { b: 'c' }, { a: 'b', b: 'c' }],
    [{ a: 'b' }, { a: null }, {}],
    [{ a: 'b', b: 'c' }, { a: null }, { b: 'c' }],
    [{ a: ['b'] }, { a: 'c' }, { a: 'c' }],
    [{ a: 'c' }, { a: ['b'] }, { a: ['b'] }],
    [{ a: { b: 'c' } }, { a: { b: 'd', c: null } }, { a: { b: 'd' } }],
    [{ a: [{ b: 'c' }] }, { a: [1] }, { a: [1] }],
    [['a', 'b'], ['c', 'd'], ['c', 'd']],
    [{ a: 'b' }, ['c'], ['c']],
    [{ a: 'foo' }, null, null],
    [{ a: 'foo' }, 'bar', 'bar'],
    [{ e: null }, { a: 1 }, { e: null, a: 1 }],
    [[1, 2], { a: 'b', c: null }, { a: 'b' }],
    [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
  ];
  for (const [target, patch, expected] of cases) {
    it(`${JSON.stringify(target)} + ${JSON.stringify(patch)}`, () => {
      expect(JSON.parse(JSON.stringify(mergePatch(target, patch)))).to.deep.equal(expected);
    });
  }
});
