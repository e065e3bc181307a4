import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { Metrics } from '../../src/observability/metrics.js';
import { aggregateGroupMetrics } from '../../src/workers/aggregate-metrics.js';
import { REPO_ROOT } from '../support/server-process.js';

/**
 * deploy/: the Prometheus rules pass their unit tests under promtool (a missing promtool fails this
 * suite: .ci/run installs Debian's `prometheus` package), and the rules and the Grafana dashboard name
 * only series the server exports, so neither can watch a metric that was renamed or never existed.
 */
const RULES = join(REPO_ROOT, 'deploy/prometheus/rl-rules.yml');
const RULE_TESTS = join(REPO_ROOT, 'deploy/prometheus/rl-rules.test.yml');
const DASHBOARD = join(REPO_ROOT, 'deploy/grafana/rl-dashboard.json');

async function promtool(...args: string[]): Promise<string> {
  try {
    const { stdout, stderr } = await promisify(execFile)('promtool', args, { cwd: REPO_ROOT });
    return stdout + stderr;
  } catch (error) {
    const e = error as NodeJS.ErrnoException & { stdout?: string; stderr?: string };
    if (e.code === 'ENOENT') throw new Error('promtool is not installed: apt-get install prometheus (.ci/run installs it when missing)');
    throw new Error(`promtool ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

/**
 * Every series name a server (in Redis mode: with each counter store master's series) or a worker
 * group's primary puts on /metrics (histograms with their suffixes).
 */
async function exportedNames(): Promise<Set<string>> {
  const server = new Metrics();
  server.watchCounterStoreMasters(() => []);
  const texts = [await server.exposition(), await aggregateGroupMetrics([], { workers: 1, restarts: 0 }).metrics()];
  const names = new Set<string>();
  for (const text of texts) {
    for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
      names.add(name);
      if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
    }
  }
  return names;
}

/** Metric names in a PromQL expression: rl_*, process_* and nodejs_* series, and rl:* recorded ones. */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\b(?:rl|process|nodejs)_[a-z0-9_]+|\brl:[a-z0-9_:]+/g)].map((m) => m[0]);
}

interface Rule {
  record?: string;
  alert?: string;
  expr: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

const rules = (): Rule[] => (parse(readFileSync(RULES, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);

interface Panel {
  type: string;
  title: string;
  targets?: { expr: string }[];
}

const dashboardExprs = (): { title: string; expr: string }[] =>
  (JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[] }).panels.flatMap((p) => (p.targets ?? []).map((t) => ({ title: p.title, expr: t.expr })));

describe('deploy/: Prometheus rules and the Grafana dashboard', function () {
  this.timeout(60_000);

  it('the rules load and pass their unit tests (promtool test rules)', async () => {
    expect(await promtool('check', 'rules', RULES)).to.match(/SUCCESS/);
    expect(await promtool('test', 'rules', RULE_TESTS)).to.match(/SUCCESS/);
  });

  it('every alert has a severity, a summary and a runbook line, and a unit test', () => {
    const tested = new Set(
      (parse(readFileSync(RULE_TESTS, 'utf8')) as { tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[] }).tests.flatMap((t) =>
        (t.alert_rule_test ?? []).filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname),
      ),
    );
    const alerts = rules().filter((r) => r.alert !== undefined);
    expect(alerts.length).to.be.greaterThan(0);
    for (const rule of alerts) {
      expect(rule.labels?.severity, rule.alert).to.be.oneOf(['warning', 'critical']);
      expect(rule.annotations?.summary, rule.alert).to.be.a('string').that.is.not.empty;
      expect(rule.annotations?.runbook, rule.alert).to.be.a('string').that.is.not.empty;
      expect(tested.has(rule.alert!), `${rule.alert} fires in a unit test`).to.equal(true);
    }
  });

  it('the rules name only series the server exports, and recorded series they define', async () => {
    const exported = await exportedNames();
    const recorded = new Set(rules().flatMap((r) => (r.record ? [r.record] : [])));
    for (const rule of rules()) {
      for (const name of metricNames(rule.expr)) {
        const known = exported.has(name) || recorded.has(name);
        expect(known, `${rule.alert ?? rule.record}: ${name} is not exported`).to.equal(true);
      }
    }
  });

  it('the dashboard queries only series the server exports, in valid PromQL', async () => {
    const exported = await exportedNames();
    const exprs = dashboardExprs();
    expect(exprs.length).to.be.greaterThan(10);
    for (const { title, expr } of exprs) {
      const names = metricNames(expr);
      expect(names, `${title}: ${expr}`).to.not.be.empty;
      for (const name of names) expect(exported.has(name), `${title}: ${name} is not exported`).to.equal(true);
    }
    // promtool parses each query as a recording rule, with Grafana's variables as Prometheus would see them.
    const dir = mkdtempSync(join(tmpdir(), 'rl-grafana-'));
    try {
      const file = join(dir, 'queries.yml');
      const asRules = exprs.map(({ expr }, i) => ({ record: `grafana:query_${i}`, expr: expr.replaceAll('$__rate_interval', '5m').replaceAll('$job', '.+') }));
      writeFileSync(file, JSON.stringify({ groups: [{ name: 'grafana', rules: asRules }] }));
      expect(await promtool('check', 'rules', file)).to.match(/SUCCESS/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
