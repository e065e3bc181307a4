import { ConfigError } from '../config.js';
import { runMain } from '../util/run-main.js';
import { startAgent } from './agent.js';
import { loadAgentConfig } from './config.js';

/** The sidecar's composition root: config from the environment, signals, exit codes. */
runMain(
  async () => {
    const config = loadAgentConfig(process.env);
    const agent = await startAgent(config);
    return { drainSecs: config.drainSecs, drain: () => agent.close() };
  },
  (error) => error instanceof ConfigError,
);
