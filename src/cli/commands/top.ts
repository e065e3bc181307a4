import type { Command } from 'commander';
import type { AnalyticsSummaryBody } from '@rl/client';
import { adminClient, type GlobalOptions } from '../connection.js';
import { CliError } from '../exit-codes.js';
import { printLines, table } from '../output.js';
import { integerArgument } from './policies.js';

/**
 * `rl top`: live decision analytics (GET /rl/v1/analytics/summary), redrawn every `--interval`
 * seconds like top(1), with per-second rates from the difference between two frames. It stops on
 * Ctrl-C, after `--iterations N` frames, or after one with `--once`. `--json` prints one JSON object
 * per frame (one line each), for scripts.
 */

interface TopOptions {
  interval: string;
  iterations?: string;
  once?: boolean;
  top: string;
}

export interface TopFrame {
  at: string;
  summary: AnalyticsSummaryBody;
  /** Decisions per second since the previous frame (absent on the first). */
  rate?: { total: number; allowed: number; denied: number; shadow: number; by_policy: Record<string, number> };
}

const CLEAR = '\x1b[H\x1b[2J';

export function registerTopCommand(program: Command): void {
  program
    .command('top')
    .description('live decision analytics, refreshed like top (Ctrl-C to stop)')
    .option('--interval <seconds>', 'seconds between refreshes', '2')
    .option('--iterations <n>', 'stop after this many frames')
    .option('--once', 'print one frame and exit (same as --iterations 1)')
    .option('--top <n>', 'rows of policies and tags shown', '10')
    .action(async (o: TopOptions, cmd: Command) => {
      const g = cmd.optsWithGlobals<GlobalOptions>();
      const intervalMs = integerArgument('--interval', o.interval, 1, 3600) * 1000;
      const top = integerArgument('--top', o.top, 1, 10_000);
      const frames = o.once ? 1 : o.iterations !== undefined ? integerArgument('--iterations', o.iterations, 1, Number.MAX_SAFE_INTEGER) : Infinity;
      if (o.once && o.iterations !== undefined) throw new CliError('give --once or --iterations, not both');
      const client = adminClient(g);
      const redraw = !g.json && frames > 1 && Boolean(process.stdout.isTTY);

      let stopped = false;
      let wake: () => void = () => {};
      const onSignal = (): void => {
        stopped = true;
        wake();
      };
      process.once('SIGINT', onSignal);
      try {
        let previous: { summary: AnalyticsSummaryBody; atMs: number } | undefined;
        for (let i = 0; i < frames && !stopped; i++) {
          if (i > 0) await new Promise<void>((resolve) => {
            wake = resolve;
            setTimeout(resolve, intervalMs);
          });
          if (stopped) break;
          const summary = await client.analyticsSummary(top);
          const atMs = Date.now();
          const frame = frameOf(summary, atMs, previous);
          previous = { summary, atMs };
          if (g.json) process.stdout.write(`${JSON.stringify(frame)}\n`);
          else {
            if (redraw) process.stdout.write(CLEAR);
            printLines(renderTopFrame(frame, client.url, intervalMs / 1000));
          }
        }
      } finally {
        process.removeListener('SIGINT', onSignal);
      }
    });
}

function frameOf(summary: AnalyticsSummaryBody, atMs: number, previous?: { summary: AnalyticsSummaryBody; atMs: number }): TopFrame {
  const frame: TopFrame = { at: new Date(atMs).toISOString(), summary };
  if (previous === undefined || atMs <= previous.atMs) return frame;
  const seconds = (atMs - previous.atMs) / 1000;
  const per = (now: number, before: number): number => Math.max(0, Math.round(((now - before) / seconds) * 10) / 10);
  const before = new Map(previous.summary.by_policy.map((p) => [p.policy_id, p.total]));
  const byPolicy: Record<string, number> = {};
  for (const p of summary.by_policy) byPolicy[p.policy_id] = per(p.total, before.get(p.policy_id) ?? 0);
  const s = summary;
  const b = previous.summary;
  frame.rate = { total: per(s.total, b.total), allowed: per(s.allowed, b.allowed), denied: per(s.denied, b.denied), shadow: per(s.shadow, b.shadow), by_policy: byPolicy };
  return frame;
}

function renderTopFrame(frame: TopFrame, url: string, intervalSeconds: number): string[] {
  const s = frame.summary;
  const rate = (n: number | undefined): string => (n === undefined ? '' : `  (${n}/s)`);
  const lines = [
    `rl top  ${url}  ${frame.at}  every ${intervalSeconds}s  counting since ${s.since}`,
    '',
    `decisions ${s.total}${rate(frame.rate?.total)}   allowed ${s.allowed}${rate(frame.rate?.allowed)}   denied ${s.denied}${rate(frame.rate?.denied)}   shadow ${s.shadow}${rate(frame.rate?.shadow)}`,
  ];
  const actions = Object.entries(s.by_action ?? {}).filter(([, n]) => n > 0);
  if (actions.length > 0) lines.push(`by action  ${actions.map(([a, n]) => `${a} ${n}`).join('   ')}`);
  lines.push('');
  if (s.by_policy.length === 0) lines.push('no decisions by a policy yet');
  else {
    lines.push(
      ...table(
        ['policy_id', 'total', 'rate/s', 'allowed', 'denied', 'shadow', 'denied%'],
        s.by_policy.map((p) => [p.policy_id, p.total, frame.rate?.by_policy[p.policy_id] ?? '-', p.allowed, p.denied, p.shadow, p.total > 0 ? `${((100 * p.denied) / p.total).toFixed(1)}%` : '-']),
      ),
    );
  }
  if (s.top_tags.length > 0) {
    lines.push('', ...table(['tag', 'count'], s.top_tags.map((t) => [`${t.key}=${t.value}`, t.count])));
  }
  return lines;
}
