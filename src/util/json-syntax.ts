/**
 * Where JSON text stops being JSON, and why. JSON.parse says why in words that vary by Node version and
 * often without a position ("Unexpected token '}', ..."), so after it fails this scans the text once
 * more, by the grammar of RFC 8259, to find the offset of the first character that cannot continue it.
 * Only ever run on text JSON.parse refused; iterative, so no input can overflow the stack.
 */
export interface JsonSyntaxError {
  /** Offset (UTF-16 code units) of the offending character; the text's length when it ends too soon. */
  offset: number;
  problem: string;
}

const enum Expect {
  Value,
  Key,
  AfterValue,
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const ESCAPES = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't']);
const HEX4 = /[0-9a-fA-F]{4}/y;

/** The first syntax error of `text`, or undefined when it is one valid JSON value. */
export function jsonSyntaxError(text: string): JsonSyntaxError | undefined {
  const n = text.length;
  const open: string[] = [];
  let i = 0;
  let expect = Expect.Value;
  const at = (problem: string, evenAtEnd = false): JsonSyntaxError => ({ offset: i, problem: i >= n && !evenAtEnd ? 'unexpected end of input' : problem });
  const found = () => `unexpected ${JSON.stringify(text[i])}`;

  /** Past a string starting at `i` (a `"`), or the error inside it. */
  const string = (): JsonSyntaxError | undefined => {
    i++;
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        i++;
        return undefined;
      }
      if (c === 0x5c) {
        i++;
        if (i < n && text[i] === 'u') {
          HEX4.lastIndex = i + 1;
          if (!HEX4.test(text)) return at('bad \\u escape: four hex digits must follow');
          i += 5;
        } else if (i < n && ESCAPES.has(text[i])) i++;
        else return at(`bad escape ${JSON.stringify(`\\${text[i] ?? ''}`)}`);
        continue;
      }
      if (c < 0x20) return at('control character in a string (write it as an escape such as \\n)');
      i++;
    }
    return at('unterminated string (no closing ")', true);
  };

  for (;;) {
    while (i < n && (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t')) i++;
    if (expect === Expect.AfterValue) {
      const closer = open.length === 0 ? undefined : open[open.length - 1] === '{' ? '}' : ']';
      if (closer === undefined) return i >= n ? undefined : at(`${found()} after the end of the JSON value`);
      if (i >= n) return at('');
      if (text[i] === ',') {
        i++;
        expect = closer === '}' ? Expect.Key : Expect.Value;
      } else if (text[i] === closer) {
        i++;
        open.pop();
      } else return at(`expected "," or "${closer}", got ${JSON.stringify(text[i])}`);
      continue;
    }
    if (i >= n) return at('');
    const c = text[i];
    if (expect === Expect.Key) {
      if (c !== '"') return at(`expected a property name in double quotes, got ${JSON.stringify(c)}`);
      const error = string();
      if (error) return error;
      while (i < n && (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t')) i++;
      if (text[i] !== ':') return at(`expected ":" after the property name, got ${JSON.stringify(text[i])}`);
      i++;
      expect = Expect.Value;
      continue;
    }
    if (c === '{' || c === '[') {
      open.push(c);
      i++;
      while (i < n && (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t')) i++;
      const empty = text[i] === (c === '{' ? '}' : ']');
      if (empty) {
        i++;
        open.pop();
        expect = Expect.AfterValue;
      } else expect = c === '{' ? Expect.Key : Expect.Value;
      continue;
    }
    if (c === '"') {
      const error = string();
      if (error) return error;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      NUMBER.lastIndex = i;
      if (!NUMBER.test(text)) return at(`bad number ${JSON.stringify(text.slice(i, i + 12))}`);
      i = NUMBER.lastIndex;
    } else if (text.startsWith('true', i)) i += 4;
    else if (text.startsWith('false', i)) i += 5;
    else if (text.startsWith('null', i)) i += 4;
    else return at(found());
    expect = Expect.AfterValue;
  }
}
