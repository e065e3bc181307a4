/**
 * Positions in a text for messages about it: 1-based line and column of an offset, and the line itself
 * with a caret under the column, as compilers print them. Used for JSON and YAML errors in policy files
 * and for JSON errors in request bodies.
 */
export interface LineColumn {
  line: number;
  column: number;
}

export function lineColumnOf(text: string, offset: number): LineColumn {
  const at = Math.max(0, Math.min(offset, text.length));
  let line = 1;
  let lineStart = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < at; i = text.indexOf('\n', i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { line, column: at - lineStart + 1 };
}

/** Longest stretch of a line shown: a minified file is one line, and the caret must stay readable. */
const SHOWN = 100;

/** The line of `position` and a caret under its column, each indented by `indent`. */
export function caretExcerpt(text: string, position: LineColumn, indent = '  '): string {
  const start = nthLineStart(text, position.line);
  const end = text.indexOf('\n', start);
  let line = text.slice(start, end === -1 ? text.length : end).replace(/\r$/, '');
  let column = position.column - 1;
  let prefix = '';
  if (line.length > SHOWN) {
    const from = Math.max(0, Math.min(column - SHOWN / 2, line.length - SHOWN));
    prefix = from > 0 ? '…' : '';
    line = `${prefix}${line.slice(from, from + SHOWN)}${from + SHOWN < line.length ? '…' : ''}`;
    column = column - from + prefix.length;
  }
  // Tabs stay tabs under the line, so the caret lines up however wide the reader's tabs are.
  const under = line.slice(0, column).replace(/[^\t]/g, ' ');
  return `${indent}${line}\n${indent}${under}^`;
}

function nthLineStart(text: string, line: number): number {
  let start = 0;
  for (let l = 1; l < line; l++) {
    const nl = text.indexOf('\n', start);
    if (nl === -1) return text.length;
    start = nl + 1;
  }
  return start;
}
