import { expect } from 'chai';
import type { Decision } from '../../src/model/decision.js';
import { limitingDecision } from '../../src/grpc/envoy.js';
import { problemDetails, QUOTA_EXCEEDED_TYPE, renderRateLimitHeaderList, renderRateLimitHeaders } from '@rl/client/headers';

/** Golden strings of the rate-limit response headers (README "What a decision means"), per algorithm and per kind of answer. */

function decision(overrides: Partial<Decision>): Decision {
  return {
    allowed: true,
    action: 'allow',
    reason: 'within_limit',
    matched_policy_id: 'p',
    remaining: 7,
    retry_after: 0,
    reset_after: 41_200,
    limit: 10,
    window: 60_000,
    shadow_mode: false,
    metadata: {},
    ...overrides,
  };
}

describe('rate-limit headers and problem body (the one renderer)', () => {
  const perAlgorithm: [string, Partial<Decision>, [string, string][]][] = [
    [
      'fixed_window 10/min, 7 left, 41.2 s to reset',
      { matched_policy_id: 'fw' },
      [
        ['RateLimit-Policy', '"fw";q=10;w=60'],
        ['RateLimit', '"fw";r=7;t=42'],
      ],
    ],
    [
      'sliding_window_log 100/h',
      { matched_policy_id: 'log', limit: 100, remaining: 99, window: 3_600_000, reset_after: 3_600_000 },
      [
        ['RateLimit-Policy', '"log";q=100;w=3600'],
        ['RateLimit', '"log";r=99;t=3600'],
      ],
    ],
    [
      'sliding_window_counter: a fractional estimate is floored',
      { matched_policy_id: 'swc', remaining: 4.6, reset_after: 999 },
      [
        ['RateLimit-Policy', '"swc";q=10;w=60'],
        ['RateLimit', '"swc";r=4;t=1'],
      ],
    ],
    [
      'token_bucket burst 20 at 10/s: the window is the refill time, 2 s',
      { matched_policy_id: 'tb', limit: 20, remaining: 19, window: 2_000, reset_after: 100 },
      [
        ['RateLimit-Policy', '"tb";q=20;w=2'],
        ['RateLimit', '"tb";r=19;t=1'],
      ],
    ],
    [
      'leaky_bucket burst 5 draining at 1/s, 3.3 s refill time rounds up',
      { matched_policy_id: 'lb', limit: 5, remaining: 0, window: 3_300, reset_after: 5_000, allowed: false, action: 'delay', reason: 'limit_exceeded', retry_after: 1_000 },
      [
        ['RateLimit-Policy', '"lb";q=5;w=4'],
        ['RateLimit', '"lb";r=0;t=5'],
        ['Retry-After', '1'],
      ],
    ],
    [
      'quota of 1000 per day, refused',
      { matched_policy_id: 'q', limit: 1000, remaining: 0, window: 86_400_000, reset_after: 7_200_500, allowed: false, action: 'deny', reason: 'limit_exceeded', retry_after: 7_200_500 },
      [
        ['RateLimit-Policy', '"q";q=1000;w=86400'],
        ['RateLimit', '"q";r=0;t=7201'],
        ['Retry-After', '7201'],
      ],
    ],
    [
      'concurrency: no window, counts concurrent requests',
      { matched_policy_id: 'c', limit: 3, remaining: 1, window: 0, reset_after: 0, reason: 'lease_acquired' },
      [
        ['RateLimit-Policy', '"c";q=3;qu="concurrent-requests"'],
        ['RateLimit', '"c";r=1;t=0'],
      ],
    ],
    [
      'a drop (retry_after 0) has no Retry-After',
      { matched_policy_id: 'd', remaining: 0, allowed: false, action: 'drop', reason: 'limit_exceeded' },
      [
        ['RateLimit-Policy', '"d";q=10;w=60'],
        ['RateLimit', '"d";r=0;t=42'],
      ],
    ],
    [
      'a policy id with a quote and a non-ASCII character is a valid sf-string',
      { matched_policy_id: 'a"b\\é' },
      [
        ['RateLimit-Policy', '"a\\"b\\\\?";q=10;w=60'],
        ['RateLimit', '"a\\"b\\\\?";r=7;t=42'],
      ],
    ],
  ];
  for (const [name, overrides, expected] of perAlgorithm) {
    it(`ietf: ${name}`, () => {
      expect(renderRateLimitHeaders(decision(overrides))).to.deep.equal(expected);
    });
  }

  it('nothing for no match, a shadow-only answer or a failure-mode answer', () => {
    expect(renderRateLimitHeaders(decision({ matched_policy_id: '', reason: 'no_matching_policy', window: 0 }))).to.deep.equal([]);
    expect(renderRateLimitHeaders(decision({ shadow_mode: true, action: 'shadow_only', reason: 'limit_exceeded' }))).to.deep.equal([]);
    expect(renderRateLimitHeaders(decision({ reason: 'counter_store_unavailable', allowed: false, action: 'deny' }))).to.deep.equal([]);
    expect(renderRateLimitHeaders(decision({ reason: 'counter_store_unavailable' }), 'legacy')).to.deep.equal([]);
  });

  it('legacy: X-RateLimit-Limit, -Remaining, -Reset (seconds), and Retry-After when refused', () => {
    expect(renderRateLimitHeaders(decision({}), 'legacy')).to.deep.equal([
      ['X-RateLimit-Limit', '10'],
      ['X-RateLimit-Remaining', '7'],
      ['X-RateLimit-Reset', '42'],
    ]);
    expect(renderRateLimitHeaders(decision({ allowed: false, action: 'deny', remaining: 0, retry_after: 1 }), 'legacy')).to.deep.equal([
      ['X-RateLimit-Limit', '10'],
      ['X-RateLimit-Remaining', '0'],
      ['X-RateLimit-Reset', '42'],
      ['Retry-After', '1'],
    ]);
  });

  it('a list: one item per decision an enforced policy made, in the order given; legacy and Retry-After from the first', () => {
    const refused = decision({ matched_policy_id: 'burst', allowed: false, action: 'deny', limit: 5, remaining: 0, window: 1_000, reset_after: 400, retry_after: 400 });
    const daily = decision({ matched_policy_id: 'daily', limit: 1000, remaining: 900, window: 86_400_000, reset_after: 3_600_000 });
    const unmatched = decision({ matched_policy_id: '', reason: 'no_matching_policy', window: 0 });
    const shadow = decision({ matched_policy_id: 'trial', shadow_mode: true, action: 'shadow_only', reason: 'limit_exceeded' });
    const list = [refused, unmatched, shadow, daily];
    expect(renderRateLimitHeaderList(list)).to.deep.equal([
      ['RateLimit-Policy', '"burst";q=5;w=1, "daily";q=1000;w=86400'],
      ['RateLimit', '"burst";r=0;t=1, "daily";r=900;t=3600'],
      ['Retry-After', '1'],
    ]);
    expect(renderRateLimitHeaderList(list, 'legacy')).to.deep.equal(renderRateLimitHeaders(refused, 'legacy'));
    expect(renderRateLimitHeaderList([daily])).to.deep.equal(renderRateLimitHeaders(daily));
    expect(renderRateLimitHeaderList([unmatched, shadow])).to.deep.equal([]);
  });

  it("a gateway's limiting answer is one the renderer speaks for: never a refused failure-mode or shadow answer", () => {
    const failed = decision({ matched_policy_id: 'down', reason: 'counter_store_unavailable', allowed: false, action: 'deny', remaining: 0 });
    const shadow = decision({ matched_policy_id: 'trial', shadow_mode: true, action: 'shadow_only', reason: 'limit_exceeded', remaining: 0 });
    const daily = decision({ matched_policy_id: 'daily', limit: 1000, remaining: 900, window: 86_400_000, reset_after: 3_600_000 });
    expect(limitingDecision([failed, shadow, daily])).to.equal(daily);
    expect(renderRateLimitHeaderList([failed, shadow, daily])).to.deep.equal(renderRateLimitHeaders(daily));
    expect(limitingDecision([failed, shadow])).to.equal(undefined);
    expect(renderRateLimitHeaderList([failed, shadow])).to.deep.equal([]);
  });

  it('the problem body of a refused request', () => {
    expect(problemDetails(decision({ matched_policy_id: 'fw', allowed: false, action: 'deny', remaining: 0, retry_after: 12_500 }))).to.deep.equal({
      type: QUOTA_EXCEEDED_TYPE,
      title: 'Quota exceeded',
      status: 429,
      detail: 'Policy "fw" allows 10 per 60 s; retry in 13 s.',
      'violated-policies': ['fw'],
    });
    expect(problemDetails(decision({ matched_policy_id: 'c', limit: 3, window: 0, allowed: false, action: 'deny' })).detail).to.equal('Policy "c" allows 3 at once.');
  });
});

