import cluster from 'node:cluster';
import { ConfigError, loadServerConfig } from './config.js';
import { JournalCorruptError } from './policy-store/file-policy-store.js';
import { DataDirLockedError } from './policy-store/journal-lock.js';
import { SnapshotCorruptError } from './policy-store/journal-snapshot.js';
import { PolicyFileError } from './policy/policy-file.js';
import { startServer } from './server.js';
import { runMain } from './util/run-main.js';
import { WorkerStartError, startWorkerGroup } from './workers/primary.js';
import { startWorker } from './workers/worker.js';

/**
 * The server's composition root: config from the environment, signals, exit codes. RL_WORKERS=1 (the
 * default): this process is the server. More: it is the primary of that many workers (src/workers),
 * and each worker, forked from this same file, is the server.
 */
runMain(
  async () => {
    const config = loadServerConfig(process.env);
    if (cluster.isWorker) return startWorker(config).catch(namingPolicyFile);
    if (config.workers > 1) return startWorkerGroup(config);
    const server = await startServer(config).catch(namingPolicyFile);
    return { drainSecs: config.drainSecs, shutdownDelaySecs: config.shutdownDelaySecs, drain: () => server.drain() };
  },
  (error) =>
    error instanceof ConfigError || error instanceof PolicyFileError || error instanceof JournalCorruptError || error instanceof WorkerStartError ||
    error instanceof DataDirLockedError || error instanceof SnapshotCorruptError,
);

/** The server reads one policy file, RL_POLICY_FILE: a bad one stops start-up naming the variable, as any bad setting does. */
function namingPolicyFile(error: unknown): never {
  if (error instanceof PolicyFileError) error.message = `RL_POLICY_FILE: ${error.message}`;
  throw error;
}
