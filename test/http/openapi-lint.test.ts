import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { createApp } from '../../src/http/app.js';
import { Readiness } from '../../src/lifecycle/readiness.js';
import { OPENAPI_PATH, openApiRoutes } from '../../src/http/routes/openapi.js';
import { DecisionService } from '../../src/decision/decision-service.js';
import { MemoryCounterStore } from '../../src/counters/memory-store.js';
import { LiveMatcher } from '../../src/matching/live-matcher.js';
import { serve } from '../support/http.js';

/**
 * The served OpenAPI document under a linter nobody here wrote (issue 24): Redocly CLI's `recommended`
 * ruleset must report no error and no warning.
 */
const REDOCLY = join(dirname(createRequire(import.meta.url).resolve('@redocly/cli/package.json')), 'bin', 'cli.js');

describe('OpenAPI document under `redocly lint --extends recommended`', function () {
  this.timeout(60_000);

  it('has zero errors and zero warnings', async () => {
    const counters = new MemoryCounterStore({ sweepIntervalMs: 0 });
    const decisions = new DecisionService({ policies: new LiveMatcher(), counters, keyPrefix: 't:' });
    const server = await serve(createApp({ decisions, readiness: new Readiness(), maxBodyBytes: 1024, publicRouters: [openApiRoutes()] }));
    // The linter runs in an empty directory, so no redocly.yaml of anyone's can relax the rules.
    const dir = mkdtempSync(join(tmpdir(), 'rl-redocly-'));
    try {
      const response = await fetch(`${server.url}${OPENAPI_PATH}`);
      expect(response.status).to.equal(200);
      writeFileSync(join(dir, 'openapi.json'), await response.text());
      const lint = promisify(execFile)(process.execPath, [REDOCLY, 'lint', '--extends', 'recommended', '--format', 'json', 'openapi.json'], {
        cwd: dir,
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
        maxBuffer: 16 * 1024 * 1024,
      });
      // It exits 1 when it finds an error; the report on stdout says which.
      const { stdout } = await lint.catch((error: { stdout?: string; stderr?: string }) => {
        if (!error.stdout) throw error;
        return { stdout: error.stdout };
      });
      const report = JSON.parse(stdout) as { totals: { errors: number; warnings: number }; problems: { ruleId: string; message: string }[] };
      const problems = report.problems.map((p) => `${p.ruleId}: ${p.message}`);
      expect(problems).to.deep.equal([]);
      expect(report.totals).to.include({ errors: 0, warnings: 0 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await server.close();
      await counters.close();
    }
  });
});
