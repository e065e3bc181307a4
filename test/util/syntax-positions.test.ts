import { expect } from 'chai';
import fc from 'fast-check';
import { jsonSyntaxError } from '../../src/util/json-syntax.js';
import { editDistance, nearestKey } from '../../src/util/nearest-key.js';
import { caretExcerpt, lineColumnOf } from '../../src/util/source-position.js';

describe('jsonSyntaxError: where JSON text stops being JSON', () => {
  it('agrees with JSON.parse on valid JSON and on every one-character mutation of it', () => {
    const mutated = fc
      .tuple(fc.json({ maxDepth: 3 }), fc.nat(), fc.constantFrom('', '{', '}', '[', ']', ',', ':', '"', '\\', 'x', '1', ' ', '\n', '\u0001'), fc.boolean())
      .map(([text, at, char, replace]) => {
        const i = at % (text.length + 1);
        return text.slice(0, i) + char + text.slice(replace ? i + 1 : i);
      });
    fc.assert(
      fc.property(fc.oneof(fc.json({ maxDepth: 3 }), mutated), (text) => {
        let parses = true;
        try {
          JSON.parse(text);
        } catch {
          parses = false;
        }
        const error = jsonSyntaxError(text);
        expect(error === undefined, `${JSON.stringify(text)}: ${JSON.stringify(error)}`).to.equal(parses);
        if (error) expect(error.offset).to.be.within(0, text.length);
      }),
      { numRuns: 3000 },
    );
  });

  it('names the offending character and its offset', () => {
    expect(jsonSyntaxError('{"a":}')).to.deep.equal({ offset: 5, problem: 'unexpected "}"' });
    expect(jsonSyntaxError('{"a":1,}')).to.deep.equal({ offset: 7, problem: 'expected a property name in double quotes, got "}"' });
    expect(jsonSyntaxError('{"a" 1}')).to.deep.equal({ offset: 5, problem: 'expected ":" after the property name, got "1"' });
    expect(jsonSyntaxError('[1 2]')).to.deep.equal({ offset: 3, problem: 'expected "," or "]", got "2"' });
    expect(jsonSyntaxError('{"policies": [')).to.deep.equal({ offset: 14, problem: 'unexpected end of input' });
    expect(jsonSyntaxError('{"a": "b')).to.deep.equal({ offset: 8, problem: 'unterminated string (no closing ")' });
    expect(jsonSyntaxError("{'a': 1}")).to.deep.equal({ offset: 1, problem: `expected a property name in double quotes, got "'"` });
    expect(jsonSyntaxError('{} x')).to.deep.equal({ offset: 3, problem: 'unexpected "x" after the end of the JSON value' });
  });
});

describe('source positions', () => {
  const text = 'first\n\tsecond line\nthird';
  it('gives 1-based line and column of an offset', () => {
    expect(lineColumnOf(text, 0)).to.deep.equal({ line: 1, column: 1 });
    expect(lineColumnOf(text, 5)).to.deep.equal({ line: 1, column: 6 });
    expect(lineColumnOf(text, 6)).to.deep.equal({ line: 2, column: 1 });
    expect(lineColumnOf(text, text.length)).to.deep.equal({ line: 3, column: 6 });
  });
  it('shows the line with a caret under the column, tabs kept', () => {
    expect(caretExcerpt(text, { line: 2, column: 3 })).to.equal('  \tsecond line\n  \t ^');
  });
  it('shows a window of a long line, the caret still under the column', () => {
    const long = `${'a'.repeat(300)}X${'b'.repeat(300)}`;
    const [line, caret] = caretExcerpt(long, { line: 1, column: 301 }).split('\n');
    expect(line.length).to.be.lessThan(110);
    expect(line[caret.length - 1]).to.equal('X');
  });
});

describe('nearestKey', () => {
  it('counts a transposition as one edit', () => {
    expect(editDistance('acton', 'action')).to.equal(1);
    expect(editDistance('bursT'.toLowerCase(), 'burst')).to.equal(0);
    expect(editDistance('burts', 'burst')).to.equal(1);
    expect(editDistance('abc', 'xyz')).to.equal(3);
  });
  it('suggests the one close key; nothing when none is close or two are as close', () => {
    expect(nearestKey('acton', ['action', 'enabled'])).to.equal('action');
    expect(nearestKey('Action', ['action'])).to.equal('action');
    expect(nearestKey('frobnicate', ['action', 'enabled'])).to.equal(undefined);
    expect(nearestKey('v5', ['v4', 'v6'])).to.equal(undefined);
    expect(nearestKey('v', ['v4'])).to.equal('v4');
  });
});
