import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { isObject } from '../util/json-shape.js';
import { jsonSyntaxError } from '../util/json-syntax.js';
import { caretExcerpt, lineColumnOf } from '../util/source-position.js';
import type { Policy } from './types.js';
import { StringPool, storedPolicy } from './stored-policy.js';
import { validatePolicy, type PolicyInput, type ValidationResult } from './validate.js';

/**
 * Policy files, read one way for everyone who reads them: RL_POLICY_FILE (the seed of an empty policy
 * store), the embedded client and `rl apply/diff/validate`. So a file `rl validate` passes is a file
 * the server starts with.
 *
 * A file is YAML when it is named `.yaml` or `.yml` (several documents allowed), JSON otherwise. A
 * document is one policy, a list of policies or `{"policies": [...]}`, each policy in the Policy shape
 * or the quota-shaped alias. Every policy goes through the server's own validator, and every problem is
 * reported at once, each naming the file (`file#2` for the third document of a YAML stream), the
 * policy (by id and index in its document) and the field.
 */

export interface PolicyFileProblem {
  /** The file, or `file#n` for a document of a YAML stream. */
  source: string;
  /** Index of the policy in its document's list (0 for a single policy); undefined for file-level problems. */
  index?: number;
  policy_id?: string;
  field?: string;
  message: string;
  /** For a syntax error: where it is (1-based), and that line with a caret under the column. */
  line?: number;
  column?: number;
  excerpt?: string;
}

export interface FilePolicy {
  source: string;
  index: number;
  /** Normalised by the validator: every default applied, durations as written. */
  policy: PolicyInput;
}

export class PolicyFileError extends Error {
  constructor(
    readonly path: string,
    readonly problems: readonly PolicyFileProblem[],
  ) {
    super(problems.map(formatProblem).join('\n'));
    this.name = 'PolicyFileError';
  }
}

/**
 * `file: policy "id" (index 2): algorithm.window: must be a duration`, or for a syntax error
 * `file:3:14: invalid YAML: ...` followed by the line and a caret.
 */
export function formatProblem(p: PolicyFileProblem): string {
  if (p.line !== undefined) return `${p.source}:${p.line}:${p.column}: ${p.message}${p.excerpt === undefined ? '' : `\n${p.excerpt}`}`;
  let where = `${p.source}: `;
  if (p.index !== undefined) where += p.policy_id !== undefined ? `policy ${JSON.stringify(p.policy_id)} (index ${p.index}): ` : `policy at index ${p.index}: `;
  return `${where}${p.field ? `${p.field}: ` : ''}${p.message}`;
}

/**
 * One policy as a file or a POST body holds it (the Policy shape or the quota-shaped alias): the
 * normalised policy, or every problem as `{field, message}` — the server's own validation, offline
 * (what `rl validate` uses). `policy_id` is required, as on POST.
 */
export function validatePolicyDocument(input: unknown): ValidationResult {
  return validatePolicy(input, { requireId: true });
}

/** RL_POLICY_FILE: every policy of the file as stored at version 1, or a PolicyFileError listing every problem. */
export function loadPolicyFile(path: string, nowIso: string = new Date().toISOString()): Policy[] {
  const problems: PolicyFileProblem[] = [];
  return stored(path, readPolicyFile(path, problems), problems, nowIso);
}

/** As loadPolicyFile, for a document already decoded (the embedded client's policies); `path` names it in messages. */
export function parsePolicyDocument(path: string, doc: unknown, nowIso: string = new Date().toISOString()): Policy[] {
  const problems: PolicyFileProblem[] = [];
  return stored(path, policiesOfDocument(path, doc, problems), problems, nowIso);
}

function stored(path: string, policies: FilePolicy[], problems: PolicyFileProblem[], nowIso: string): Policy[] {
  problems.push(...duplicateProblems(policies));
  if (problems.length > 0) throw new PolicyFileError(path, problems);
  const strings = new StringPool();
  return policies.map(({ policy }) => storedPolicy(policy, 1, nowIso, nowIso, strings));
}

/** Every valid policy of one file; each problem is added to `problems`, never thrown. */
export function readPolicyFile(file: string, problems: PolicyFileProblem[]): FilePolicy[] {
  return readDocuments(file, problems).flatMap((doc) => policiesOfDocument(doc.source, doc.value, problems));
}

