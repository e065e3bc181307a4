import { calendarPeriodText } from '@rl/client';
import type { Command } from 'commander';
import { stringify } from 'yaml';
import { adminClient, type GlobalOptions } from '../connection.js';
import { invalidInput } from '../exit-codes.js';
import { printJson, printLines, table } from '../output.js';
import { auditAction, changeSummary } from '../../policy/policy-changes.js';
import { budgetText, leaseComment, leaseText } from '../policy-lease.js';
import { ROLLOUT_PERCENT } from '../../schema/policy.js';

/** `rl policies list|get|delete|versions|audit|rollout|rollback`: the policy API, one call each. */
export function registerPolicyCommands(program: Command): void {
  const policies = program.command('policies').description('read and change policies one at a time (rl apply: many, from files)');
  // Two halves, in the order the help lists them.
  registerCurrentCommands(policies);
  registerHistoryCommands(policies);
}

const globals = (cmd: Command): GlobalOptions => cmd.optsWithGlobals<GlobalOptions>();

/** list, get, delete: the current policies. */
function registerCurrentCommands(policies: Command): void {
  policies
    .command('list')
    .description('every policy, sorted by policy_id')
    .action(async (_o: unknown, cmd: Command) => {
      const g = globals(cmd);
      const list = await adminClient(g).listPolicies();
      if (g.json) return printJson(list);
      if (list.length === 0) return printLines(['no policies']);
      printLines(
        table(
          ['policy_id', 'version', 'enabled', 'mode', 'algorithm', 'limit', 'window', 'action', 'rollout', 'priority', 'lease', 'budget'],
          list.map((p) => {
            const alg = (p.algorithm ?? {}) as Record<string, unknown>;
            return [
              p.policy_id,
              p.version,
              p.enabled,
              p.enforcement_mode,
              alg.type,
              alg.limit ?? alg.max_concurrency,
              alg.window ?? alg.quota_period ?? calendarPeriodText(p.algorithm),
              p.action,
              `${String(p.rollout_percent)}%`,
              p.priority,
              leaseText(p),
              budgetText(p),
            ];
          }),
        ),
      );
    });

  policies
    .command('get <policy_id>')
    .description('one policy (YAML, ready for rl apply, under a comment with its lease and budget; --json for JSON)')
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const g = globals(cmd);
      const policy = await adminClient(g).getPolicy(id);
      if (g.json) return printJson(policy);
      process.stdout.write(leaseComment(policy) + stringify(policy));
    });

  policies
    .command('delete <policy_id>')
    .description('delete a policy (its versions and audit stay readable)')
    .option('--if-match <version>', 'only if the current version is this one (else 409)')
    .action(async (id: string, o: { ifMatch?: string }, cmd: Command) => {
      const g = globals(cmd);
      const result = await adminClient(g).deletePolicy(id, { ifMatch: versionOption('--if-match', o.ifMatch) });
      if (g.json) return printJson(result);
      printLines([`deleted ${id}`]);
    });
}

/** versions, audit, rollout, rollback: a policy's history and the changes made from it. */
function registerHistoryCommands(policies: Command): void {
  policies
    .command('versions <policy_id>')
    .description('every stored version of a policy, oldest first')
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const g = globals(cmd);
      const versions = await adminClient(g).versions(id);
      if (g.json) return printJson(versions);
      printLines(
        table(
          ['version', 'created_at', 'enabled', 'limit', 'window', 'rollout'],
          versions.map((v) => {
            const alg = (v.snapshot?.algorithm ?? {}) as Record<string, unknown>;
            return [v.version, v.created_at, v.snapshot?.enabled, alg.limit ?? alg.max_concurrency, alg.window ?? alg.quota_period ?? (v.snapshot ? calendarPeriodText(v.snapshot.algorithm) : undefined), `${String(v.snapshot?.rollout_percent)}%`];
          }),
        ),
      );
    });

  policies
    .command('audit <policy_id>')
    .description('who changed a policy, when, and which fields, oldest first')
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const g = globals(cmd);
      const entries = await adminClient(g).audit(id);
      if (g.json) return printJson(entries);
      printLines(table(['version', 'action', 'changed_by', 'changed_at', 'changes'], entries.map((e) => [e.version, auditAction(e), e.changed_by, e.changed_at, changeSummary(e.old_value, e.new_value)])));
    });

  policies
    .command('rollout <policy_id> <percent>')
    .description(`set rollout_percent (${ROLLOUT_PERCENT.minimum}-${ROLLOUT_PERCENT.maximum}): the share of identities the policy applies to`)
    .option('--if-match <version>', 'only if the current version is this one (else 409)')
    .action(async (id: string, percentText: string, o: { ifMatch?: string }, cmd: Command) => {
      const g = globals(cmd);
      const percent = integerArgument('percent', percentText, ROLLOUT_PERCENT.minimum, ROLLOUT_PERCENT.maximum);
      const policy = await adminClient(g).rollout(id, percent, { ifMatch: versionOption('--if-match', o.ifMatch) });
      if (g.json) return printJson(policy);
      printLines([`${id}: rollout ${policy.rollout_percent}% (version ${policy.version})`]);
    });

  policies
    .command('rollback <policy_id> <version>')
    .description("make a new version whose content is an earlier version's")
    .option('--if-match <version>', 'only if the current version is this one (else 409)')
    .action(async (id: string, versionText: string, o: { ifMatch?: string }, cmd: Command) => {
      const g = globals(cmd);
      const target = integerArgument('version', versionText, 1, Number.MAX_SAFE_INTEGER);
      const policy = await adminClient(g).rollback(id, target, { ifMatch: versionOption('--if-match', o.ifMatch) });
      if (g.json) return printJson(policy);
      printLines([`${id}: rolled back to the content of version ${target}, now version ${policy.version}`]);
    });
}

export function integerArgument(name: string, text: string, min: number, max: number): number {
  const n = /^[0-9]{1,16}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw invalidInput(`${name}: must be an integer from ${min} to ${max}, got ${JSON.stringify(text)}`);
  return n;
}

function versionOption(flag: string, text: string | undefined): number | undefined {
  return text === undefined ? undefined : integerArgument(flag, text.replace(/^W\/|"/g, ''), 1, Number.MAX_SAFE_INTEGER);
}
