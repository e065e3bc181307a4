/**
 * README's variables tables (Configuration, and its Sidecar agent part) list exactly the variables
 * src/settings.ts declares for each reader, with the same defaults; and no reader reads an RL_* variable
 * that is not declared there. A default cell may explain itself after ": " (`none: no regions`): the
 * value is what comes before.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { SETTINGS, shownDefault, type SettingName, type SettingReader, type SettingSpec } from '../src/settings.js';
import { loadAgentConfig } from '../src/agent/config.js';
import { Reader, loadServerConfig } from '../src/config.js';

const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

/** One table's rows: the RL_* names of the first column, and the defaults of the last (backticks dropped). */
function tableRows(heading: string): { names: string[]; defaults: string[] }[] {
  const start = README.indexOf(`\n${heading}\n`);
  expect(start, heading).to.be.greaterThan(-1);
  const lines = README.slice(start + heading.length + 2).split('\n');
  const from = lines.findIndex((line) => line.startsWith('| Variable |'));
  const rows: { names: string[]; defaults: string[] }[] = [];
  for (const line of lines.slice(from + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line.split(/(?<!\\)\|/).slice(1, -1).map((cell) => cell.trim());
    const names = [...cells[0].matchAll(/`(RL_[A-Z0-9_]+)`/g)].map((m) => m[1]);
    if (names.length === 0) continue; // OTEL_*: standard variables, not ours
    const last = cells[cells.length - 1].replace(/`/g, '').replace(/\\\|/g, '|');
    rows.push({ names, defaults: last === '' ? [] : names.length === 1 ? [last] : last.split(/, /) });
  }
  return rows;
}

function declaredFor(reader: SettingReader): SettingName[] {
  return (Object.keys(SETTINGS) as SettingName[]).filter((name) => (SETTINGS[name].readers as readonly string[]).includes(reader));
}

const TABLES: [SettingReader, string][] = [
  ['server', '## Configuration'],
  ['agent', '### Sidecar agent (`npm run agent`)'],
];

describe('settings: README tables equal src/settings.ts', () => {
  for (const [reader, heading] of TABLES) {
    it(`${heading}: the same variables as those the ${reader} reads`, () => {
      const listed = tableRows(heading).flatMap((row) => row.names);
      expect([...listed].sort()).to.deep.equal(declaredFor(reader).sort());
      expect(new Set(listed).size, 'each variable once').to.equal(listed.length);
    });

    it(`${heading}: each default as declared`, () => {
      for (const { names, defaults } of tableRows(heading)) {
        if (defaults.length === 0) continue; // "as for the server": the server's row says it
        const expected = defaults.length === 1 ? names.map(() => defaults[0]) : defaults;
        expect(expected, `${names.join(', ')}: one default each`).to.have.length(names.length);
        names.forEach((name, at) => expect(shownDefault(SETTINGS[name as SettingName] as SettingSpec), name).to.equal(expected[at].split(': ')[0]));
      }
    });
  }

  it('the declared defaults are what the readers answer without any variable', () => {
    const server = loadServerConfig({});
    expect(server.drainSecs).to.equal(SETTINGS.RL_DRAIN_SECS.default);
    expect(server.counterStoreTimeoutMs).to.equal(SETTINGS.RL_COUNTERSTORE_TIMEOUT_MS.default);
    expect(server.auth.exemptPaths).to.deep.equal(SETTINGS.RL_AUTH_EXEMPT_PATHS.default);
    const agent = loadAgentConfig({});
    expect(agent.syncIntervalSecs).to.equal(SETTINGS.RL_AGENT_SYNC_SECS.default);
    expect(agent.upstream).to.equal(SETTINGS.RL_UPSTREAM_HTTP.default);
    expect(agent.keyPrefix).to.equal(SETTINGS.RL_KEY_PREFIX.default);
  });

  it('reading an RL_* variable that is not declared is refused', () => {
    expect(() => new Reader({ RL_NOT_DECLARED: '1' }).optional('RL_NOT_DECLARED')).to.throw(/RL_NOT_DECLARED is not declared in src\/settings\.ts/);
  });
});
