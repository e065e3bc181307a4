import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { REPO_DIR } from './proc.js';

/**
 * The benchmark measures what production runs: src/ compiled by tsc (as `npm run build` does for
 * `node dist/main.js`), not tsx's on-the-fly esbuild output, which wraps closures in `__name(...)` calls
 * (keepNames) that cost a few percent on the HTTP fast path and writes every module on one line (so
 * CPU profiles lose their line numbers). src/ and bench/ are compiled together, without type checking
 * (`npm run typecheck` does that), into a private directory under .tmp/ (git-ignored), one per run so two
 * runs never share one; proto/ and lua/ are linked beside it because src/ finds them relative to itself.
 * src/ imports the SDK (`@rl/client`, sdk/) as a package, so the SDK is built first, as `npm run build`
 * does: a fresh clone has no sdk/dist.
 */
export function buildForBench(): { dir: string; remove(): void } {
  const dir = join(REPO_DIR, '.tmp', `bench-build-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const tsc = createRequire(join(REPO_DIR, 'package.json')).resolve('typescript/bin/tsc');
  const sdk = spawnSync(process.execPath, [tsc, '-p', join(REPO_DIR, 'sdk', 'tsconfig.json')], { cwd: REPO_DIR, encoding: 'utf8' });
  if (sdk.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`building the SDK (sdk/) with tsc failed:\n${sdk.stdout}${sdk.stderr}`);
  }
  const out = spawnSync(process.execPath, [tsc, '-p', join(REPO_DIR, 'bench', 'tsconfig.bench.json'), '--outDir', dir], {
    cwd: REPO_DIR,
    encoding: 'utf8',
  });
  if (out.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`compiling src/ and bench/ with tsc failed:\n${out.stdout}${out.stderr}`);
  }
  for (const shared of ['proto', 'lua']) symlinkSync(join(REPO_DIR, shared), join(dir, shared), 'dir');
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
