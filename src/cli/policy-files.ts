import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { PolicyInput } from '../policy/validate.js';
import { validatePolicyDocument } from '../policy/policy-file.js';
import { isObject } from '../util/json-shape.js';

/**
 * Reads the desired state of `rl apply/diff/validate` from files: YAML (`.yaml`, `.yml`, several
 * documents allowed) or JSON (`.json`). A document is one policy, a list of policies, or
 * `{"policies": [...]}` (the RL_POLICY_FILE format). A directory stands for every such file directly
 * in it, in name order. Every policy goes through the server's own validator, so a file that passes
 * here is accepted by the server, and every problem of every file is reported at once.
 */

export interface DesiredPolicy {
  /** Where it was written: `file`, `file#2` for the third document of a YAML stream. */
  source: string;
  /** Position in its document's list (0 for a single policy). */
  index: number;
  /** Normalised by the validator: every default applied, durations as written. */
  policy: PolicyInput;
}

export interface FileProblem {
  source: string;
  /** The policy it concerns, when there is one. */
  index?: number;
  policy_id?: string;
  field?: string;
  message: string;
}

export interface LoadResult {
  files: string[];
  policies: DesiredPolicy[];
  problems: FileProblem[];
}

const EXTENSIONS = new Set(['.yaml', '.yml', '.json']);

/** Every readable file behind `paths`; unreadable paths are problems, not exceptions. */
export function loadPolicyFiles(paths: string[]): LoadResult {
  const problems: FileProblem[] = [];
  const files: string[] = [];
  for (const path of paths) {
    let isDir: boolean;
    try {
      isDir = statSync(path).isDirectory();
    } catch (error) {
      problems.push({ source: path, message: `cannot read: ${errnoText(error)}` });
      continue;
    }
    if (!isDir) {
      files.push(path);
      continue;
    }
    const entries = readdirSync(path, { withFileTypes: true })
      .filter((e) => e.isFile() && EXTENSIONS.has(extname(e.name).toLowerCase()))
      .map((e) => join(path, e.name))
      .sort();
    if (entries.length === 0) problems.push({ source: path, message: 'directory holds no .yaml, .yml or .json file' });
    files.push(...entries);
  }

  const policies: DesiredPolicy[] = [];
  for (const file of files) {
    for (const doc of readDocuments(file, problems)) collectPolicies(doc.source, doc.value, policies, problems);
  }
  reportDuplicates(policies, problems);
  return { files, policies, problems };
}

/** `file: policy "id" (index 2): algorithm.window: must be a duration` */
export function formatProblem(p: FileProblem): string {
  let where = `${p.source}: `;
  if (p.index !== undefined) where += p.policy_id !== undefined ? `policy ${JSON.stringify(p.policy_id)} (index ${p.index}): ` : `policy at index ${p.index}: `;
  return `${where}${p.field ? `${p.field}: ` : ''}${p.message}`;
}

function readDocuments(file: string, problems: FileProblem[]): { source: string; value: unknown }[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    problems.push({ source: file, message: `cannot read: ${errnoText(error)}` });
    return [];
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (extname(file).toLowerCase() === '.json') {
    try {
      return [{ source: file, value: JSON.parse(text) }];
    } catch (error) {
      problems.push({ source: file, message: `invalid JSON: ${(error as Error).message}` });
      return [];
    }
  }
  const docs = parseAllDocuments(text, { uniqueKeys: true, prettyErrors: true });
  // An empty file parses to no document at all: say so rather than silently applying nothing from it.
  if (!Array.isArray(docs) || docs.length === 0) {
    problems.push({ source: file, message: 'holds no policy' });
    return [];
  }
  const out: { source: string; value: unknown }[] = [];
  docs.forEach((doc, i) => {
    const source = docs.length > 1 ? `${file}#${i}` : file;
    if (doc.errors.length > 0) {
      for (const e of doc.errors) problems.push({ source, message: `invalid YAML: ${e.message.split('\n')[0]}` });
      return;
    }
    const value: unknown = doc.toJS({ maxAliasCount: 100 });
    // A `---` with nothing after it: an empty document, not an error.
    if (value !== null && value !== undefined) out.push({ source, value });
  });
  return out;
}

function collectPolicies(source: string, doc: unknown, policies: DesiredPolicy[], problems: FileProblem[]): void {
  let list: unknown[];
  if (Array.isArray(doc)) list = doc;
  else if (isObject(doc) && Object.prototype.hasOwnProperty.call(doc, 'policies')) {
    const inner = doc.policies;
    if (!Array.isArray(inner)) {
      problems.push({ source, field: 'policies', message: 'must be a list of policies' });
      return;
    }
    list = inner;
  } else if (isObject(doc)) list = [doc];
  else {
    problems.push({ source, message: 'must hold a policy, a list of policies, or {policies: [...]}' });
    return;
  }
  list.forEach((raw, index) => {
    const result = validatePolicyDocument(raw);
    if (result.ok) {
      policies.push({ source, index, policy: result.policy });
      return;
    }
    const policy_id = idOf(raw);
    for (const e of result.errors) problems.push({ source, index, policy_id, field: e.field, message: e.message });
  });
}

function reportDuplicates(policies: DesiredPolicy[], problems: FileProblem[]): void {
  const first = new Map<string, DesiredPolicy>();
  for (const p of policies) {
    const id = p.policy.policy_id;
    const earlier = first.get(id);
    if (earlier === undefined) first.set(id, p);
    else problems.push({ source: p.source, index: p.index, policy_id: id, field: 'policy_id', message: `duplicate: also defined in ${earlier.source} (index ${earlier.index})` });
  }
}

/** The id a user wrote, for messages: `policy_id`, or `id` of the quota shape. */
function idOf(raw: unknown): string | undefined {
  if (!isObject(raw)) return undefined;
  const id = raw.policy_id ?? raw.id;
  return typeof id === 'string' && id !== '' ? id : undefined;
}

function errnoText(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return 'no such file or directory';
  if (code === 'EACCES') return 'permission denied';
  return (error as Error).message ?? String(error);
}
