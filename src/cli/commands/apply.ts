import { readFileSync, writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import type { AdminClient } from '@rl/client';
import { formatProblem, validatePolicyDocument } from '../../policy/policy-file.js';
import { applyPlan, type ChangeResult } from '../apply-plan.js';
import { adminClient, type GlobalOptions } from '../connection.js';
import { CliError, EXIT_CONFLICT_OR_INVALID, EXIT_ERROR, EXIT_OK } from '../exit-codes.js';
import { printJson, printLines } from '../output.js';
import { buildPlan, pendingChanges, PLAN_KIND, type Plan } from '../plan.js';
import { loadPolicyFiles, type LoadResult } from '../policy-files.js';
import { statusHeadline } from '../report-error.js';
import { renderPlan } from '../render-plan.js';
import { storedPolicy } from '../../policy/stored-policy.js';
import { tiesAmong, type SetTie } from '../../policy-service/policy-ties.js';

/**
 * `rl validate -f`, `rl diff -f`, `rl apply -f | --plan`: policy files as the desired state.
 * Every file is read and validated before the server is asked anything, so a bad file stops the run
 * with nothing changed.
 */

interface FileOptions {
  filename: string[];
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

export function registerApplyCommands(program: Command): void {
  const globals = (cmd: Command): GlobalOptions => cmd.optsWithGlobals<GlobalOptions>();

  program
    .command('validate')
    .description('check policy files offline with the server\'s own validation (no server needed)')
    .requiredOption('-f, --filename <path>', 'a YAML/JSON file or a directory of them (repeatable)', collect, [])
    .action((o: FileOptions, cmd: Command) => {
      const g = globals(cmd);
      const loaded = loadPolicyFiles(o.filename);
      // Ties only mean something among valid policies.
      const ties = loaded.problems.length === 0 ? tiesInFiles(loaded) : [];
      if (g.json) printJson({ valid: loaded.problems.length === 0, files: loaded.files, policies: loaded.policies.map((p) => p.policy.policy_id), errors: loaded.problems, warnings: ties });
      else if (loaded.problems.length === 0) {
        printLines([`valid: ${plural(loaded.policies.length, 'policy', 'policies')} in ${plural(loaded.files.length, 'file', 'files')}`]);
        printWarnings(ties.map((t) => ({ policy_id: t.policy_id, message: t.warning.message })));
      } else printProblems(loaded);
      process.exitCode = loaded.problems.length === 0 ? EXIT_OK : EXIT_CONFLICT_OR_INVALID;
    });

  program
    .command('diff')
    .description('show what rl apply would change (nothing is changed)')
    .requiredOption('-f, --filename <path>', 'a YAML/JSON file or a directory of them (repeatable)', collect, [])
    .option('--prune', 'plan to delete policies that are on the server but in no file')
    .option('--out <plan.json>', 'also save the plan, for rl apply --plan')
    .action(async (o: FileOptions & { prune?: boolean; out?: string }, cmd: Command) => {
      const g = globals(cmd);
      const client = adminClient(g);
      const plan = await planFromFiles(client, o.filename, Boolean(o.prune), g.json);
      if (o.out) writeFileSync(o.out, `${JSON.stringify(plan, null, 2)}\n`);
      if (g.json) printJson(plan);
      else printLines(renderPlan(plan));
    });

  program
    .command('apply')
    .description('make the server hold exactly the policies in the files (updates use If-Match)')
    .option('-f, --filename <path>', 'a YAML/JSON file or a directory of them (repeatable)', collect, [])
    .option('--plan <plan.json>', 'apply a plan saved by rl diff --out, against the versions it was made with')
    .option('--prune', 'delete policies that are on the server but in no file')
    .option('--dry-run', 'print the plan and change nothing')
    .action(async (o: FileOptions & { plan?: string; prune?: boolean; dryRun?: boolean }, cmd: Command) => {
      const g = globals(cmd);
      if ((o.filename.length > 0) === (o.plan !== undefined)) throw new CliError('give either -f <file|dir> or --plan <plan.json>');
      const client = adminClient(g);
      const plan = o.plan !== undefined ? readPlan(o.plan, client.url, Boolean(o.prune)) : await planFromFiles(client, o.filename, Boolean(o.prune), g.json);
      if (!g.json) printLines(renderPlan(plan));
      if (o.dryRun || pendingChanges(plan) === 0) {
        if (g.json) printJson({ plan, dry_run: Boolean(o.dryRun), results: [], skipped: [], ok: true });
        else printLines([o.dryRun ? 'Dry run: nothing changed.' : 'Nothing to do.']);
        return;
      }
      const outcome = await applyPlan(client, plan, (r) => {
        if (g.json) return;
        printLines([resultLine(r)]);
        printWarnings((r.warnings ?? []).map((w) => ({ policy_id: r.policy_id, message: w.message })));
      });
      const ok = outcome.failed === undefined;
      if (g.json) printJson({ plan, dry_run: false, results: outcome.results, skipped: outcome.skipped, ok });
      else {
        const applied = outcome.results.filter((r) => r.ok).length;
        const lines = [`Applied ${applied} of ${pendingChanges(plan)} changes.`];
        if (outcome.skipped.length > 0) lines.push(`Not tried after the failure: ${outcome.skipped.join(', ')}.`);
        if (outcome.failed !== undefined && changedSincePlan(outcome.failed)) lines.push('Someone changed a policy since the plan was read: run rl diff again to see the current state.');
        (ok ? process.stdout : process.stderr).write(`${lines.join('\n')}\n`);
      }
      if (!ok) process.exitCode = exitCodeOf(outcome.failed!);
    });
}

/** Files → validated desired state → the server's policies → the plan. Bad files: exit 2, server untouched. */
async function planFromFiles(client: AdminClient, paths: string[], prune: boolean, json?: boolean): Promise<Plan> {
  const loaded = loadPolicyFiles(paths);
  if (loaded.problems.length > 0) {
    if (!json) printProblems(loaded);
    throw new CliError(`${plural(loaded.problems.length, 'problem', 'problems')} in the files; nothing was changed`, EXIT_CONFLICT_OR_INVALID, [], { errors: loaded.problems });
  }
  return buildPlan(client.url, loaded.policies, await client.listPolicies(), prune);
}

/**
 * A plan saved by `rl diff --out`. Its policies are validated again (the file may have been edited),
 * and it must have been made against the same server.
 */
function readPlan(path: string, url: string, prune: boolean): Plan {
  let plan: Plan;
  try {
    plan = JSON.parse(readFileSync(path, 'utf8')) as Plan;
  } catch (error) {
    throw new CliError(`${path}: cannot read the plan: ${(error as Error).message}`);
  }
  if (plan?.kind !== PLAN_KIND || !Array.isArray(plan.actions)) throw new CliError(`${path}: not a plan saved by rl diff --out (kind ${PLAN_KIND})`);
  if (sameServer(plan.url, url) === false) throw new CliError(`${path}: the plan was made against ${plan.url}, not ${url}`);
  if (prune && !plan.prune) throw new CliError(`${path}: --prune must be given to rl diff when the plan is saved, not to apply`);
  const errors: string[] = [];
  for (const a of plan.actions) {
    if (a.action !== 'create' && a.action !== 'update') continue;
    const result = validatePolicyDocument(a.policy);
    if (!result.ok) for (const e of result.errors) errors.push(`${a.policy_id}: ${e.field}: ${e.message}`);
    else if (result.policy.policy_id !== a.policy_id) errors.push(`${a.policy_id}: policy_id: the policy's id is ${result.policy.policy_id}`);
  }
  if (errors.length > 0) throw new CliError(`${path}: the plan holds invalid policies; nothing was changed`, EXIT_CONFLICT_OR_INVALID, errors);
  return plan;
}

function sameServer(a: string, b: string): boolean {
  const norm = (u: string): string => {
    try {
      return new URL(u).href.replace(/\/+$/, '');
    } catch {
      return u;
    }
  };
  return norm(a) === norm(b);
}

function resultLine(r: ChangeResult): string {
  const verb = r.action === 'create' ? 'created' : r.action === 'update' ? 'updated' : 'deleted';
  if (r.ok) return `${verb} ${r.policy_id}${r.action === 'delete' ? '' : ` (version ${r.version})`}`;
  const lines = [`failed to ${r.action} ${r.policy_id}: ${r.error?.status !== undefined ? statusHeadline(r.error.status) + ': ' : ''}${r.error?.message}`];
  for (const e of r.error?.errors ?? []) lines.push(`  ${e.field}: ${e.message}`);
  return lines.join('\n');
}

/** A refusal for a conflict or invalid input is 2 (a person must look); anything else is 1. */
function exitCodeOf(r: ChangeResult): number {
  const status = r.error?.status;
  return changedSincePlan(r) || status === 422 || status === 400 ? EXIT_CONFLICT_OR_INVALID : EXIT_ERROR;
}

/** A stale version (409), or a policy the plan read that is gone now (404 on update or delete). */
function changedSincePlan(r: ChangeResult): boolean {
  const status = r.error?.status;
  return status === 409 || (status === 404 && r.action !== 'create');
}

/** The ties among the files' policies (the server warns of the same ones on apply). */
function tiesInFiles(loaded: LoadResult): SetTie[] {
  const policies = loaded.policies.map((p) => storedPolicy(p.policy, 1, '', ''));
  return tiesAmong(policies, Date.now());
}

/** `warning: <policy>: <message>` on stderr, one a line: the change was made, but a person should look. */
function printWarnings(warnings: { policy_id: string; message: string }[]): void {
  if (warnings.length > 0) process.stderr.write(`${warnings.map((w) => `warning: ${w.policy_id}: ${w.message}`).join('\n')}\n`);
}

function printProblems(loaded: LoadResult): void {
  process.stderr.write(`${loaded.problems.map(formatProblem).join('\n')}\n`);
}

function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}
