import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { REPO_DIR, hasTaskset } from './proc.js';

export interface MachineInfo {
  nproc: number;
  cpu_model: string;
  mem_total_gib: number;
  node: string;
  v8: string;
  platform: string;
  kernel: string;
  taskset: boolean;
  /** 1, 5 and 15 minute load averages when the run started: other work on the machine skews every figure. */
  loadavg: number[];
  git_commit: string;
  /** src/ differs from the commit (uncommitted changes): figures belong to the working tree, not the commit. */
  src_dirty: boolean;
}

/** src/ as committed (its tree id) and as changed in the working tree: compared at the start and end of a run. */
export function sourceState(): string {
  const git = (...args: string[]) => spawnSync('git', args, { cwd: REPO_DIR, encoding: 'utf8' });
  const head = git('rev-parse', 'HEAD:src').stdout.trim();
  const diff = git('diff', 'HEAD', '--', 'src').stdout;
  const untracked = git('ls-files', '--others', '--exclude-standard', '--', 'src').stdout;
  return `${head}:${createHash('sha1').update(diff).update(untracked).digest('hex').slice(0, 12)}`;
}

export function machineInfo(): MachineInfo {
  let model = os.cpus()[0]?.model ?? 'unknown';
  try {
    model = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? model;
  } catch {
    // not Linux
  }
  const git = (...args: string[]) => spawnSync('git', args, { cwd: REPO_DIR, encoding: 'utf8' });
  const head = git('rev-parse', '--short', 'HEAD');
  const status = git('status', '--porcelain', '--', 'src');
  return {
    // Not availableParallelism(): that is this process's affinity, one core once pinned.
    nproc: os.cpus().length,
    cpu_model: model,
    mem_total_gib: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    v8: process.versions.v8,
    platform: `${process.platform}-${process.arch}`,
    kernel: os.release(),
    taskset: hasTaskset(),
    loadavg: os.loadavg().map((l) => Math.round(l * 100) / 100),
    git_commit: head.status === 0 ? head.stdout.trim() : 'unknown',
    src_dirty: status.status === 0 ? status.stdout.trim() !== '' : false,
  };
}
