import { log } from './log.js';

export interface Started {
  /** How long draining may take (RL_DRAIN_SECS), logged when it starts. */
  drainSecs: number;
  /** How long readiness fails before the listeners close (RL_SHUTDOWN_DELAY_SECS), logged too. */
  shutdownDelaySecs?: number;
  /** Drains and releases everything; the process exits 0 when it resolves, 1 when it rejects. */
  drain(): Promise<void>;
}

/**
 * The life of a composition root (server or sidecar): start, drain once on SIGTERM or SIGINT, exit 0
 * after draining and 1 when draining or starting fails. A start-up error `isExpected` accepts (a bad
 * config, a bad policy file) is logged as its message alone; any other with its stack.
 */
export function runMain(start: () => Promise<Started>, isExpected: (error: unknown) => boolean): void {
  const main = async () => {
    const running = await start();
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      log.info('draining', { signal, shutdown_delay_secs: running.shutdownDelaySecs ?? 0, drain_secs: running.drainSecs });
      running.drain().then(
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
  };
  main().catch((error: unknown) => {
    if (isExpected(error)) log.error(`cannot start: ${(error as Error).message}`);
    else log.error('cannot start', { error: String((error as Error)?.stack ?? error) });
    process.exit(1);
  });
}
