/**
 * Sizes that keep rooms readable (docs/architecture.md "Floors"): no file of src/ or lua/ over 500 lines,
 * at most three over 400, and no function or method of src/ over 80 lines. Functions are read with the
 * TypeScript parser, so a brace inside a string or a comment cannot miscount them.
 */
import { expect } from 'chai';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const MAX_FILE_LINES = 500;
const LARGE_FILE_LINES = 400;
const MAX_LARGE_FILES = 3;
const MAX_FUNCTION_LINES = 80;

function filesUnder(dir: string, extension: RegExp): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return filesUnder(path, extension);
    return extension.test(entry.name) ? [path] : [];
  });
}

const lineCount = (text: string) => text.split('\n').length - (text.endsWith('\n') ? 1 : 0);

/** `file:line name (n lines)` for every function-like node of `path` longer than the bound. */
function longFunctions(path: string): string[] {
  const text = readFileSync(path, 'utf8');
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = last - first + 1;
      if (lines > MAX_FUNCTION_LINES) {
        const name = node.name && ts.isIdentifier(node.name) ? node.name.text : '(anonymous)';
        found.push(`${relative(ROOT, path)}:${first + 1} ${name} (${lines} lines)`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('sizes of src/ and lua/', () => {
  const files = [...filesUnder(join(ROOT, 'src'), /\.ts$/), ...filesUnder(join(ROOT, 'lua'), /\.lua$/)];
  const sized = files.map((path) => ({ path: relative(ROOT, path), lines: lineCount(readFileSync(path, 'utf8')) }));

  it(`no file over ${MAX_FILE_LINES} lines, at most ${MAX_LARGE_FILES} over ${LARGE_FILE_LINES}`, () => {
    expect(sized.filter((f) => f.lines > MAX_FILE_LINES).map((f) => `${f.path} (${f.lines})`)).to.deep.equal([]);
    const large = sized.filter((f) => f.lines > LARGE_FILE_LINES).map((f) => `${f.path} (${f.lines})`);
    expect(large.length, `over ${LARGE_FILE_LINES} lines: ${large.join(', ')}`).to.be.at.most(MAX_LARGE_FILES);
  });

  it(`no function of src/ over ${MAX_FUNCTION_LINES} lines`, () => {
    const long = files.filter((path) => path.endsWith('.ts')).flatMap(longFunctions);
    expect(long).to.deep.equal([]);
  });
});
