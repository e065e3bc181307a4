import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The benchmark harness starts, runs one scenario for a fraction of a second and writes its results as
 * JSON with the keys BENCHMARKS.md documents. No timing is asserted: this is not a benchmark run.
 */
const REPO = fileURLToPath(new URL('../', import.meta.url));

describe('bench: smoke run', function () {
  this.timeout(30_000);
  let dir: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-bench-smoke-'));
  });

  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs `bench/run.ts --smoke` and writes valid results JSON', async () => {
    const out = join(dir, 'results.json');
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        // --tsx: no tsc build of src/ first (seconds saved; `npm run bench` builds, see bench/lib/build.ts).
        ['--import', 'tsx', 'bench/run.ts', '--smoke', '--no-pin', '--tsx', '--out', out],
        { cwd: REPO, timeout: 25_000, maxBuffer: 10 * 1024 * 1024 },
        (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
    expect(code, stderr).to.equal(0);
    expect(stdout).to.match(/HTTP check, memory mode/);

    const results = JSON.parse(readFileSync(out, 'utf8'));
    expect(results).to.include.keys('schema', 'started_at', 'mode', 'machine', 'pinning', 'code', 'settings', 'scenarios', 'failures', 'all_pass');
    expect(results.mode).to.equal('smoke');
    expect(results.failures).to.deep.equal([]);
    expect(results.machine).to.include.keys('nproc', 'cpu_model', 'node', 'loadavg');
    expect(results.scenarios).to.have.length(1);

    const scenario = results.scenarios[0];
    expect(scenario).to.include.keys('id', 'key', 'name', 'subject', 'baseline', 'ratio', 'ratio_meaning', 'target', 'checks', 'pass', 'notes');
    expect(scenario.key).to.equal('http_memory');
    for (const side of [scenario.subject, scenario.baseline]) {
      expect(side).to.include.keys('name', 'throughput_per_s', 'p50_ms', 'p99_ms');
      expect(side.throughput_per_s).to.be.a('number').above(0);
      expect(side.p50_ms).to.be.a('number');
      expect(side.p99_ms).to.be.a('number');
    }
    expect(scenario.ratio).to.be.a('number');
    expect(scenario.checks).to.be.an('array').that.is.not.empty;
    for (const check of scenario.checks) {
      expect(check).to.include.keys('target', 'value', 'op', 'limit', 'pass');
      expect(check.pass).to.be.a('boolean');
    }
    expect(scenario.pass).to.be.a('boolean');
  });
});
