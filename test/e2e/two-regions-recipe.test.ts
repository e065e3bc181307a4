import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { REPO_ROOT, processAlive } from '../support/server-process.js';

/**
 * examples/two-regions.ts, the README's `npm run example:regions`, as a user runs it: started as a
 * process, its printed URLs read, checks sent to both regions until the global limit is used (together
 * they admit exactly the limit, never more), then SIGINT (Ctrl-C): the script exits 0 and every process
 * it printed is gone. Counts only, no timing assertion (waits have hang guards).
 */
describe('examples/two-regions.ts: two regions on one machine', function () {
  this.timeout(240_000);
  const LIMIT = 40;
  /** A window this run never sees end: 1 h, or 1 day when the hour is nearly over. */
  const window = 3_600_000 - (Date.now() % 3_600_000) > 10 * 60_000 ? '1h' : '1d';
  let script: ChildProcess | undefined;
  let output = '';
  let exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  // A failed test still stops the recipe as a user would (Ctrl-C), so it stops its children; SIGKILL if that hangs.
  after(async () => {
    if (!script || script.exitCode !== null || script.signalCode !== null) return;
    script.kill('SIGINT');
    const timer = setTimeout(() => script!.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  });

  /** Resolves with the output once `pattern` appears in it; fails if the script exits first. */
  const printed = (pattern: RegExp, guardMs = 120_000) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const timer = setTimeout(() => done(new Error(`not printed within ${guardMs} ms: ${pattern}\n${output}`)), guardMs);
      const look = () => {
        const match = output.match(pattern);
        if (match) done(undefined, match);
      };
      const onExit = () => done(new Error(`the script exited before printing ${pattern}\n${output}`));
      const done = (error?: Error, match?: RegExpMatchArray) => {
        clearTimeout(timer);
        script!.stdout!.off('data', look);
        script!.off('exit', onExit);
        if (error) reject(error);
        else resolve(match!);
      };
      script!.stdout!.on('data', look);
      script!.once('exit', onExit);
      look();
    });

  it('admits exactly the limit across both regions and leaves no process behind on Ctrl-C', async () => {
    script = spawn(process.execPath, ['--import', 'tsx', 'examples/two-regions.ts', '--limit', String(LIMIT), '--window', window], {
      cwd: REPO_ROOT,
      // Generous lease deadlines for a loaded machine (inherited by the servers): a slow refill waits instead of refusing.
      env: { ...process.env, RL_LEASE_MAX_WAIT_MS: '5000', RL_COUNTERSTORE_TIMEOUT_MS: '3000', RL_GLOBAL_COUNTERSTORE_TIMEOUT_MS: '5000' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    script.stdout!.setEncoding('utf8');
    script.stderr!.setEncoding('utf8');
    script.stdout!.on('data', (chunk: string) => (output += chunk));
    script.stderr!.on('data', (chunk: string) => (output += chunk));
    exited = new Promise((resolve) => script!.once('exit', (code, signal) => resolve({ code, signal })));

    await printed(/Ctrl-C stops everything/);
    const regions = [...output.matchAll(/^ {2}(\S+) +HTTP (http:\/\/127\.0\.0\.1:\d+) +dashboard (http:\/\/127\.0\.0\.1:\d+\/dashboard\/)/gm)].map((m) => ({
      name: m[1],
      url: m[2],
      dashboard: m[3],
    }));
    expect(regions.map((r) => r.name)).to.deep.equal(['eu-west', 'us-east']);
    const pids = [...output.match(/^Processes: (.*);/m)![1].matchAll(/ (\d+)(?:,|$)/g)].map((m) => Number(m[1]));
    expect(pids).to.have.length(5);
    for (const pid of pids) expect(processAlive(pid), `process ${pid} while the recipe runs`).to.equal(true);
    expect(output).to.include('curl -s -X POST "$url/rl/v1/check"');

    // The dashboard of each region answers.
    for (const r of regions) expect((await fetch(r.dashboard)).status).to.equal(200);

    // Checks alternate between the regions, a few at once in each, until the limit is used.
    const admitted: Record<string, number> = { 'eu-west': 0, 'us-east': 0 };
    let refusedAfterLimit = 0;
    for (let round = 0; round < LIMIT * 20 && refusedAfterLimit < 10; round++) {
      const answers = await Promise.all(
        regions.flatMap((r) =>
          Array.from({ length: 3 }, async () => {
            const response = await fetch(`${r.url}/rl/v1/check`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ resource: 'shared', user_id: 'demo' }),
            });
            expect(response.status).to.equal(200);
            return { region: r.name, decision: (await response.json()) as { allowed: boolean; reason: string; matched_policy_id: string; metadata: Record<string, string> } };
          }),
        ),
      );
      for (const { region, decision } of answers) {
        expect(decision.matched_policy_id).to.equal('one-limit');
        expect(decision.metadata).to.deep.equal({ budget: 'global', region });
        if (decision.allowed) admitted[region]++;
        else if (admitted['eu-west'] + admitted['us-east'] === LIMIT) {
          expect(decision.reason).to.equal('limit_exceeded');
          refusedAfterLimit++;
        }
      }
      expect(admitted['eu-west'] + admitted['us-east'], 'never over the limit').to.be.at.most(LIMIT);
    }
    expect(admitted['eu-west'] + admitted['us-east']).to.equal(LIMIT);
    expect(refusedAfterLimit).to.be.at.least(10);
    // Both regions took part in spending the one limit.
    expect(admitted['eu-west']).to.be.above(0);
    expect(admitted['us-east']).to.be.above(0);

    script.kill('SIGINT');
    expect(await exited).to.deep.equal({ code: 0, signal: null });
    expect(output).to.include('nothing left running');
    for (const pid of pids) expect(processAlive(pid), `process ${pid} after Ctrl-C`).to.equal(false);
  });
});
