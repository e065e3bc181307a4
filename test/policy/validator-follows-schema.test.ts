import { expect } from 'chai';
import { AlgorithmConfigSchema, PolicyInputSchema, QuotaPolicyInputSchema } from '../../src/schema/policy.js';
import { validatePolicy } from '../../src/policy/validate.js';
import { RECORD_KEY, boundSitesOf, valueAt, withValueAt, type BoundSite } from './schema-bound-sites.js';

/**
 * The validator follows the schema (issue "one policy shape"): for every number, length and count
 * bound the Policy schema states, found by walking the schema, a value just outside it is refused
 * with an error naming the field and stating the schema's bound, and a value just inside is accepted.
 * A bound changed in schema/policy.ts changes both, with no list of bounds here to keep in step.
 */

/** A valid algorithm of each type: the fields the schema requires, and those a rule between fields does. */
const BASE_ALGORITHMS: Record<string, Record<string, unknown>> = {
  fixed_window: { type: 'fixed_window', limit: 10, window: '1h' },
  sliding_window_log: { type: 'sliding_window_log', limit: 10, window: '1h' },
  sliding_window_counter: { type: 'sliding_window_counter', limit: 10, window: '1h' },
  token_bucket: { type: 'token_bucket', limit: 10, window: '1h' },
  leaky_bucket: { type: 'leaky_bucket', limit: 10, window: '1h' },
  concurrency: { type: 'concurrency', max_concurrency: 10 },
  quota: { type: 'quota', limit: 10, quota_period: '1h' },
};

/** Fields validatePolicy does not read: `version` is the policy service's (a stale one is a 409). */
const NOT_VALIDATED_HERE = new Set(['version']);
/** No value of this length is valid: no IANA zone name has 1 or 64 characters. */
const NO_VALID_VALUE_AT_BOUND = new Set(['algorithm.timezone']);
/** Messages that name the field's form, not this bound (they predate the schema; their text is kept). */
const MESSAGE_STATES_FORM = new Set(['algorithm.timezone minLength', 'algorithm.timezone maxLength', 'algorithm.lease_ttl maximum']);

const nameOf = (site: BoundSite): string => site.path.join('.');

/** A valid policy for the site's field to be set in: the rules between fields the schema cannot state, met. */
function baseFor(site: BoundSite): Record<string, unknown> {
  const algorithm = { ...BASE_ALGORITHMS[site.algorithmType ?? 'fixed_window'] };
  if (site.path[1] === 'timezone') {
    delete algorithm.window;
    delete algorithm.quota_period;
    algorithm.calendar = 'day';
  }
  const body: Record<string, unknown> = { policy_id: 'p1', algorithm };
  if (site.path[0] === 'budget_shares') body.budget = 'global';
  return body;
}

/** Whether the message (before its ", got ..." part) states the bound: as its number, or in the words the messages use for it. */
function statesBound(message: string, site: BoundSite): boolean {
  const said = message.split(', got ')[0];
  if (new RegExp(`(^|[^0-9.])${String(site.bound).replace('.', '\\.')}([^0-9]|$)`).test(said)) return true;
  const { keyword, bound } = site;
  if ((keyword === 'minimum' && bound === 1) || (keyword === 'exclusiveMinimum' && bound === 0)) return said.includes('positive');
  if (keyword === 'minimum' && bound === 0) return said.includes('non-negative');
  if (keyword === 'maximum' && bound === Number.MAX_SAFE_INTEGER) return said.includes('integer');
  if (keyword === 'minLength' && bound === 1) return said.includes('non-empty');
  return false;
}

/** Just outside the site's bound is refused, naming the field and stating the bound; just inside is accepted. */
function itFollowsTheBound(site: BoundSite, base: Record<string, unknown>, where: string): void {
  it(`${where}: just outside is refused, naming the field and the bound`, () => {
    const result = validatePolicy(withValueAt(base, site.path, valueAt(site, false)));
    expect(result.ok, where).to.equal(false);
    const errors = result.ok ? [] : result.errors;
    // A record's entry is named by its key or, for a problem of the record, by the record.
    const fields = [nameOf(site), site.path.slice(0, site.path.indexOf(RECORD_KEY)).join('.')];
    const named = errors.filter((e) => fields.includes(e.field));
    expect(named, JSON.stringify(errors)).to.not.be.empty;
    if (!MESSAGE_STATES_FORM.has(`${nameOf(site)} ${site.keyword}`)) {
      expect(named.some((e) => statesBound(e.message, site)), `${where}: ${JSON.stringify(named)}`).to.equal(true);
    }
  });

  if (NO_VALID_VALUE_AT_BOUND.has(nameOf(site))) return;
  it(`${where}: just inside is accepted`, () => {
    const result = validatePolicy(withValueAt(base, site.path, valueAt(site, true)));
    expect(result.ok ? [] : result.errors, where).to.deep.equal([]);
  });
}

const sites = boundSitesOf(PolicyInputSchema).filter((site) => !NOT_VALIDATED_HERE.has(site.path[0]));

describe('the validator follows the schema: every bound the Policy schema states', () => {
  it('is found by walking the schema (numbers, lengths and counts of every part of a policy)', () => {
    const kinds = new Set(sites.map((site) => `${site.subject} ${site.keyword}`));
    for (const kind of ['integer minimum', 'integer maximum', 'number exclusiveMinimum', 'string maxLength', 'string minLength', 'entries maxProperties', 'key maxLength']) {
      expect([...kinds], kind).to.include(kind);
    }
    const types = new Set(sites.map((site) => site.algorithmType).filter((type) => type !== undefined));
    expect([...types].sort()).to.deep.equal(AlgorithmConfigSchema.anyOf.map((variant) => variant.properties.type.const).sort());
    expect(Object.keys(BASE_ALGORITHMS).sort()).to.deep.equal([...types].sort());
  });

  for (const site of sites) {
    itFollowsTheBound(site, baseFor(site), `${nameOf(site)}${site.algorithmType === undefined ? '' : ` (${site.algorithmType})`} ${site.keyword} ${site.bound}`);
  }
});

/** The quota-shaped body (README "Managing policies"): its own fields' bounds, as it is validated. */
const QUOTA_BASE = { id: 'q1', resource: '/api', algorithm: 'quota', config: { quota: 10, window_seconds: 60 } };
/** A quota-shaped body for the site's field to be set in: `policy_id` and `scope.resource` are read only without `id` and `resource`. */
function quotaBaseFor(site: BoundSite): Record<string, unknown> {
  const { id, resource, ...body } = QUOTA_BASE;
  if (site.path[0] === 'policy_id') return { ...body, resource };
  if (site.path.join('.') === 'scope.resource') return { ...body, id };
  return site.path[0] === 'budget_shares' ? { ...QUOTA_BASE, budget: 'global' } : QUOTA_BASE;
}
const quotaSites = boundSitesOf(QuotaPolicyInputSchema).filter((site) => !NOT_VALIDATED_HERE.has(site.path[0]));

describe('the validator follows the schema: every bound the quota-shaped body states', () => {
  it('is found by walking the schema (config, id, resource and the fields it shares with a policy)', () => {
    const names = new Set(quotaSites.map(nameOf));
    for (const name of ['config.quota', 'config.window_seconds', 'config.cost_per_request', 'config.sample_rate', 'id', 'resource']) expect([...names], name).to.include(name);
  });

  for (const site of quotaSites) itFollowsTheBound(site, quotaBaseFor(site), `${nameOf(site)} ${site.keyword} ${site.bound}`);
});