/** A policy_id defined twice (in one file or across the files read together): every definition after the first. */
export function duplicateProblems(policies: readonly FilePolicy[]): PolicyFileProblem[] {
  const problems: PolicyFileProblem[] = [];
  const first = new Map<string, FilePolicy>();
  for (const p of policies) {
    const id = p.policy.policy_id;
    const earlier = first.get(id);
    if (earlier === undefined) first.set(id, p);
    else {
      const where = earlier.source === p.source ? `at index ${earlier.index}` : `in ${earlier.source} (index ${earlier.index})`;
      problems.push({ source: p.source, index: p.index, policy_id: id, field: 'policy_id', message: `duplicate policy_id (first defined ${where})` });
    }
  }
  return problems;
}

/** Why a file or directory could not be read, in words. */
export function unreadable(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return 'no such file or directory';
  if (code === 'EACCES') return 'permission denied';
  if (code === 'EISDIR') return 'is a directory';
  return (error as Error).message ?? String(error);
}

function readDocuments(file: string, problems: PolicyFileProblem[]): { source: string; value: unknown }[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    problems.push({ source: file, message: `cannot read policy file: ${unreadable(error)}` });
    return [];
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const extension = extname(file).toLowerCase();
  if (extension !== '.yaml' && extension !== '.yml') {
    try {
      return [{ source: file, value: JSON.parse(text) }];
    } catch (error) {
      // A YAML file under another name would otherwise read as a puzzling JSON error.
      const hint = extension === '.json' ? '' : ' (a file is read as YAML only when named .yaml or .yml)';
      const syntax = jsonSyntaxError(text);
      if (syntax === undefined) problems.push({ source: file, message: `invalid JSON: ${(error as Error).message}${hint}` });
      else problems.push(syntaxProblem(file, text, syntax.offset, `invalid JSON: ${syntax.problem}${hint}`));
      return [];
    }
  }
  const docs = parseAllDocuments(text, { uniqueKeys: true, prettyErrors: false });
  // An empty file parses to no document at all: say so rather than silently applying nothing from it.
  if (!Array.isArray(docs) || docs.length === 0) {
    problems.push({ source: file, message: 'holds no policy' });
    return [];
  }
  const out: { source: string; value: unknown }[] = [];
  docs.forEach((doc, i) => {
    const source = docs.length > 1 ? `${file}#${i}` : file;
    if (doc.errors.length > 0) {
      for (const e of doc.errors) problems.push(syntaxProblem(source, text, e.pos[0], `invalid YAML: ${e.message.split('\n')[0]}`));
      return;
    }
    const value: unknown = doc.toJS({ maxAliasCount: 100 });
    // A `---` with nothing after it: an empty document, not an error.
    if (value !== null && value !== undefined) out.push({ source, value });
  });
  return out;
}

/** A syntax error at `offset` of `text`: its line, column and the line with a caret. */
function syntaxProblem(source: string, text: string, offset: number, message: string): PolicyFileProblem {
  const position = lineColumnOf(text, offset);
  return { source, message, ...position, excerpt: caretExcerpt(text, position) };
}

function policiesOfDocument(source: string, doc: unknown, problems: PolicyFileProblem[]): FilePolicy[] {
  let list: unknown[];
  if (Array.isArray(doc)) list = doc;
  else if (isObject(doc) && Object.prototype.hasOwnProperty.call(doc, 'policies')) {
    if (!Array.isArray(doc.policies)) {
      problems.push({ source, field: 'policies', message: 'must be a list of policies' });
      return [];
    }
    list = doc.policies;
  } else if (isObject(doc)) list = [doc];
  else {
    problems.push({ source, message: 'must hold a policy, a list of policies or {"policies": [...]}' });
    return [];
  }
  const policies: FilePolicy[] = [];
  list.forEach((raw, index) => {
    const result = validatePolicyDocument(raw);
    if (result.ok) policies.push({ source, index, policy: result.policy });
    else for (const e of result.errors) problems.push({ source, index, policy_id: idOf(raw), field: e.field, message: e.message });
  });
  return policies;
}

/** The id a user wrote, for messages: `policy_id`, or `id` in the quota shape, when it is a string. */
function idOf(raw: unknown): string | undefined {
  if (!isObject(raw)) return undefined;
  const own = (k: string): unknown => (Object.prototype.hasOwnProperty.call(raw, k) ? raw[k] : undefined);
  const id = own('policy_id') ?? own('id');
  return typeof id === 'string' && id !== '' ? id : undefined;
}
