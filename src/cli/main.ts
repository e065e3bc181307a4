#!/usr/bin/env node
/** `rl`: the command line of the rate-limit decision service (docs/cli.md). */
import { runCli } from './program.js';

process.exitCode = await runCli(process.argv);
