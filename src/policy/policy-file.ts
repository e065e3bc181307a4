import { readFileSync } from 'node:fs';
import type { FieldError, Policy } from './types.js';
import { StringPool, storedPolicy } from './stored-policy.js';
import { validatePolicy } from './validate.js';

/**
 * Loads a policy file (RL_POLICY_FILE): JSON `{"policies": [...]}` or a bare array of policies, in the
 * Policy shape or the quota-shaped body. Every policy is validated; any problem (missing file, bad
 * JSON, an invalid policy, a duplicate policy_id) throws one PolicyFileError that lists every problem,
 * each naming the file, the policy (by id and index) and the field.
 */

export interface PolicyFileProblem {
  /** Index of the policy in the file's list; undefined for file-level problems. */
  index?: number;
  policy_id?: string;
  field?: string;
  message: string;
}

export class PolicyFileError extends Error {
  constructor(
    readonly path: string,
    readonly problems: readonly PolicyFileProblem[],
  ) {
    super(problems.map((p) => formatProblem(path, p)).join('\n'));
    this.name = 'PolicyFileError';
  }
}

function formatProblem(path: string, p: PolicyFileProblem): string {
  let where = `${path}: `;
  if (p.index !== undefined) {
    where += p.policy_id !== undefined ? `policy ${JSON.stringify(p.policy_id)} (index ${p.index}): ` : `policy at index ${p.index}: `;
  }
  return `${where}${p.field ? `${p.field}: ` : ''}${p.message}`;
}

export function loadPolicyFile(path: string, nowIso: string = new Date().toISOString()): Policy[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const reason =
      code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'is a directory' : String((err as Error).message ?? err);
    throw new PolicyFileError(path, [{ message: `cannot read policy file: ${reason}` }]);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch (err) {
    throw new PolicyFileError(path, [{ message: `invalid JSON: ${(err as Error).message}` }]);
  }
  return parsePolicyDocument(path, doc, nowIso);
}

/** Validates an already decoded policy document (exported for callers that read files themselves). */
export function parsePolicyDocument(path: string, doc: unknown, nowIso: string = new Date().toISOString()): Policy[] {
  let list: unknown;
  if (Array.isArray(doc)) list = doc;
  else if (typeof doc === 'object' && doc !== null && Object.prototype.hasOwnProperty.call(doc, 'policies')) {
    list = (doc as { policies: unknown }).policies;
    if (!Array.isArray(list)) {
      throw new PolicyFileError(path, [{ field: 'policies', message: 'must be an array of policies' }]);
    }
  } else {
    throw new PolicyFileError(path, [{ message: 'must be a JSON object {"policies": [...]} or an array of policies' }]);
  }

  const problems: PolicyFileProblem[] = [];
  const policies: Policy[] = [];
  const firstIndex = new Map<string, number>();
  const strings = new StringPool();
  (list as unknown[]).forEach((raw, index) => {
    const result = validatePolicy(raw, { requireId: true });
    if (!result.ok) {
      const policy_id = idOf(raw);
      for (const e of result.errors as FieldError[]) problems.push({ index, policy_id, field: e.field, message: e.message });
      return;
    }
    const id = result.policy.policy_id;
    const seen = firstIndex.get(id);
    if (seen !== undefined) {
      problems.push({ index, policy_id: id, field: 'policy_id', message: `duplicate policy_id (first defined at index ${seen})` });
      return;
    }
    firstIndex.set(id, index);
    policies.push(storedPolicy(result.policy, 1, nowIso, nowIso, strings));
  });
  if (problems.length > 0) throw new PolicyFileError(path, problems);
  return policies;
}

/** The id a user wrote, for messages: `policy_id`, or `id` in the quota shape, when it is a string. */
function idOf(raw: unknown): string | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const o = raw as Record<string, unknown>;
  const own = (k: string): unknown => (Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined);
  const id = own('policy_id') ?? own('id');
  return typeof id === 'string' && id !== '' ? id : undefined;
}
