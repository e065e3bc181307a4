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
  const scan = new Scanner(text);
  for (;;) {
    scan.skipSpace();
    let error: JsonSyntaxError | undefined;
    if (scan.expect === Expect.AfterValue) {
      if (scan.open.length === 0) return scan.i >= text.length ? undefined : scan.at(`${scan.found()} after the end of the JSON value`);
      error = scan.afterValue();
    } else if (scan.i >= text.length) return scan.at('');
    else error = scan.expect === Expect.Key ? scan.key() : scan.value();
    if (error) return error;
  }
}

/** The scan's position and what may come next; each step returns the error it meets, if any. */
class Scanner {
  i = 0;
  expect = Expect.Value;
  /** The `{` and `[` not yet closed. */
  readonly open: string[] = [];
  private readonly n: number;

  constructor(private readonly text: string) {
    this.n = text.length;
  }

  at(problem: string, evenAtEnd = false): JsonSyntaxError {
    return { offset: this.i, problem: this.i >= this.n && !evenAtEnd ? 'unexpected end of input' : problem };
  }

  found(): string {
    return `unexpected ${JSON.stringify(this.text[this.i])}`;
  }

  skipSpace(): void {
    const text = this.text;
    while (this.i < this.n && (text[this.i] === ' ' || text[this.i] === '\n' || text[this.i] === '\r' || text[this.i] === '\t')) this.i++;
  }

  /** After a value inside an open `{` or `[`: a `,` or its closer. */
  afterValue(): JsonSyntaxError | undefined {
    const closer = this.open[this.open.length - 1] === '{' ? '}' : ']';
    if (this.i >= this.n) return this.at('');
    const c = this.text[this.i];
    if (c === ',') {
      this.i++;
      this.expect = closer === '}' ? Expect.Key : Expect.Value;
    } else if (c === closer) {
      this.i++;
      this.open.pop();
    } else return this.at(`expected "," or "${closer}", got ${JSON.stringify(c)}`);
    return undefined;
  }

  /** A property name and its `:`. */
  key(): JsonSyntaxError | undefined {
    const c = this.text[this.i];
    if (c !== '"') return this.at(`expected a property name in double quotes, got ${JSON.stringify(c)}`);
    const error = this.string();
    if (error) return error;
    this.skipSpace();
    if (this.text[this.i] !== ':') return this.at(`expected ":" after the property name, got ${JSON.stringify(this.text[this.i])}`);
    this.i++;
    this.expect = Expect.Value;
    return undefined;
  }

  /** A value, or the opening of an object or array. */
  value(): JsonSyntaxError | undefined {
    const text = this.text;
    const c = text[this.i];
    if (c === '{' || c === '[') {
      this.open.push(c);
      this.i++;
      this.skipSpace();
      const empty = text[this.i] === (c === '{' ? '}' : ']');
      if (empty) {
        this.i++;
        this.open.pop();
        this.expect = Expect.AfterValue;
      } else this.expect = c === '{' ? Expect.Key : Expect.Value;
      return undefined;
    }
    if (c === '"') {
      const error = this.string();
      if (error) return error;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      NUMBER.lastIndex = this.i;
      if (!NUMBER.test(text)) return this.at(`bad number ${JSON.stringify(text.slice(this.i, this.i + 12))}`);
      this.i = NUMBER.lastIndex;
    } else if (text.startsWith('true', this.i)) this.i += 4;
    else if (text.startsWith('false', this.i)) this.i += 5;
    else if (text.startsWith('null', this.i)) this.i += 4;
    else return this.at(this.found());
    this.expect = Expect.AfterValue;
    return undefined;
  }

  /** Past a string starting at `i` (a `"`), or the error inside it. */
  private string(): JsonSyntaxError | undefined {
    const text = this.text;
    this.i++;
    while (this.i < this.n) {
      const c = text.charCodeAt(this.i);
      if (c === 0x22) {
        this.i++;
        return undefined;
      }
      if (c === 0x5c) {
        this.i++;
        if (this.i < this.n && text[this.i] === 'u') {
          HEX4.lastIndex = this.i + 1;
          if (!HEX4.test(text)) return this.at('bad \\u escape: four hex digits must follow');
          this.i += 5;
        } else if (this.i < this.n && ESCAPES.has(text[this.i])) this.i++;
        else return this.at(`bad escape ${JSON.stringify(`\\${text[this.i] ?? ''}`)}`);
        continue;
      }
      if (c < 0x20) return this.at('control character in a string (write it as an escape such as \\n)');
      this.i++;
    }
    return this.at('unterminated string (no closing ")', true);
  }
}