describe('rate-limit headers of a decision over several layers', () => {
  const verdict = (layer: string, policy_id: string, allowed: boolean, limit: number, window: number, remaining: number) => ({
    layer, policy_id, allowed, action: allowed ? 'allow' : 'deny', reason: allowed ? ('within_limit' as const) : ('limit_exceeded' as const),
    remaining, limit, window, reset_after: 30_000, retry_after: allowed ? 0 : 30_000,
  });
  const layered = decision({
    allowed: false, action: 'deny', reason: 'limit_exceeded', matched_policy_id: 'per-org', remaining: 0, limit: 20, retry_after: 30_000, reset_after: 30_000,
    layers: [verdict('org', 'per-org', false, 20, 60_000, 0), verdict('platform', 'platform', true, 100, 60_000, 80), verdict('user', 'per-user', false, 5, 1_000, 0)],
  });

  it('RateLimit-Policy lists every layer\'s policy, RateLimit the deciding one', () => {
    expect(renderRateLimitHeaders(layered)).to.deep.equal([
      ['RateLimit-Policy', '"per-org";q=20;w=60, "platform";q=100;w=60, "per-user";q=5;w=1'],
      ['RateLimit', '"per-org";r=0;t=30'],
      ['Retry-After', '30'],
    ]);
  });

  it('the problem body names every refusing layer\'s policy', () => {
    expect(problemDetails(layered)['violated-policies']).to.deep.equal(['per-org', 'per-user']);
  });
});
