import { expect } from 'chai';
import { RlError } from '../../src/errors.js';
import { parseOperationContext, parseRequestContext } from '../../src/model/request-context.js';
import { oversizedCollections, validatePolicy } from '../../src/policy/validate.js';
import {
  MAX_FIELD_LENGTH,
  MAX_METADATA_ENTRIES,
  MAX_METADATA_KEY_LENGTH,
  MAX_METADATA_VALUE_LENGTH,
  MAX_TAGS,
  MAX_TAG_KEY_LENGTH,
  MAX_TAG_VALUE_LENGTH,
  SCOPE_KEYS,
  keyCountUpTo,
} from '../../src/schema/index.js';

const tagsOf = (n: number, value = 'v') => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, value]));

function refusal(body: unknown): RlError {
  try {
    parseOperationContext('check', body);
  } catch (error) {
    expect(error).to.be.instanceOf(RlError);
    expect((error as RlError).kind).to.equal('invalid_argument');
    return error as RlError;
  }
  throw new Error(`expected a refusal of ${JSON.stringify(body).slice(0, 80)}`);
}

function policyErrors(body: unknown): { field: string; message: string }[] {
  const result = validatePolicy(body);
  if (result.ok) throw new Error('expected the policy to be refused');
  return result.errors;
}

/** `n` tags behind a proxy that counts how many tag values are read: the per-tag work done. */
function countedTags(n: number): { tags: Record<string, string>; reads: () => number } {
  let reads = 0;
  const tags = new Proxy(tagsOf(n), {
    get(target, key, receiver) {
      if (typeof key === 'string') reads++;
      return Reflect.get(target, key, receiver);
    },
  });
  return { tags, reads: () => reads };
}

const policy = (extra: Record<string, unknown>) => ({ policy_id: 'p', algorithm: { type: 'fixed_window', limit: 1, window: '1s' }, ...extra });

