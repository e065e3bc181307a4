import type { Command } from 'commander';
import type { Explanation } from '@rl/client';
import { adminClient, type GlobalOptions } from '../connection.js';
import { invalidInput } from '../exit-codes.js';
import { printJson, printLines, table } from '../output.js';
import { addContextOptions, contextFrom, type ContextOptions } from './decisions.js';

/**
 * `rl explain` with a RequestContext as `rl check` takes it: which policy of each layer would decide it,
 * and why each other candidate would not (POST /rl/v1/explain; nothing is counted). docs/matching.md.
 */

const DECISIONS = ['check', 'refund', 'acquire', 'release'] as const;
type ExplainedDecision = (typeof DECISIONS)[number];

export function registerExplainCommand(program: Command): void {
  const cmd = program.command('explain').description('show which policy of each layer would decide a request, and why the others would not (counts nothing)');
  addContextOptions(cmd, 'ignored: the match does not depend on it')
    .option('--decision <kind>', `the decision explained: ${DECISIONS.join(', ')} (default check)`)
    .action(async (o: ContextOptions & { decision?: string }, c: Command) => {
      const g = c.optsWithGlobals<GlobalOptions>();
      const decision = o.decision ?? 'check';
      if (!(DECISIONS as readonly string[]).includes(decision)) throw invalidInput(`--decision: must be one of ${DECISIONS.join(', ')}, got ${JSON.stringify(decision)}`);
      const context = contextFrom(o, 'check');
      const explanation = await adminClient(g).explain(context as Record<string, unknown>, { decision: decision as ExplainedDecision });
      if (g.json) return printJson(explanation);
      printLines(renderExplanation(explanation));
    });
}

/** Per layer: its winner, then every candidate in winner order. */
export function renderExplanation(explanation: Explanation): string[] {
  if (explanation.layers.length === 0) return ['no policy (that this credential may read) could decide this request'];
  const lines: string[] = [];
  for (const layer of explanation.layers) {
    if (lines.length > 0) lines.push('');
    lines.push(`layer ${layer.layer}: ${layer.winner === null ? 'no enforcing policy covers the request' : `${layer.winner} decides`}`);
    const rows = layer.candidates.map((c) => [c.policy_id, c.covers ? 'yes' : 'no', c.why_not, c.specificity, c.priority, c.wins ? 'yes' : '']);
    lines.push(...table(['policy', 'covers', 'why_not', 'specificity', 'priority', 'wins'], rows).map((l) => `  ${l}`));
  }
  return lines;
}
