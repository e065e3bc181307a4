/**
 * The floors of src/: docs/architecture.md's "Floors" list is the one declaration (each item a floor,
 * from the ground up, naming its rooms in backticks). A room is a folder or a file directly under src/.
 * Every room stands on exactly one floor, and a room imports only rooms on lower floors, so no import
 * runs up or sideways and src/ has no circle between rooms. Imports are read as text: import/export
 * ... from, bare imports and import() of a literal path.
 */
import { expect } from 'chai';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SRC = join(ROOT, 'src');
const IMPORT = /^\s*(?:import|export)\b[^'"]*?\bfrom\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm;

/** The rooms of each floor, ground first, as the doc's "Floors" list names them. */
function declaredFloors(): string[][] {
  const doc = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8');
  const start = doc.indexOf('\n## Floors\n');
  expect(start, 'docs/architecture.md has a "## Floors" section').to.be.greaterThan(-1);
  const section = doc.slice(start + 1).split(/\n## /)[0];
  const items = section.split('\n').filter((line) => /^\d+\. /.test(line));
  return items.map((line) => [...line.split(':')[0].matchAll(/`([^`]+)`/g)].map((m) => m[1]));
}

/** `agent/` for src/agent/..., `config.ts` for src/config.ts. */
function roomOf(file: string): string {
  const parts = relative(SRC, file).split(sep);
  return parts.length === 1 ? parts[0] : `${parts[0]}/`;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.m?ts$/.test(entry.name) ? [path] : [];
  });
}

/** Each import of one room by another: the importing file, the imported file, both rooms. */
function roomImports(): { from: string; to: string; fromRoom: string; toRoom: string }[] {
  return sourceFiles(SRC).flatMap((file) => {
    const text = readFileSync(file, 'utf8');
    return [...text.matchAll(IMPORT)]
      .map((m) => m[1] ?? m[2] ?? m[3])
      .filter((spec) => spec.startsWith('.'))
      .map((spec) => resolve(dirname(file), spec.replace(/\.js$/, '.ts')))
      .filter((target) => target.startsWith(SRC + sep))
      .map((target) => ({ from: relative(ROOT, file), to: relative(ROOT, target), fromRoom: roomOf(file), toRoom: roomOf(target) }))
      .filter((edge) => edge.fromRoom !== edge.toRoom);
  });
}

describe('architecture: the floors of src/', () => {
  const floors = declaredFloors();
  const floorOf = new Map(floors.flatMap((rooms, i) => rooms.map((room) => [room, i + 1] as const)));

  it('the doc lists every room of src/ on exactly one floor, and no room that is not there', () => {
    const listed = floors.flat();
    expect(listed.length, 'a room listed twice').to.equal(new Set(listed).size);
    const rooms = readdirSync(SRC, { withFileTypes: true })
      .filter((entry) => entry.isDirectory() || /\.m?ts$/.test(entry.name))
      .map((entry) => (entry.isDirectory() ? `${entry.name}/` : entry.name));
    expect([...listed].sort()).to.deep.equal(rooms.sort());
  });

  it('a room imports only rooms on lower floors', () => {
    const edges = roomImports();
    expect(edges.length, 'the imports were read').to.be.greaterThan(100);
    const upward = edges
      .filter((edge) => (floorOf.get(edge.toRoom) ?? Infinity) >= (floorOf.get(edge.fromRoom) ?? 0))
      .map((edge) => `${edge.from} (floor ${floorOf.get(edge.fromRoom)}) imports ${edge.to} (floor ${floorOf.get(edge.toRoom)})`);
    expect(upward).to.deep.equal([]);
  });
});
