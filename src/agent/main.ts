import { ConfigError } from '../config.js';
import { log } from '../util/log.js';
import { startAgent } from './agent.js';
import { loadAgentConfig } from './config.js';

/** The sidecar's composition root: config from the environment, signals, exit codes. */
async function main(): Promise<void> {
  const config = loadAgentConfig(process.env);
  const agent = await startAgent(config);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('draining', { signal, drain_secs: config.drainSecs });
    agent.close().then(
      () => {
        log.info('stopped');
        process.exit(0);
      },
      (error: unknown) => {
        log.error('drain failed', { error: String(error) });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) log.error(`cannot start: ${error.message}`);
  else log.error('cannot start', { error: String((error as Error)?.stack ?? error) });
  process.exit(1);
});
