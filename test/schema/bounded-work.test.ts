import { expect } from 'chai';
import { MAX_TAGS } from '../../src/schema/limits.js';
import { setLogLevel } from '../../src/util/log.js';
import { HTTP_PATHS, serveDecisions } from '../support/http-listeners.js';
import { parseBody, type TestServer } from '../support/http.js';
import { servePolicyApi, type PolicyApi } from '../support/policy-api.js';

/**
 * Issue 14, "Bounded work per request": a check with 100,000 tags and a policy with 100,000 scope.tags
 * keys are refused by their size before any per-tag work, over HTTP (the body reader, the routes, the
 * decision fast path) and not only in the schema functions (test/schema/limits.test.ts).
 *
 * The work is counted, not timed (a timing flakes on a shared machine): the server parses each body
 * with JSON.parse, and while a big request is served JSON.parse hands the server its 100,000-key
 * object behind a Proxy that counts what is done with it. Reading the body costs the same whatever
 * the keys are for (the reader walks every value for its depth and `__proto__` checks), so each big
 * request is compared with a CONTROL: the same 100,000 keys under a field the server ignores. The big
 * request reads no value more than its control, and visits at most MAX_TAGS + 1 keys more (counting
 * them up to the bound), where per-tag work would read or visit 100,000 more.
 */

const MAX_BODY_BYTES = 1024 * 1024;

/** `{...100,000 short keys...}` as text. */
function manyTags(n: number): string {
  const parts: string[] = [];
  for (let i = 0; i < n; i++) parts.push(`"${i.toString(36)}":""`);
  return `{${parts.join(',')}}`;
}

interface Work {
  /** Values read from the 100,000-key object. */
  reads: number;
  /** Keys whose property descriptor was asked for (what `for…in` does with each key it yields). */
  visits: number;
}

/**
 * Sends `body` and counts the work done on the object at `path` of its parse (`['tags']`,
 * `['scope', 'tags']`, `['ignored']`): JSON.parse wraps it in a counting Proxy for this body's text only.
 */
async function countedRequest(url: string, method: string, body: string, path: string[]): Promise<{ status: number; body: any; work: Work }> {
  const work: Work = { reads: 0, visits: 0 };
  const parse = JSON.parse;
  JSON.parse = function countingParse(text: string, reviver?: Parameters<typeof JSON.parse>[1]) {
    const value = parse(text, reviver);
    if (text.length !== body.length || text !== body) return value;
    const parent = path.slice(0, -1).reduce((o, key) => o[key], value);
    const key = path.at(-1)!;
    parent[key] = new Proxy(parent[key], {
      get(target, property, receiver) {
        if (typeof property === 'string') work.reads++;
        return Reflect.get(target, property, receiver);
      },
      getOwnPropertyDescriptor(target, property) {
        work.visits++;
        return Reflect.getOwnPropertyDescriptor(target, property);
      },
    });
    return value;
  };
  try {
    const response = await fetch(url, { method, headers: { 'content-type': 'application/json' }, body });
    return { status: response.status, body: await parseBody(response), work };
  } finally {
    JSON.parse = parse;
  }
}

/** The work of `body` against the work of `control`: no value read more, at most MAX_TAGS + 1 keys visited more. */
function expectBoundedAgainst(big: Work, control: Work): void {
  const shown = `big ${JSON.stringify(big)}, control ${JSON.stringify(control)}`;
  // The control is a real measurement: the body reader walked its 100,000 values.
  expect(control.reads, shown).to.be.at.least(100_000);
  expect(big.reads, shown).to.equal(control.reads);
  expect(big.visits - control.visits, shown).to.be.at.most(MAX_TAGS + 1);
}

describe('bounded work per request: 100,000 tags cost no more work than the same keys in an ignored field (issue 14)', function () {
  this.timeout(60_000);
  before(() => setLogLevel('silent'));
  after(() => setLogLevel('info'));

  for (const [name, build] of HTTP_PATHS) {
    describe(name, () => {
      let server: TestServer;
      before(async () => {
        server = await serveDecisions(build, [], MAX_BODY_BYTES);
      });
      after(async () => server?.close());

      it('a 950 KB check with 100,000 tags: 400 naming tags, no per-tag work', async () => {
        const tags = manyTags(100_000);
        const body = `{"user_id":"u","tags":${tags}}`;
        expect(body.length).to.be.within(900_000, 1_000_000);
        const control = await countedRequest(`${server.url}/rl/v1/check`, 'POST', `{"user_id":"u","ignored":${tags}}`, ['ignored']);
        const big = await countedRequest(`${server.url}/rl/v1/check`, 'POST', body, ['tags']);
        expect(big.status).to.equal(400);
        expect(big.body.error).to.equal(`tags: must hold at most ${MAX_TAGS} tags, got more`);
        expectBoundedAgainst(big.work, control.work);
      });
    });
  }

  describe('policy routes', () => {
    let api: PolicyApi | undefined;
    let server: TestServer;
    before(async () => {
      api = await servePolicyApi({ maxBodyBytes: MAX_BODY_BYTES });
      server = api.server;
    });
    after(() => api?.close());

    for (const [method, path, status] of [
      ['POST', '/rl/v1/policies', 422],
      ['POST', '/rl/v1/policies/validate', 200],
      ['PUT', '/rl/v1/policies/big', 422],
    ] as const) {
      it(`${method} ${path} with 100,000 scope.tags keys: ${status} naming scope.tags, no per-tag work`, async () => {
        const policy = (tags: string, where: string) =>
          `{"policy_id":"big","algorithm":{"type":"fixed_window","limit":1,"window":"1s"},${where === 'scope' ? `"scope":{"tags":${tags}}` : `"ignored":${tags},"scope":{"org_id":"*","tags":{"":"x"}}`}}`;
        const tags = manyTags(100_000);
        const control = await countedRequest(`${server.url}${path}`, method, policy(tags, 'ignored'), ['ignored']);
        const big = await countedRequest(`${server.url}${path}`, method, policy(tags, 'scope'), ['scope', 'tags']);
        expect(big.status).to.equal(status);
        expect(big.body.errors).to.deep.equal([{ field: 'scope.tags', message: `must hold at most ${MAX_TAGS} tags, got more` }]);
        expectBoundedAgainst(big.work, control.work);
      });
    }
  });
});
