import { ConfigError, loadServerConfig } from './config.js';
import { JournalCorruptError } from './policy/file-policy-store.js';
import { PolicyFileError } from './policy/policy-file.js';
import { startServer } from './server.js';
import { runMain } from './util/run-main.js';

/** The server's composition root: config from the environment, signals, exit codes. */
runMain(
  async () => {
    const config = loadServerConfig(process.env);
    const server = await startServer(config);
    return { drainSecs: config.drainSecs, shutdownDelaySecs: config.shutdownDelaySecs, drain: () => server.drain() };
  },
  (error) => error instanceof ConfigError || error instanceof PolicyFileError || error instanceof JournalCorruptError,
);
