import { expect } from 'chai';
import fc from 'fast-check';
import type { RequestContext } from '../../src/model/request-context.js';
import { canonicalMethod } from '../../src/model/http-method.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { slotIdOf } from '../../src/decision/slot-id.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { Matcher } from '../../src/matching/matcher.js';
import type { Policy } from '../../src/policy/types.js';

/** Strict policies, visible leniency (docs/matching.md): HTTP method names compare case-insensitively, other values exactly. */

const NOW = 1_900_000_000_000;
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH'];

function policy(policy_id: string, scope: Policy['scope']): Policy {
  return {
    policy_id, name: policy_id, enabled: true, priority: 0, scope, action: 'deny', enforcement_mode: 'enforce', rollout_percent: 100,
    failure_mode: 'fail_open', algorithm: { type: 'fixed_window', limit: 10, window: '1m' }, version: 1,
    created_at: '2030-01-01T00:00:00.000Z', updated_at: '2030-01-01T00:00:00.000Z',
  } as Policy;
}
const req = (fields: Record<string, string>): RequestContext => ({ ...fields, quantity: 1, tags: {} });
const winner = (m: Matcher, ctx: RequestContext) => m.match(ctx, 'rate', NOW).enforce?.compiled.policy.policy_id;

/** `name` with each letter's case chosen by the bits of `mask`. */
const spelled = (name: string, mask: number) => [...name].map((ch, i) => ((mask >> i) & 1 ? ch.toLowerCase() : ch)).join('');

describe('matching: HTTP method names', () => {
  it('canonicalMethod upper-cases HTTP method names only', () => {
    expect(canonicalMethod('post')).to.equal('POST');
    expect(canonicalMethod('Delete')).to.equal('DELETE');
    expect(canonicalMethod('POST')).to.equal('POST');
    for (const other of ['purge', 'Purge', 'grpc', 'posts', 'postx', 'options2', 'ＰＯＳＴ', '', '*']) expect(canonicalMethod(other)).to.equal(other);
  });

  it('a request method in any case matches a scope method in any case (every method name, every spelling)', () => {
    fc.assert(
      fc.property(fc.constantFrom(...METHODS), fc.nat(255), fc.nat(255), (name, scopeMask, requestMask) => {
        const m = Matcher.build([policy('by-method', { method: spelled(name, scopeMask), endpoint: '/orders' })]);
        return winner(m, req({ method: spelled(name, requestMask), endpoint: '/orders' })) === 'by-method';
      }),
    );
  });

  it('other values, and other fields, stay exact', () => {
    const m = Matcher.build([policy('purge', { method: 'PURGE' }), policy('orders', { endpoint: '/Orders' }), policy('post-elsewhere', { service: 'POST' })]);
    expect(winner(m, req({ method: 'PURGE' }))).to.equal('purge');
    expect(winner(m, req({ method: 'purge' }))).to.equal(undefined);
    expect(winner(m, req({ endpoint: '/orders' }))).to.equal(undefined);
    expect(winner(m, req({ service: 'post' }))).to.equal(undefined);
  });

  it('`method: "*"` counts `post` and `POST` as one identity (one counter)', () => {
    const m = Matcher.build([policy('per-method', { method: '*' })]);
    const lower = m.match(req({ method: 'post' }), 'rate', NOW).enforce!;
    const upper = m.match(req({ method: 'POST' }), 'rate', NOW).enforce!;
    expect(lower.identity).to.deep.equal(['method', 'POST']);
    expect(upper.identity).to.deep.equal(lower.identity);
    expect(m.match(req({ method: 'purge' }), 'rate', NOW).enforce!.identity).to.deep.equal(['method', 'purge']);
  });

  it('holds across incremental changes: a lower-case scope is added, matched and removed', () => {
    const m = Matcher.build([policy('other', { service: 'x' })]);
    m.apply('lower', policy('lower', { method: 'patch' }));
    expect(winner(m, req({ method: 'PATCH' }))).to.equal('lower');
    expect(winner(m, req({ method: 'Patch' }))).to.equal('lower');
    m.apply('lower', policy('lower', { method: 'get' }));
    expect(winner(m, req({ method: 'PATCH' }))).to.equal(undefined);
    expect(winner(m, req({ method: 'GET' }))).to.equal('lower');
    m.apply('lower', undefined);
    expect(winner(m, req({ method: 'get' }))).to.equal(undefined);
    expect(winner(m, req({ service: 'x' }))).to.equal('other');
  });

  it('a match_expr comparing `method` with a method name in any case matches it in any case (the request is upper-cased before match_expr reads it)', () => {
    const withExpr = (policy_id: string, expr: string) => ({ ...policy(policy_id, { endpoint: '/x' }), metadata: { match_expr: expr } }) as Policy;
    fc.assert(
      fc.property(fc.constantFrom(...METHODS), fc.nat(255), fc.nat(255), (name, exprMask, requestMask) => {
        const spelt = JSON.stringify(spelled(name, exprMask));
        const m = Matcher.build([withExpr('eq', `method == ${spelt}`)]);
        const notEq = Matcher.build([withExpr('ne', `${spelt} != method`)]);
        const within = Matcher.build([withExpr('in', `method in ["purge", ${spelt}]`)]);
        const request = () => req({ endpoint: '/x', method: spelled(name, requestMask) });
        return winner(m, request()) === 'eq' && winner(notEq, request()) === undefined && winner(within, request()) === 'in';
      }),
    );
    // Other values stay exact, in match_expr as in scopes.
    const purge = Matcher.build([withExpr('purge', 'method == "purge"')]);
    expect(winner(purge, req({ endpoint: '/x', method: 'purge' }))).to.equal('purge');
    expect(winner(purge, req({ endpoint: '/x', method: 'PURGE' }))).to.equal(undefined);
  });

  it('a lease named by its fields is one lease whatever the method name\'s case: a release spelt `POST` frees an acquire spelt `post`', async () => {
    expect(slotIdOf(req({ job_type: 'export', method: 'post' }))).to.equal(slotIdOf(req({ job_type: 'export', method: 'POST' })));
    expect(slotIdOf(req({ job_type: 'export', method: 'purge' }))).to.not.equal(slotIdOf(req({ job_type: 'export', method: 'PURGE' })));
    const jobs = { ...policy('jobs', { job_type: 'export' }), algorithm: { type: 'concurrency', max_concurrency: 1 } } as Policy;
    const service = new DecisionService({ policies: new LiveMatcher([jobs]), counters: new MemoryCounterStore(), keyPrefix: '' });
    expect(await service.acquire(req({ job_type: 'export', method: 'post' }))).to.deep.include({ allowed: true, reason: 'lease_acquired' });
    expect(await service.release(req({ job_type: 'export', method: 'POST' }))).to.deep.include({ reason: 'lease_released', remaining: 1 });
    expect(await service.acquire(req({ job_type: 'export', method: 'Post' }))).to.deep.include({ allowed: true, reason: 'lease_acquired' });
  });
});
