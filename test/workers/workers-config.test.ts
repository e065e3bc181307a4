import { expect } from 'chai';
import { availableParallelism } from 'node:os';
import { ConfigError, loadServerConfig } from '../../src/config.js';

const REDIS = { RL_COUNTERSTORE_ADDR: 'redis://127.0.0.1:6379' };

function refusal(env: Record<string, string>): ConfigError {
  try {
    loadServerConfig(env);
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('the config was accepted');
}

describe('config: RL_WORKERS', () => {
  it('defaults to 1 worker, in memory and in Redis mode', () => {
    expect(loadServerConfig({}).workers).to.equal(1);
    expect(loadServerConfig({ ...REDIS }).workers).to.equal(1);
    expect(loadServerConfig({ RL_WORKERS: '1' }).workers).to.equal(1);
  });

  it('takes a count or auto (the cores this process may use) in Redis mode', () => {
    expect(loadServerConfig({ ...REDIS, RL_WORKERS: '3' }).workers).to.equal(3);
    expect(loadServerConfig({ ...REDIS, RL_WORKERS: 'auto' }).workers).to.equal(availableParallelism());
  });

  it('refuses more than 1 in memory mode, explaining that the counters would split', () => {
    const error = refusal({ RL_WORKERS: '2' });
    expect(error.variable).to.equal('RL_WORKERS');
    expect(error.message).to.match(/^RL_WORKERS: 2 workers need RL_COUNTERSTORE_ADDR/);
    expect(error.message).to.include('every limit would split');
  });

  it('refuses auto in memory mode when it means more than 1, saying what it meant', function () {
    if (availableParallelism() === 1) {
      expect(loadServerConfig({ RL_WORKERS: 'auto' }).workers).to.equal(1);
      return;
    }
    expect(refusal({ RL_WORKERS: 'auto' }).message).to.include(`auto means ${availableParallelism()} workers here`);
  });

  for (const [value, problem] of [
    ['0', 'must be between 1 and 1024, got 0'],
    ['1025', 'must be between 1 and 1024, got 1025'],
    ['-2', 'must be a whole number of processes or "auto", got "-2"'],
    ['two', 'must be a whole number of processes or "auto", got "two"'],
    ['1.5', 'must be a whole number of processes or "auto", got "1.5"'],
  ]) {
    it(`refuses RL_WORKERS=${value}`, () => {
      expect(refusal({ ...REDIS, RL_WORKERS: value }).message).to.equal(`RL_WORKERS: ${problem}`);
    });
  }
});
