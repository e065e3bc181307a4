/**
 * Reads a V8 .cpuprofile (node --cpu-prof) and prints where the time went:
 *   - self time per function (top N),
 *   - inclusive time per function (top N: the function or anything it called was on the CPU),
 *   - self and inclusive time per source: each src/ file, each npm package, node internals, GC.
 * Percentages are of busy time (every sample except "(idle)").
 *
 *   npx tsx bench/cpuprofile-summary.ts bench/profiles/engine.cpuprofile [--top 25]
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface Row {
  name: string;
  where: string;
  ms: number;
  pct: number;
}

export interface ProfileSummary {
  total_ms: number;
  busy_ms: number;
  self: Row[];
  inclusive: Row[];
  bySourceSelf: Row[];
  bySourceInclusive: Row[];
}

/** `src/counters/keys.ts`, `koa-body`, `node:internal`, `(garbage collector)`, ... */
export function sourceOf(frame: CallFrame): string {
  const url = frame.url;
  if (url === '') return frame.functionName.startsWith('(') ? frame.functionName : '(native)';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  if (url.startsWith('node:')) return 'node:internal';
  const repo = url.search(/\/(src|bench|test)\//);
  if (repo >= 0) return url.slice(repo + 1).replace(/\?.*$/, '');
  return url;
}

function functionKey(frame: CallFrame): { key: string; name: string; where: string } {
  const name = frame.functionName || '(anonymous)';
  // tsx emits each module on one line, so the column is what tells two functions of one file apart.
  const where = frame.url === '' ? '' : `${sourceOf(frame)}:${frame.lineNumber + 1}:${frame.columnNumber + 1}`;
  return { key: `${name}\u0000${where}`, name, where };
}

export function summarise(profile: CpuProfile, top = 25): ProfileSummary {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const self = new Map<string, Row>();
  const inclusive = new Map<string, Row>();
  const sourceSelf = new Map<string, Row>();
  const sourceInclusive = new Map<string, Row>();
  let total = 0;
  let idle = 0;
  const add = (map: Map<string, Row>, key: string, name: string, where: string, ms: number) => {
    let row = map.get(key);
    if (!row) map.set(key, (row = { name, where, ms: 0, pct: 0 }));
    row.ms += ms;
  };
  // timeDeltas[i + 1] is how long the sample i stayed on the CPU (the last one is unknown: use the mean).
  const n = profile.samples.length;
  const mean = n > 0 ? (profile.endTime - profile.startTime) / n : 0;
  for (let i = 0; i < n; i++) {
    const ms = (i + 1 < n ? profile.timeDeltas[i + 1] : mean) / 1000;
    total += ms;
    const leaf = byId.get(profile.samples[i])!;
    if (leaf.callFrame.functionName === '(idle)') {
      idle += ms;
      continue;
    }
    const f = functionKey(leaf.callFrame);
    add(self, f.key, f.name, f.where, ms);
    const source = sourceOf(leaf.callFrame);
    add(sourceSelf, source, source, '', ms);
    const seenFunctions = new Set<string>();
    const seenSources = new Set<string>();
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const frame = byId.get(id)!.callFrame;
      if (frame.functionName === '(root)') break;
      const k = functionKey(frame);
      if (!seenFunctions.has(k.key)) {
        seenFunctions.add(k.key);
        add(inclusive, k.key, k.name, k.where, ms);
      }
      const s = sourceOf(frame);
      if (!seenSources.has(s)) {
        seenSources.add(s);
        add(sourceInclusive, s, s, '', ms);
      }
    }
  }
  const busy = total - idle;
  const rank = (map: Map<string, Row>) =>
    [...map.values()]
      .map((r) => ({ ...r, ms: Math.round(r.ms * 10) / 10, pct: Math.round((r.ms / busy) * 1000) / 10 }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, top);
  return {
    total_ms: Math.round(total),
    busy_ms: Math.round(busy),
    self: rank(self),
    inclusive: rank(inclusive),
    bySourceSelf: rank(sourceSelf),
    bySourceInclusive: rank(sourceInclusive),
  };
}

/** `operations`: how many operations (decisions, requests) the profiled window did; adds µs per operation. */
export function formatSummary(title: string, s: ProfileSummary, operations?: number): string {
  const perOp = operations !== undefined && operations > 0;
  const lines = [
    `== ${title}: ${s.total_ms} ms sampled, ${s.busy_ms} ms busy (percentages are of busy time)` +
      (perOp ? `; ~${Math.round(operations).toLocaleString('en-US')} operations, ${((s.busy_ms * 1000) / operations).toFixed(2)} µs busy per operation` : ''),
  ];
  const section = (heading: string, rows: Row[]) => {
    lines.push('', heading);
    for (const r of rows) {
      const us = perOp ? `  ${((r.ms * 1000) / operations).toFixed(3).padStart(8)} µs/op` : '';
      lines.push(`  ${r.pct.toFixed(1).padStart(5)}%  ${String(r.ms).padStart(8)} ms${us}  ${r.name}${r.where ? `  (${r.where})` : ''}`);
    }
  };
  section('self time by function', s.self);
  section('self time by source (src/ file, npm package, node internals)', s.bySourceSelf);
  section('inclusive time by source (the source or anything it called)', s.bySourceInclusive);
  section('inclusive time by function', s.inclusive);
  return lines.join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const file = process.argv[2];
  if (!file) {
    console.error('usage: tsx bench/cpuprofile-summary.ts <file.cpuprofile> [--top N]');
    process.exit(2);
  }
  const topIndex = process.argv.indexOf('--top');
  const top = topIndex > 0 ? Number(process.argv[topIndex + 1]) : 25;
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  console.log(formatSummary(file, summarise(profile, top)));
}
