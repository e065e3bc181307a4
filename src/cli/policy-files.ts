import { readdirSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { duplicateProblems, readPolicyFile, unreadable, type FilePolicy, type PolicyFileProblem } from '../policy/policy-file.js';

/**
 * Reads the desired state of `rl apply/diff/validate` from files and directories, each file through
 * policy/policy-file.ts (the reader RL_POLICY_FILE uses: a file that passes here is accepted by the
 * server). A directory stands for every `.yaml`, `.yml` or `.json` file directly in it, in name order.
 * Every problem of every file is reported at once, a policy_id defined twice across the files included.
 */

export type DesiredPolicy = FilePolicy;

export interface LoadResult {
  files: string[];
  policies: DesiredPolicy[];
  problems: PolicyFileProblem[];
}

const EXTENSIONS = new Set(['.yaml', '.yml', '.json']);

/** Every readable file behind `paths`; unreadable paths are problems, not exceptions. */
export function loadPolicyFiles(paths: string[]): LoadResult {
  const problems: PolicyFileProblem[] = [];
  const files: string[] = [];
  for (const path of paths) {
    let isDir: boolean;
    try {
      isDir = statSync(path).isDirectory();
    } catch (error) {
      problems.push({ source: path, message: `cannot read: ${unreadable(error)}` });
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

  const policies = files.flatMap((file) => readPolicyFile(file, problems));
  problems.push(...duplicateProblems(policies));
  return { files, policies, problems };
}
