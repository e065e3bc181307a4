import { ConfigError, loadServerConfig } from './config.js';
import { JournalCorruptError } from './policy/file-policy-store.js';
import { PolicyFileError } from './policy/policy-file.js';
import { startServer } from './server.js';
import { log } from './util/log.js';

/** The server's composition root: config from the environment, signals, exit codes. */
async function main(): Promise<void> {
  const config = loadServerConfig(process.env);
  const server = await startServer(config);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('draining', { signal, drain_secs: config.drainSecs });
    server.drain().then(
      () => {
        log.info('stopped');
        process.exit(0);
      },
      (error) => {
        log.error('drain failed', { error: String(error) });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof PolicyFileError || error instanceof JournalCorruptError) {
    log.error(`cannot start: ${error.message}`);
  } else {
    log.error('cannot start', { error: String((error as Error)?.stack ?? error) });
  }
  process.exit(1);
});
