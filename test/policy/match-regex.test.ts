import { expect } from 'chai';
import type { RequestContext } from '../../src/model/request-context.js';
import { compileMatchExpr, type MatchExprEvaluator } from '../../src/policy/match-expr.js';
import { cachedRegexCount, compileRegex, REGEX_CACHE_SIZE, REGEX_STEPS_PER_DECISION, RegexBudget } from '../../src/policy/match-regex.js';
import { Matcher } from '../../src/matching/matcher.js';
import { validatePolicy } from '../../src/policy/validate.js';
import { makePolicy } from '../support/policies.js';

function compile(expr: string): MatchExprEvaluator {
  const r = compileMatchExpr(expr);
  if (!r.ok) throw new Error(`expected ${expr} to compile: ${r.message}`);
  return r.evaluate;
}

function user(user_id: string): RequestContext {
  return { user_id, quantity: 1, tags: {} };
}

function refusal(expr: string): string {
  const r = compileMatchExpr(expr);
  if (r.ok) throw new Error(`expected ${expr} to be refused`);
  return r.message;
}

describe('matches() in match_expr runs on RE2 (linear time)', () => {
  it('keeps CEL matches() semantics: a partial match unless anchored, RE2 syntax', () => {
    expect(compile('user_id.matches("b+")')(user('abbbc'))).to.equal(true);
    expect(compile('user_id.matches("^b+$")')(user('abbbc'))).to.equal(false);
    expect(compile('user_id.matches("(?i)^ADMIN-\\\\d+$")')(user('admin-42'))).to.equal(true);
    expect(compile('user_id.matches("^\\\\p{Greek}+$")')(user('αβγ'))).to.equal(true);
    expect(compile('tags.exists(k, tags[k].matches("^[0-9]+$"))')({ quantity: 1, tags: { a: 'x', b: '123' } })).to.equal(true);
    expect(compile('!user_id.matches("^a")')(user('bcd'))).to.equal(true);
  });

  it('catastrophic patterns answer correctly on 10 kB inputs, in linear work: each character read once, twice the input twice the reads', () => {
    const tenK = 10 * 1024;
    const cases: [pattern: string, input: (n: number) => string, expected: boolean][] = [
      ['^(a+)+$', (n) => 'a'.repeat(n) + '!', false],
      ['^(a+)+$', (n) => 'a'.repeat(n), true],
      ['(a|aa)+$', (n) => 'a'.repeat(n) + '!', false],
      ['^(a|aa)+$', (n) => 'a'.repeat(n), true],
      ['(.*a){20}', (n) => 'a'.repeat(n), true],
      ['^(.*a){20}$', (n) => 'a'.repeat(n) + 'b', false],
      ['^(a|a?)+$', (n) => 'a'.repeat(n) + '!', false],
      ['^(\\\\w+\\\\s?)+$', (n) => 'ab '.repeat(n / 3) + '!', false],
      ['^(([a-z])+.)+[A-Z]([a-z])+$', (n) => 'a'.repeat(n), false],
      ['(x+x+)+y', (n) => 'x'.repeat(n), false],
    ];
    // The work of an evaluation, counted instead of timed (timings flake on a shared machine): the
    // characters the engine reads. re2js reads its input one character at a time through
    // String.prototype.charCodeAt; a backtracking engine reads the same characters again and again (on
    // `^(a+)+$` exponentially often), a quadratic one again from every start position.
    const readsOf = (evaluate: MatchExprEvaluator, input: string, expected: boolean, what: string): number => {
      const charCodeAt = String.prototype.charCodeAt;
      let reads = 0;
      String.prototype.charCodeAt = function (this: string, index: number) {
        reads++;
        return charCodeAt.call(this, index);
      };
      let answer: boolean;
      try {
        answer = evaluate(user(input));
      } finally {
        String.prototype.charCodeAt = charCodeAt;
      }
      expect(answer, what).to.equal(expected);
      return reads;
    };
    // The count sees the engine: a full match must read every character.
    expect(readsOf(compile('user_id.matches("^(a+)+$")'), 'a'.repeat(tenK), true, 'a full match')).to.be.at.least(tenK);
    for (const [pattern, input, expected] of cases) {
      const evaluate = compile(`user_id.matches("${pattern}")`);
      const half = input(tenK / 2);
      const full = input(tenK);
      const readsHalf = readsOf(evaluate, half, expected, `${pattern} on ${half.length} chars`);
      const readsFull = readsOf(evaluate, full, expected, `${pattern} on ${full.length} chars`);
      // No character read twice (beyond one character of lookahead at the end)...
      expect(readsFull, `${pattern}: reads on ${full.length} chars`).to.be.at.most(full.length + 2);
      // ...and twice the input costs at most twice the reads (ratio <= 2: linear, not exponential or quadratic).
      expect(readsFull, `${pattern}: reads on ${full.length} chars against ${readsHalf} on ${half.length}`).to.be.at.most(2 * readsHalf + 2);
    }
  });

  it('refuses at save time a pattern RE2 cannot run, saying why, naming metadata.match_expr', () => {
    for (const [pattern, what] of [
      ['(a)\\\\1', 'invalid escape'],
      ['(?=a)b', 'unsupported Perl syntax'],
      ['(?<!a)b', 'invalid named capture'],
      ['a{2000}', 'invalid repeat count'],
      ['(unclosed', 'missing closing )'],
    ]) {
      const message = refusal(`user_id.matches("${pattern}")`);
      expect(message, pattern).to.include(what);
      expect(message).to.include('no backreferences and no lookahead or lookbehind');
      const result = validatePolicy({
        policy_id: 'regex',
        algorithm: { type: 'fixed_window', limit: 1, window: '1s' },
        metadata: { match_expr: `user_id.matches("${pattern}")` },
      });
      expect(result.ok, pattern).to.equal(false);
      if (!result.ok) {
        const error = result.errors.find((e) => e.field === 'metadata.match_expr');
        expect(error?.message, pattern).to.include('not valid RE2 syntax');
      }
    }
  });

  it('refuses a pattern that is not a string literal, and the internal RE2 function name', () => {
    expect(refusal('user_id.matches(tags["re"])')).to.include('string literal');
    expect(refusal('user_id.matches("a" + tenant_id)')).to.include('string literal');
    expect(refusal('user_id.__rl_re2_matches("a")')).to.include('unknown function');
    // Type errors still speak of matches(), as written.
    expect(refusal('user_id.matches(1)')).to.match(/matches/);
  });

  it('one decision spends at most REGEX_STEPS_PER_DECISION steps; past it matches() counts as false', () => {
    const evaluate = compile('user_id.matches("^(a+)+$")');
    const input = 'a'.repeat(4000);
    const size = compileRegex('^(a+)+$');
    if (!size.ok) throw new Error('compiles');
    const perCall = size.regex.size * (input.length + 1);
    const budget = new RegexBudget();
    let matched = 0;
    for (let i = 0; i < 1000 && evaluate(user(input), budget); i++) matched++;
    expect(matched).to.equal(Math.floor(REGEX_STEPS_PER_DECISION / perCall));
    expect(evaluate(user(input), budget)).to.equal(false);
    // A fresh budget (the next decision) matches again; without one, each evaluation has its own.
    expect(evaluate(user(input), new RegexBudget())).to.equal(true);
    expect(evaluate(user(input))).to.equal(true);
  });

  it('the matcher gives every decision one fresh budget, shared by all its match_expr evaluations', () => {
    // 60 best-ranked policies run a regex over a 4,000-character user_id that does not match; after
    // them the budget of the decision is spent, so the next one's matching regex counts as false and
    // a policy without a regex decides. Each decision starts over with a full budget.
    const rule = (id: string, priority: number, expr: string) =>
      makePolicy({ policy_id: id, priority, algorithm: { type: 'fixed_window', limit: 5, window: '1m' }, metadata: { match_expr: expr } });
    const policies = [
      ...Array.from({ length: 60 }, (_, i) => rule(`miss-${String(i).padStart(2, '0')}`, 1000 - i, 'user_id.matches("^(a+)+b$")')),
      rule('late-regex', 10, 'user_id.matches("^(a+)+$")'),
      rule('plain', 0, 'user_id.startsWith("a")'),
    ];
    const perCall = (compileRegex('^(a+)+b$') as { ok: true; regex: { size: number } }).regex.size * 4001;
    expect(60 * perCall, 'the misses alone spend the budget').to.be.greaterThan(REGEX_STEPS_PER_DECISION);
    const matcher = Matcher.build(policies);
    const ctx = user('a'.repeat(4000));
    for (let decision = 0; decision < 3; decision++) {
      expect(matcher.match(ctx, 'rate', Date.now()).enforce?.compiled.policy.policy_id, `decision ${decision}`).to.equal('plain');
    }
    // Without the misses in front, the same regex policy matches: the budget was what stopped it.
    const alone = Matcher.build(policies.slice(60));
    expect(alone.match(ctx, 'rate', Date.now()).enforce?.compiled.policy.policy_id).to.equal('late-regex');
  });

  it('keeps at most REGEX_CACHE_SIZE compiled patterns', () => {
    for (let i = 0; i < REGEX_CACHE_SIZE + 50; i++) expect(compileRegex(`^cache-${i}$`).ok).to.equal(true);
    expect(cachedRegexCount()).to.equal(REGEX_CACHE_SIZE);
    expect(compileRegex('^cache-0$').ok).to.equal(true); // evicted earlier, compiled again
  });
});
