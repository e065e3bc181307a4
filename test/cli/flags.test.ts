import { expect } from 'chai';
import type { Command, Option } from 'commander';
import { CONTEXT_STRING_FIELDS } from '@rl/client';
import { buildProgram } from '../../src/cli/program.js';

/**
 * No flag of `rl` means one thing spelt with `_` and another spelt with `-` (issue: `--api-key` was the
 * credential, `--api_key` the request field). Walks every command with the options it inherits.
 */

/** `cmd` and every command under it. */
function commandsOf(cmd: Command): Command[] {
  return [cmd, ...cmd.commands.flatMap(commandsOf)];
}

/** The options a command accepts: its own and its ancestors' (commander reads global options anywhere). */
function optionsOf(cmd: Command): readonly Option[] {
  const own = cmd.options as readonly Option[];
  return cmd.parent ? [...own, ...optionsOf(cmd.parent)] : own;
}

/** Every long flag an option answers to (commander keeps the first in `long`, both in `flags`). */
function longFlags(option: Option): string[] {
  return option.flags.split(/[ ,|]+/).filter((f) => f.startsWith('--'));
}

describe('rl flags: `-` and `_` never tell two options apart', () => {
  const program = buildProgram();

  it('flags that differ only by - versus _ belong to one option, in every command', () => {
    for (const cmd of commandsOf(program)) {
      const byNormalised = new Map<string, Option>();
      for (const option of optionsOf(cmd)) {
        for (const flag of longFlags(option)) {
          const key = flag.replaceAll('_', '-');
          const other = byNormalised.get(key);
          expect(other === undefined || other === option, `rl ${cmd.name()}: ${flag} and ${other?.flags}`).to.equal(true);
          byNormalised.set(key, option);
        }
      }
    }
  });

  it('each decision command takes every request field under both spellings, and the credential is --auth-key', () => {
    for (const name of ['check', 'acquire', 'release', 'refund']) {
      const cmd = program.commands.find((c) => c.name() === name)!;
      const flags = new Set(optionsOf(cmd).flatMap(longFlags));
      for (const field of CONTEXT_STRING_FIELDS) {
        expect(flags, `${name} --${field}`).to.include(`--${field}`);
        expect(flags, `${name} --${field.replaceAll('_', '-')}`).to.include(`--${field.replaceAll('_', '-')}`);
      }
      expect(flags).to.include('--auth-key');
    }
  });
});
