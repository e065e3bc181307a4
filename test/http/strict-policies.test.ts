import { expect } from 'chai';
import fc from 'fast-check';
import {
  ALGORITHM_KEYS,
  ALGORITHM_TYPES,
  LEASE_KEYS,
  POLICY_KEYS,
  QUOTA_CONFIG_KEYS,
  QUOTA_POLICY_KEYS,
  SCOPE_KEYS,
  SOURCE_IP_PREFIX_KEYS,
} from '../../src/schema/policy.js';
import { editDistance } from '../../src/util/nearest-key.js';
import { parseBody, postJson } from '../support/http.js';
import { servePolicyApi, type PolicyApi } from '../support/policy-api.js';

/**
 * Policies are strict (README "Managing policies"), over HTTP through the app: every unknown key of a
 * policy object is a 422 naming its path, with the nearest known key when one is close, on POST, PUT,
 * PATCH (the merged result) and /policies/validate, in the Policy shape and the quota shape.
 */

type Body = Record<string, unknown>;
type FieldErrors = { field: string; message: string }[];

const WINDOW = { type: 'fixed_window', limit: 5, window: '1m' };
const QUOTA_BODY = { id: 'q', algorithm: 'quota', config: { quota: 100, window_seconds: 3600 } };

describe('strict policies over HTTP', function () {
  this.timeout(60_000);
  let api: PolicyApi;
  const url = (path: string) => `${api.server.url}/rl/v1${path}`;
  const send = async (method: string, path: string, body: unknown, contentType = 'application/json') => {
    const response = await fetch(url(path), { method, headers: { 'content-type': contentType }, body: typeof body === 'string' ? body : JSON.stringify(body) });
    return { status: response.status, body: await parseBody(response) };
  };
  const errorsOf = (answer: { body: { errors?: FieldErrors } }) => answer.body.errors ?? [];

  before(async () => {
    api = await servePolicyApi({ maxBodyBytes: 1 << 20 });
  });
  after(() => api.close());

  it('POST: 422 naming each unknown key by path, with the nearest known key; nothing stored', async () => {
    const answer = await postJson(url('/policies'), { policy_id: 'typos', acton: 'delay', descripton: 'd', algorithm: { type: 'token_bucket', limit: 5, window: '1s', burts: 2 } });
    expect(answer.status).to.equal(422);
    expect(answer.body.errors).to.deep.equal([
      { field: 'acton', message: 'unknown field; did you mean `action`?' },
      { field: 'descripton', message: 'unknown field; did you mean `description`?' },
      { field: 'algorithm.burts', message: 'unknown field; did you mean `burst`?' },
    ]);
    expect(answer.body.error).to.contain('acton: unknown field; did you mean `action`?');
    expect((await fetch(url('/policies/typos'))).status).to.equal(404);
  });

  it('every object: scope, lease and source_ip_prefix too; metadata and tags stay free maps', async () => {
    const answer = await postJson(url('/policies'), {
      policy_id: 'nested',
      algorithm: WINDOW,
      scope: { usr_id: 'u', tags: { anything: 'goes' } },
      lease: { max_unit: 5 },
      source_ip_prefix: { v5: 24 },
      metadata: { free: 'form', anything: 1 },
    });
    expect(answer.status).to.equal(422);
    expect(answer.body.errors).to.deep.equal([
      { field: 'scope.usr_id', message: 'unknown field; did you mean `user_id`?' },
      { field: 'source_ip_prefix.v5', message: 'unknown field (source_ip_prefix fields: v4, v6)' },
      { field: 'lease.max_unit', message: 'unknown field; did you mean `max_units`?' },
    ]);
    const fine = await postJson(url('/policies'), { policy_id: 'free-maps', algorithm: WINDOW, scope: { tags: { anything: 'goes' } }, metadata: { free: 'form' } });
    expect(fine.status).to.equal(201);
  });

  it('a misspelt required field: the unknown key and the missing one, at once', async () => {
    const answer = await postJson(url('/policies'), { policy_id: 'missing', algoritm: WINDOW });
    expect(answer.status).to.equal(422);
    expect(answer.body.errors.map((e: { field: string }) => e.field)).to.deep.equal(['algoritm', 'algorithm']);
    expect(answer.body.errors[0].message).to.equal('unknown field; did you mean `algorithm`?');
  });

  it('PUT refuses unknown keys; a policy read back is written back as it is', async () => {
    expect((await postJson(url('/policies'), { policy_id: 'put-me', algorithm: WINDOW })).status).to.equal(201);
    const read = (await (await fetch(url('/policies/put-me'))).json()) as Body;
    const put = await send('PUT', '/policies/put-me', { ...read, limit: 10 });
    expect(put.status).to.equal(422);
    expect(errorsOf(put)).to.deep.equal([{ field: 'limit', message: 'unknown field here; did you mean `algorithm.limit`?' }]);
    const again = await send('PUT', '/policies/put-me', read);
    expect(again.status).to.equal(200);
    expect(again.body.version).to.equal(2);
  });

  it('PATCH validates the merged result: an unknown key, a nested one, and a field left behind by a type change', async () => {
    expect((await postJson(url('/policies'), { policy_id: 'patch-me', algorithm: { type: 'token_bucket', limit: 5, window: '1s', burst: 2 } })).status).to.equal(201);
    const patch = (body: unknown) => send('PATCH', '/policies/patch-me', body, 'application/merge-patch+json');
    expect(errorsOf(await patch({ enabeld: false }))).to.deep.equal([{ field: 'enabeld', message: 'unknown field; did you mean `enabled`?' }]);
    expect(errorsOf(await patch({ algorithm: { limt: 9 } }))).to.deep.equal([{ field: 'algorithm.limt', message: 'unknown field; did you mean `limit`?' }]);
    const changedType = await patch({ algorithm: { type: 'fixed_window' } });
    expect(changedType.status).to.equal(422);
    expect(errorsOf(changedType).map((e) => e.field)).to.deep.equal(['algorithm.burst']);
    expect(errorsOf(changedType)[0].message).to.match(/^does not apply to fixed_window/);
    const fixed = await patch({ algorithm: { type: 'fixed_window', burst: null } });
    expect(fixed.status).to.equal(200);
    expect(fixed.body.algorithm).to.deep.equal({ type: 'fixed_window', limit: 5, window: '1s' });
  });

  it('POST /policies/validate answers the same errors (200, valid false)', async () => {
    const answer = await postJson(url('/policies/validate'), { acton: 'delay', algorithm: { ...WINDOW, burts: 1 } });
    expect(answer.status).to.equal(200);
    expect(answer.body.valid).to.equal(false);
    expect(answer.body.errors.map((e: { field: string }) => e.field)).to.deep.equal(['acton', 'algorithm.burts']);
  });

  it('the quota-shaped body has its own known keys, strict too, also in a PATCH', async () => {
    const answer = await postJson(url('/policies'), { ...QUOTA_BODY, resouce: 'llm', config: { ...QUOTA_BODY.config, quoat: 5 } });
    expect(answer.status).to.equal(422);
    expect(answer.body.errors).to.deep.equal([
      { field: 'resouce', message: 'unknown field; did you mean `resource`?' },
      { field: 'config.quoat', message: 'unknown field; did you mean `quota`?' },
    ]);
    expect((await postJson(url('/policies'), { ...QUOTA_BODY, resource: 'llm', action_deny: true })).status).to.equal(201);
    const patched = await send('PATCH', '/policies/q', { config: { windows_seconds: 60 } }, 'application/merge-patch+json');
    expect(patched.status).to.equal(422);
    expect(errorsOf(patched)).to.deep.equal([{ field: 'config.windows_seconds', message: 'unknown field; did you mean `window_seconds`?' }]);
    expect((await send('PATCH', '/policies/q', { config: { quota: 500 } }, 'application/merge-patch+json')).body.algorithm.limit).to.equal(500);
  });

  it('malformed JSON in a body: 400 with line and column', async () => {
    const answer = await send('POST', '/policies', '{\n  "policy_id": "p",\n  "algorithm": }');
    expect(answer.status).to.equal(400);
    expect(answer.body.error).to.contain('malformed JSON: at line 3, column 16: unexpected "}"');
  });

  describe('property: every single-character typo of every known key, at every level', () => {
    /** A level of a policy: its known keys, a valid body, and the object of the level (`field`; the top when absent). */
    interface Level {
      name: string;
      known: readonly string[];
      body: Body;
      field?: string;
    }
    const objectOf = (level: Level, body: Body): Body => (level.field === undefined ? body : (body[level.field] as Body));
    const pathOf = (level: Level, key: string) => (level.field === undefined ? key : `${level.field}.${key}`);
    /** The level's body with `key` renamed to `written` (its value kept; any value when the body has none). */
    const misspelt = (level: Level, key: string, written: string): Body => {
      const object = { ...objectOf(level, level.body) };
      const value = object[key] ?? 'x';
      delete object[key];
      object[written] = value;
      return level.field === undefined ? object : { ...level.body, [level.field]: object };
    };
    const policy = { policy_id: 'typo', algorithm: WINDOW, scope: { service: 's' }, lease: { max_units: 10 }, source_ip_prefix: { v4: 24 } };
    const LEVELS: Level[] = [
      { name: 'policy', known: POLICY_KEYS, body: policy },
      ...ALGORITHM_TYPES.map((type): Level => ({ name: `algorithm ${type}`, known: ALGORITHM_KEYS[type], body: { policy_id: 'typo', algorithm: validAlgorithm(type) }, field: 'algorithm' })),
      { name: 'scope', known: SCOPE_KEYS, body: policy, field: 'scope' },
      { name: 'lease', known: LEASE_KEYS, body: policy, field: 'lease' },
      { name: 'source_ip_prefix', known: SOURCE_IP_PREFIX_KEYS, body: policy, field: 'source_ip_prefix' },
      { name: 'quota-shaped policy', known: QUOTA_POLICY_KEYS, body: QUOTA_BODY },
      { name: 'quota config', known: QUOTA_CONFIG_KEYS, body: QUOTA_BODY, field: 'config' },
    ];

    const CHARS = 'abcdefghijklmnopqrstuvwxyz_0123456789AEIOUX'.split('');
    type Typo = { kind: 'deletion' | 'insertion' | 'substitution' | 'transposition'; at: number; char: string };
    const typoOf = (key: string, t: Typo): string => {
      const i = t.at % (key.length + (t.kind === 'insertion' ? 1 : 0));
      if (t.kind === 'deletion') return key.slice(0, i) + key.slice(i + 1);
      if (t.kind === 'insertion') return key.slice(0, i) + t.char + key.slice(i);
      if (t.kind === 'substitution') return key.slice(0, i) + t.char + key.slice(i + 1);
      const j = Math.min(i, key.length - 2);
      return key.slice(0, j) + key[j + 1] + key[j] + key.slice(j + 2);
    };
    const typoArb = fc.record({ kind: fc.constantFrom('deletion', 'insertion', 'substitution', 'transposition' as const), at: fc.nat(64), char: fc.constantFrom(...CHARS) }) as fc.Arbitrary<Typo>;

    /** Whether `key` is strictly nearest to `typo` of all `known` keys (case-insensitively, as people read them). */
    const uniquelyNearest = (typo: string, key: string, known: readonly string[]): boolean => {
      const d = editDistance(typo.toLowerCase(), key.toLowerCase());
      return known.every((k) => k === key || editDistance(typo.toLowerCase(), k.toLowerCase()) > d);
    };

    for (const level of LEVELS) {
      it(`${level.name}: refused with 422 naming the path, suggesting the key whenever it is the unique nearest`, async () => {
        let suggested = 0;
        let runs = 0;
        await fc.assert(
          fc.asyncProperty(fc.constantFrom(...level.known), typoArb, async (key, typo) => {
            const written = typoOf(key, typo);
            // A typo that spells a known key is that key, not a typo.
            if (level.known.includes(written)) return;
            runs++;
            const answer = await postJson(url('/policies'), misspelt(level, key, written));
            const detail = `${level.name}: ${key} -> ${JSON.stringify(written)}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 400)}`;
            expect(answer.status, detail).to.equal(422);
            const error = (answer.body.errors as FieldErrors).find((e) => e.field === pathOf(level, written));
            expect(error, detail).to.not.equal(undefined);
            if (uniquelyNearest(written, key, level.known)) {
              expect(error!.message, detail).to.equal(`unknown field; did you mean \`${key}\`?`);
              suggested++;
            }
          }),
          { numRuns: Math.max(40, level.known.length * 8) },
        );
        // Most single-character typos have the right key as their unique nearest.
        expect(suggested).to.be.greaterThan(runs / 2);
      });
    }
  });
});

function validAlgorithm(type: (typeof ALGORITHM_TYPES)[number]): Body {
  switch (type) {
    case 'sliding_window_counter':
      return { type, limit: 5, window: '1m', sub_window_count: 6 };
    case 'token_bucket':
      return { type, limit: 5, window: '1m', burst: 2 };
    case 'leaky_bucket':
      return { type, limit: 5, window: '1m', leak_rate: 1 };
    case 'concurrency':
      return { type, max_concurrency: 3, lease_ttl: '30s' };
    case 'quota':
      return { type, limit: 5, quota_period: '1h' };
    default:
      return { type, limit: 5, window: '1m' };
  }
}
