import { changeLine } from '../policy/policy-changes.js';
import type { Plan } from './plan.js';

/** The plan as people read it: one line per policy, the changed fields of each update below it. */
export function renderPlan(plan: Plan): string[] {
  const lines: string[] = [];
  for (const a of plan.actions) {
    switch (a.action) {
      case 'create':
        lines.push(`+ create     ${a.policy_id}  (${a.source})`);
        break;
      case 'update':
        lines.push(`~ update     ${a.policy_id}  (version ${a.version}, ${a.source})`);
        for (const c of a.changes) lines.push(`      ${changeLine(c)}`);
        break;
      case 'unchanged':
        lines.push(`= unchanged  ${a.policy_id}  (version ${a.version})`);
        break;
      case 'delete':
        lines.push(`- delete     ${a.policy_id}  (version ${a.version})`);
        break;
      case 'keep':
        break;
    }
  }
  const kept = plan.actions.filter((a) => a.action === 'keep').map((a) => a.policy_id);
  if (kept.length > 0) lines.push(`  in no file, kept (--prune deletes them): ${kept.join(', ')}`);
  const s = plan.summary;
  lines.push(`Plan: ${s.create} to create, ${s.update} to update, ${s.delete} to delete, ${s.unchanged} unchanged` + (s.keep > 0 ? `, ${s.keep} not in files and kept.` : '.'));
  return lines;
}