describe('bounds on input sizes (schema/limits.ts)', () => {
  it('keyCountUpTo counts no further than max + 1', () => {
    expect(keyCountUpTo({}, 3)).to.equal(0);
    expect(keyCountUpTo(tagsOf(3), 3)).to.equal(3);
    expect(keyCountUpTo(tagsOf(1000), 3)).to.equal(4);
  });

  describe('RequestContext: 400 naming the field', () => {
    it(`accepts ${MAX_TAGS} tags at the longest name and value, refuses one tag more`, () => {
      const name = (i: number) => `${i}`.padEnd(MAX_TAG_KEY_LENGTH, 'n');
      const full = Object.fromEntries(Array.from({ length: MAX_TAGS }, (_, i) => [name(i), 'v'.repeat(MAX_TAG_VALUE_LENGTH)]));
      expect(Object.keys(parseRequestContext({ tags: full }).tags)).to.have.length(MAX_TAGS);
      const e = refusal({ tags: tagsOf(MAX_TAGS + 1) });
      expect(e.field).to.equal('tags');
      expect(e.message).to.equal(`tags: must hold at most ${MAX_TAGS} tags, got more`);
    });

    it('refuses a tag name or value over its length, naming it', () => {
      expect(refusal({ tags: { ['k'.repeat(MAX_TAG_KEY_LENGTH + 1)]: 'v' } }).message).to.match(
        new RegExp(`^tags: tag names must be at most ${MAX_TAG_KEY_LENGTH} characters, got ${MAX_TAG_KEY_LENGTH + 1}`),
      );
      const e = refusal({ tags: { env: 'x'.repeat(MAX_TAG_VALUE_LENGTH + 1) } });
      expect(e.field).to.equal('tags.env');
      expect(e.message).to.equal(`tags.env: must be at most ${MAX_TAG_VALUE_LENGTH} characters, got ${MAX_TAG_VALUE_LENGTH + 1}`);
    });

    it('refuses a string field over its length, naming it', () => {
      expect(parseRequestContext({ user_id: 'u'.repeat(MAX_FIELD_LENGTH) }).user_id).to.have.length(MAX_FIELD_LENGTH);
      const e = refusal({ user_id: 'u'.repeat(MAX_FIELD_LENGTH + 1) });
      expect(e.field).to.equal('user_id');
      expect(e.message).to.equal(`user_id: must be at most ${MAX_FIELD_LENGTH} characters, got ${MAX_FIELD_LENGTH + 1}`);
    });

    it('reads no tag value of a request over the tag bound', () => {
      const counted = countedTags(100_000);
      expect(refusal({ tags: counted.tags }).field).to.equal('tags');
      expect(counted.reads()).to.equal(0);
      const within = countedTags(MAX_TAGS);
      parseRequestContext({ tags: within.tags });
      expect(within.reads()).to.equal(MAX_TAGS);
    });

    it('counts the tags before looking at any: 100,000 tags of the wrong type are refused for their number', () => {
      const many = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`k${i}`, i]));
      expect(refusal({ tags: many }).field).to.equal('tags');
    });
  });

  describe('Policy: one 422 field error per bound, never one per item', () => {
    it(`scope.tags: ${MAX_TAGS} accepted, 100,000 refused with one error`, () => {
      const ok = validatePolicy(policy({ scope: { tags: tagsOf(MAX_TAGS) } }));
      expect(ok.ok).to.equal(true);
      expect(policyErrors(policy({ scope: { tags: tagsOf(100_000) } }))).to.deep.equal([
        { field: 'scope.tags', message: `must hold at most ${MAX_TAGS} tags, got more` },
      ]);
    });

    it('reads no scope.tags value of a policy over the tag bound', () => {
      const counted = countedTags(100_000);
      expect(policyErrors(policy({ scope: { tags: counted.tags } }))[0].field).to.equal('scope.tags');
      expect(counted.reads()).to.equal(0);
    });

    it('scope.tags names and values, and scope values, are bounded', () => {
      expect(policyErrors(policy({ scope: { tags: { ['k'.repeat(MAX_TAG_KEY_LENGTH + 1)]: 'v' } } }))[0].field).to.equal('scope.tags');
      expect(policyErrors(policy({ scope: { tags: { env: 'v'.repeat(MAX_TAG_VALUE_LENGTH + 1) } } }))).to.deep.equal([
        { field: 'scope.tags.env', message: `must be at most ${MAX_TAG_VALUE_LENGTH} characters, got ${MAX_TAG_VALUE_LENGTH + 1}` },
      ]);
      expect(policyErrors(policy({ scope: { user_id: 'u'.repeat(MAX_FIELD_LENGTH + 1) } }))).to.deep.equal([
        { field: 'scope.user_id', message: `must be at most ${MAX_FIELD_LENGTH} characters, got ${MAX_FIELD_LENGTH + 1}` },
      ]);
    });

    it('a scope with more keys than there are scope fields is one error, in both body shapes', () => {
      const huge = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`f${i}`, 'x']));
      const expected = [{ field: 'scope', message: `must hold at most ${SCOPE_KEYS.length} fields (the scope fields and tags), got more` }];
      expect(policyErrors(policy({ scope: huge }))).to.deep.equal(expected);
      expect(policyErrors({ id: 'q', resource: 'r', config: { quota: 1, window_seconds: 60 }, scope: huge })).to.deep.equal(expected);
    });

    it('oversizedCollections reports the same size problems as validatePolicy, reading no item', () => {
      const counted = countedTags(100_000);
      expect(oversizedCollections({ scope: { tags: counted.tags }, metadata: tagsOf(MAX_METADATA_ENTRIES + 1) })).to.deep.equal([
        { field: 'scope.tags', message: `must hold at most ${MAX_TAGS} tags, got more` },
        { field: 'metadata', message: `must hold at most ${MAX_METADATA_ENTRIES} entries, got more` },
      ]);
      expect(counted.reads()).to.equal(0);
      const huge = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`f${i}`, 'x']));
      expect(oversizedCollections({ scope: huge })).to.deep.equal(policyErrors(policy({ scope: huge })));
      expect(oversizedCollections(policy({ scope: { tags: tagsOf(MAX_TAGS) }, metadata: tagsOf(MAX_METADATA_ENTRIES) }))).to.deep.equal([]);
      expect(oversizedCollections('x')).to.deep.equal([]);
    });

    it('metadata: entries, key length and value length are bounded (match_expr keeps its own bound)', () => {
      expect(validatePolicy(policy({ metadata: tagsOf(MAX_METADATA_ENTRIES) })).ok).to.equal(true);
      expect(policyErrors(policy({ metadata: tagsOf(100_000) }))).to.deep.equal([
        { field: 'metadata', message: `must hold at most ${MAX_METADATA_ENTRIES} entries, got more` },
      ]);
      expect(policyErrors(policy({ metadata: { ['k'.repeat(MAX_METADATA_KEY_LENGTH + 1)]: 'v' } }))[0].field).to.equal('metadata');
      expect(policyErrors(policy({ metadata: { owner: 'o'.repeat(MAX_METADATA_VALUE_LENGTH + 1) } }))).to.deep.equal([
        { field: 'metadata.owner', message: `must be at most ${MAX_METADATA_VALUE_LENGTH} characters, got ${MAX_METADATA_VALUE_LENGTH + 1}` },
      ]);
    });
  });
});
