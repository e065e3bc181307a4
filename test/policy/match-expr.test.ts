import { expect } from 'chai';
import { CONTEXT_STRING_FIELDS, parseRequestContext, type RequestContext } from '../../src/model/request-context.js';
import { compileMatchExpr, MAX_MATCH_EXPR_COST, MAX_MATCH_EXPR_LENGTH } from '../../src/policy/match-expr.js';

function compile(expr: string) {
  const r = compileMatchExpr(expr);
  if (!r.ok) throw new Error(`expected ${expr} to compile: ${r.message}`);
  return r.evaluate;
}

function ctx(fields: Record<string, unknown>): RequestContext {
  return parseRequestContext(fields);
}

describe('compileMatchExpr', () => {
  it('evaluates the documented example', () => {
    const f = compile('severity in ["debug","info"] && tags["env"] == "prod"');
    expect(f(ctx({ severity: 'debug', tags: { env: 'prod' } }))).to.equal(true);
    expect(f(ctx({ severity: 'info', tags: { env: 'prod' } }))).to.equal(true);
    expect(f(ctx({ severity: 'warn', tags: { env: 'prod' } }))).to.equal(false);
    expect(f(ctx({ severity: 'info', tags: { env: 'dev' } }))).to.equal(false);
  });

  it('declares every string field of RequestContext, tags and quantity', () => {
    for (const field of CONTEXT_STRING_FIELDS) {
      const f = compile(`${field} == "v"`);
      expect(f(ctx({ [field]: field === 'signal_type' ? 'http' : 'v' })), field).to.equal(field !== 'signal_type');
    }
    expect(compile('signal_type == "http"')(ctx({ signal_type: 'http' }))).to.equal(true);
    expect(compile('quantity > 10')(ctx({ quantity: 11 }))).to.equal(true);
    expect(compile('quantity > 10')(ctx({ quantity: 10 }))).to.equal(false);
    expect(compile('quantity == 1')(ctx({}))).to.equal(true);
    expect(compile('size(tags) == 2')(ctx({ tags: { a: '1', b: '2' } }))).to.equal(true);
  });

  it('works with plain-object contexts too', () => {
    const f = compile('user_id.startsWith("admin-") && tags["tier"] == "gold" && quantity >= 2');
    expect(f({ user_id: 'admin-1', quantity: 2, tags: { tier: 'gold' } })).to.equal(true);
    expect(f({ user_id: 'user-1', quantity: 2, tags: { tier: 'gold' } })).to.equal(false);
  });

  it('an evaluation error counts as false: missing tag, absent field', () => {
    const tag = compile('tags["env"] == "prod"');
    expect(tag(ctx({}))).to.equal(false);
    const negated = compile('!(tags["env"] == "prod")');
    expect(negated(ctx({}))).to.equal(false, 'an error inside a negation is still false');
    const absent = compile('user_id != "bob"');
    expect(absent(ctx({}))).to.equal(false);
    expect(absent(ctx({ user_id: 'alice' }))).to.equal(true);
    const guarded = compile('has(tags.env) && tags.env == "prod"');
    expect(guarded(ctx({}))).to.equal(false);
    expect(guarded(ctx({ tags: { env: 'prod' } }))).to.equal(true);
  });

  it('a non-safe quantity is an error, hence false', () => {
    expect(compile('quantity > 0')({ quantity: 1.5, tags: {} })).to.equal(false);
  });

  it('does not leak prototype properties as tags or fields', () => {
    const f = compile('tags["constructor"] == "x"');
    expect(f({ quantity: 1, tags: {} })).to.equal(false);
    expect(f({ quantity: 1, tags: { constructor: 'x' } as Record<string, string> })).to.equal(true);
  });

  it('rejects syntax errors, type errors, unknown variables and non-bool results', () => {
    const cases: [string, RegExp][] = [
      ['severity ==', /invalid CEL/],
      ['severity == 1', /invalid CEL/],
      ['region == "x" && nope', /invalid CEL/],
      ['tags["a"] + 1 > 2', /invalid CEL/],
      ['severity', /must evaluate to bool/],
      ['quantity * 2', /must evaluate to bool/],
      ['dyn(true)', /must evaluate to bool/],
      ['', /must not be empty/],
      ['   ', /must not be empty/],
      ['true || '.repeat(Math.ceil(MAX_MATCH_EXPR_LENGTH / 8)) + 'true', /at most/],
      ['['.repeat(300), /invalid CEL/],
    ];
    for (const [expr, pattern] of cases) {
      const r = compileMatchExpr(expr);
      expect(r.ok, expr).to.equal(false);
      if (!r.ok) {
        expect(r.message, expr).to.match(pattern);
        expect(r.message, expr).to.not.contain('\n');
      }
    }
    expect(compileMatchExpr(5 as unknown as string).ok).to.equal(false);
  });

  it('refuses an expression whose comprehensions multiply past MAX_MATCH_EXPR_COST steps, before any request', () => {
    // Four nested over 64 tags would be 16.7 million body evaluations per request (seconds each).
    for (const expr of [
      'tags.all(a, tags.all(b, tags.all(c, tags.all(d, true))))',
      'tags.all(a, tags.all(b, a != b || true))',
      'user_id.split(",").exists(x, x == "a")',
      `[${Array.from({ length: 300 }, (_, i) => i).join(',')}].all(x, tags.exists(k, size(k) > x))`,
    ]) {
      const r = compileMatchExpr(expr);
      expect(r.ok, expr).to.equal(false);
      if (!r.ok) expect(r.message, expr).to.match(/^is too costly: about \d+ evaluation steps per request, at most 10000 /);
    }
    // One comprehension over tags, chained ones and literal lists are fine.
    for (const expr of [
      'tags.exists(k, k.startsWith("team-") && tags[k].matches("^[a-z]+$"))',
      'tags.filter(k, k.startsWith("a")).map(k, tags[k]).exists(v, v == "x")',
      `user_id in [${Array.from({ length: 300 }, (_, i) => `"u${i}"`).join(',')}]`,
    ]) {
      expect(compileMatchExpr(expr).ok, expr).to.equal(true);
    }
    expect(MAX_MATCH_EXPR_COST).to.equal(10_000);
  });

  it('messages locate the problem', () => {
    const r = compileMatchExpr('severity == ');
    expect(r.ok).to.equal(false);
    if (!r.ok) expect(r.message).to.match(/offset \d+/);
  });
});

describe('compileMatchExpr with a tag named "constructor"', () => {
  it('still reads the tags map', () => {
    const tags = { constructor: 'x', env: 'prod' } as Record<string, string>;
    const c = { quantity: 1, tags };
    expect(compile('tags["env"] == "prod"')(c)).to.equal(true);
    expect(compile('has(tags.env) && "constructor" in tags && size(tags) == 2')(c)).to.equal(true);
    expect(compile('tags["missing"] == "prod"')(c)).to.equal(false);
  });
});
