import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TempDir {
  /** The directory; set once the before (or beforeEach) hook ran, so read it in hooks and tests only. */
  readonly path: string;
}

export interface TempDirOptions {
  /** 'test': a fresh directory for every test (beforeEach/afterEach); 'suite' (default): one for the block. */
  per?: 'test' | 'suite';
  /** Runs before the directory is removed: stops what still writes into it (servers, stores, locks). */
  release?: () => unknown;
  /** Called with each new directory, for a caller that keeps it in a `let` of its own. */
  made?: (path: string) => void;
}

/**
 * A temporary directory `<os tmp>/<prefix>XXXXXX` for the enclosing describe(), removed after it. Call it
 * before the hooks that use it: mocha runs hooks in the order they were registered.
 */
export function tempDir(prefix: string, options: TempDirOptions = {}): TempDir {
  let path: string | undefined;
  const dir: TempDir = {
    get path() {
      if (path === undefined) throw new Error(`tempDir(${prefix}): read before its hook ran`);
      return path;
    },
  };
  const [make, remove] = options.per === 'test' ? [beforeEach, afterEach] : [before, after];
  make(() => {
    path = mkdtempSync(join(tmpdir(), prefix));
    options.made?.(path);
  });
  remove(async () => {
    await options.release?.();
    if (path !== undefined) rmSync(path, { recursive: true, force: true });
    path = undefined;
  });
  return dir;
}
