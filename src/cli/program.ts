import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { registerApplyCommands } from './commands/apply.js';
import { registerDecisionCommands } from './commands/decisions.js';
import { registerExplainCommand } from './commands/explain.js';
import { registerPolicyCommands } from './commands/policies.js';
import { registerStatusCommand } from './commands/status.js';
import { registerTopCommand } from './commands/top.js';
import { reportError } from './report-error.js';

/**
 * `--api-key` was the credential until it proved one character away from the request field `--api_key`
 * (`rl check --api-key K` counted nothing under api_key K). It is now the request field itself, on the
 * decision commands; anywhere else it is an unknown option, explained by this note.
 */
const OLD_CREDENTIAL_FLAG_NOTE =
  '--api-key is no longer the credential: use --auth-key <key> (or RL_API_KEY). On check, acquire, release and refund, --api-key and --api_key are the request field api_key.';

/** The `rl` program: global connection options, every command, and one place that turns failures into exit statuses. */
export function buildProgram(): Command {
  const program = new Command('rl')
    .description('command line of the rate-limit decision service')
    .version(packageVersion(), '-V, --version')
    // The environment is read in connection.ts, where a credential flag can override both variables.
    .option('--url <url>', 'service base URL (env RL_URL; default http://127.0.0.1:8080)')
    .option('--auth-key <key>', "this service's API key, sent as X-Api-Key (env RL_API_KEY); not the request field api_key")
    .option('--token <token>', 'bearer token (JWT), sent as Authorization: Bearer (env RL_TOKEN)')
    .option('--timeout <ms>', 'per-request timeout in milliseconds (default 10000)')
    .option('--json', 'machine-readable JSON output (errors as JSON on stderr)')
    .showHelpAfterError()
    // Before the commands are added: subcommands inherit the output settings.
    .configureOutput({
      outputError: (message, write) => write(/'--api-key(=[^']*)?'/.test(message) ? `${message}(${OLD_CREDENTIAL_FLAG_NOTE})\n` : message),
    })
    .exitOverride();
  registerPolicyCommands(program);
  registerApplyCommands(program);
  registerDecisionCommands(program);
  registerExplainCommand(program);
  registerStatusCommand(program);
  registerTopCommand(program);
  // Subcommands inherit exitOverride only when it is set on each; usage errors must not exit mid-run.
  const override = (cmd: Command): void => {
    cmd.exitOverride();
    cmd.commands.forEach(override);
  };
  program.commands.forEach(override);
  return program;
}

/** Runs `rl` with `argv` (node, script, ...args) and resolves to the exit status. */
export async function runCli(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (error) {
    // Usage errors and --help/--version: commander has printed what is needed.
    if (error instanceof CommanderError) return error.exitCode;
    const report = reportError(error);
    if (program.opts<{ json?: boolean }>().json) process.stderr.write(`${JSON.stringify(report.json)}\n`);
    else process.stderr.write(`rl: ${[report.headline, ...report.details.map((d) => `  ${d}`)].join('\n')}\n`);
    return report.exitCode;
  }
}

/** package.json sits two levels above both src/cli/ and the bundle's dist/cli/. */
function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}
