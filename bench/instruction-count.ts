/**
 * Instructions per in-process decision, counted by valgrind's callgrind: scenario 4's workload (memory store,
 * a fixed clock), `decideNow('check')` synchronously. Not part of `npm run bench` or `npm test`; by hand, in
 * each tree to compare (BENCHMARKS.md, "Fifth round"):
 *
 *   npx tsx bench/instruction-count.ts [--recorder] [--mode decide|match|consume] [--warm 200000] [--calls 100000] [--by-function]
 *
 * Timing cannot settle a few per cent here: the same tree's time per decision moves by ±25 % between
 * processes on a shared machine. An instruction count does not move with the machine's load, and with V8 made
 * deterministic (no concurrent compilation, single-threaded GC, fixed seeds, a young generation large enough
 * that no collection falls inside the count) two runs of one tree agree to within 0.2 %. It does not see
 * cache misses or branch mispredictions: a change that trades instructions for memory traffic needs timing.
 *
 * `match`: the matcher alone; `consume`: the memory store's consume alone. `--by-function`: also each
 * function's own instructions per call, the 20 largest (V8 writes where it put each compiled JavaScript
 * function, `--perf-basic-prof`; what V8 inlined counts in the function it was inlined into). Needs
 * `valgrind` (Debian's package).
 */
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const V8_DETERMINISTIC = ['--expose-gc', '--min-semi-space-size=256', '--max-semi-space-size=256', '--no-concurrent-recompilation', '--single-threaded-gc', '--random-seed=1', '--hash-seed=1'];

/** The measured process: warms up, then runs the counted calls between the files its parent waits on. */
async function child(dir: string): Promise<void> {
  const { MemoryCounterStore } = await import('../src/counters/memory-store.js');
  const { DecisionService } = await import('../src/decision/decision-service.js');
  const { parseRequestContext } = await import('../src/model/request-context.js');
  const { LiveMatcher } = await import('../src/matching/live-matcher.js');
  const { Analytics } = await import('../src/analytics/analytics.js');
  const { Metrics } = await import('../src/observability/metrics.js');
  const { ObservabilityRecorder } = await import('../src/analytics/recorder.js');
  const { generateWorkload, zipfSequence } = await import('./lib/workload.js');
  const workload = generateWorkload(10, 10_000);
  let now = 1_800_000_000_000;
  const clock = (): number => now;
  const recorder = process.argv.includes('--recorder') ? new ObservabilityRecorder(new Metrics(), new Analytics()) : undefined;
  const matcher = new LiveMatcher(workload.policies);
  const store = new MemoryCounterStore({ now: clock });
  const decisions = new DecisionService({ policies: matcher, counters: store, keyPrefix: 'rl:', recorder, now: clock });
  const contexts = workload.bodies.map((body) => parseRequestContext(body));
  const sequence = zipfSequence(10_000, 1 << 16, 1);
  const mask = sequence.length - 1;
  const mode = arg('mode', 'decide');
  const spec = matcher.current().match(contexts[0], 'rate', now).enforce!.compiled.spec;
  const keys = contexts.map((_, k) => [`count:${k}`]);
  const one: (k: number) => unknown =
    mode === 'match' ? (k) => matcher.current().match(contexts[k], 'rate', now)
    : mode === 'consume' ? (k) => store.sync.consume(keys[k], spec as never, 1, now)
    : (k) => decisions.decideNow('check', contexts[k]);
  // One function for the warm-up and the count, so it is compiled before the count starts.
  const run = (calls: number): void => {
    for (let i = 0; i < calls; i++) {
      if ((i & 1023) === 0) now += 1;
      one(sequence[i & mask]);
    }
  };
  const warm = Number(arg('warm', '200000'));
  for (let r = 0; r < 10; r++) run(warm / 10);
  (globalThis as { gc?: () => void }).gc!();
  const waitFor = (name: string): void => {
    while (!existsSync(join(dir, name))) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
  };
  writeFileSync(join(dir, 'ready'), '');
  waitFor('go');
  run(Number(arg('calls', '100000')));
  writeFileSync(join(dir, 'done'), '');
  waitFor('exit');
}

const byFunction = process.argv.includes('--by-function');

/** Each function's own cost in a callgrind dump (the lines after `calls=` are a callee's inclusive cost, not counted). */
function selfCosts(text: string): Map<string, number> {
  const names = new Map<string, string>();
  const costs = new Map<string, number>();
  let current = '';
  let callCost = false;
  for (const line of text.split('\n')) {
    const named = /^(c?fn)=\((\d+)\)(?: (.*))?$/.exec(line);
    if (named) {
      if (named[3] !== undefined) names.set(named[2], named[3]);
      if (named[1] === 'fn') current = named[2];
      continue;
    }
    if (line.startsWith('calls=')) {
      callCost = true;
      continue;
    }
    if (!/^[0-9+\-*]/.test(line)) continue;
    if (callCost) {
      callCost = false;
      continue;
    }
    const name = names.get(current) ?? current;
    costs.set(name, (costs.get(name) ?? 0) + Number(line.split(' ')[1] ?? 0));
  }
  return costs;
}

/** The largest own costs per call, JIT code named through V8's perf map (callgrind names it by address). */
function printByFunction(costs: Map<string, number>, perfMap: string, calls: number): void {
  const code = perfMap
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [start, size, ...name] = line.split(' ');
      return { start: parseInt(start, 16), end: parseInt(start, 16) + parseInt(size, 16), name: name.join(' ') };
    })
    .sort((a, b) => a.start - b.start);
  const nameOf = (fn: string): string => {
    const address = /^0x([0-9a-f]+)/.exec(fn);
    if (!address) return fn;
    const at = parseInt(address[1], 16);
    let lo = 0;
    let hi = code.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (code[mid].start <= at) lo = mid + 1;
      else hi = mid - 1;
    }
    return hi >= 0 && at < code[hi].end ? code[hi].name : fn;
  };
  const byName = new Map<string, number>();
  for (const [fn, cost] of costs) byName.set(nameOf(fn), (byName.get(nameOf(fn)) ?? 0) + cost);
  for (const [name, cost] of [...byName].sort((a, b) => b[1] - a[1]).slice(0, 20)) console.log(`${(cost / calls).toFixed(1).padStart(8)}  ${name.slice(0, 140)}`);
}

async function parent(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-instructions-'));
  const calls = Number(arg('calls', '100000'));
  const script = fileURLToPath(import.meta.url);
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const until = async (name: string) => {
    while (!existsSync(join(dir, name))) await sleep(500);
  };
  const proc = spawn(
    'valgrind',
    ['--tool=callgrind', '--smc-check=all', `--callgrind-out-file=${join(dir, 'cg.%p')}`, process.execPath, ...V8_DETERMINISTIC, ...(byFunction ? ['--perf-basic-prof'] : []), '--import', 'tsx', script, '--child', dir, ...process.argv.slice(2)],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  proc.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', resolve));
  await Promise.race([until('ready'), exited.then((code) => Promise.reject(new Error(`the counted process ended (${code}) before it was ready:\n${stderr.slice(-2000)}`)))]);
  execFileSync('callgrind_control', ['-z', String(proc.pid)], { stdio: 'ignore' });
  writeFileSync(join(dir, 'go'), '');
  await until('done');
  execFileSync('callgrind_control', ['-d', String(proc.pid)], { stdio: 'ignore' });
  writeFileSync(join(dir, 'exit'), '');
  await exited;
  const dump = readdirSync(dir).find((name) => name.startsWith('cg.') && name.endsWith('.1'));
  const text = dump && readFileSync(join(dir, dump), 'utf8');
  const summary = text && /^summary: (\d+)/m.exec(text);
  rmSync(dir, { recursive: true, force: true });
  const perfMap = `/tmp/perf-${proc.pid}.map`;
  if (byFunction && text && existsSync(perfMap)) {
    printByFunction(selfCosts(text), readFileSync(perfMap, 'utf8'), calls);
    rmSync(perfMap, { force: true });
  }
  if (!summary) throw new Error('callgrind wrote no dump for the counted calls');
  console.log(`${arg('mode', 'decide')}${process.argv.includes('--recorder') ? ', recorder on' : ''}: ${Math.round(Number(summary[1]) / calls)} instructions per call`);
}

const childAt = process.argv.indexOf('--child');
void (childAt >= 0 ? child(process.argv[childAt + 1]) : parent());
