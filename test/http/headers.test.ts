import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { newRequestId, requestIdFor } from '../../src/http/headers.js';

const GENERATED_ID = /^([0-9a-f]{16})-([0-9a-z]+)$/;

describe('request ids (src/http/headers.ts)', () => {
  it('are a per-process random prefix and a counter, unique within the process', () => {
    const ids = Array.from({ length: 10_000 }, () => newRequestId());
    expect(new Set(ids).size).to.equal(ids.length);
    const parts = ids.map((id) => GENERATED_ID.exec(id));
    for (const [i, match] of parts.entries()) expect(match, ids[i]).to.not.equal(null);
    expect(new Set(parts.map((m) => m![1])).size, 'one prefix per process').to.equal(1);
    const counters = parts.map((m) => parseInt(m![2], 36));
    for (let i = 1; i < counters.length; i++) expect(counters[i]).to.equal(counters[i - 1] + 1);
  });

  it('differ between processes (the prefix is drawn per process)', function () {
    this.timeout(30_000);
    const idOfNewProcess = () =>
      execFileSync(
        process.execPath,
        ['--import', 'tsx', '--input-type=module', '-e', "import('./src/http/headers.ts').then((m) => process.stdout.write(m.newRequestId()))"],
        { encoding: 'utf8' },
      );
    const [a, b] = [idOfNewProcess(), idOfNewProcess()];
    expect(a).to.match(GENERATED_ID);
    expect(b).to.match(GENERATED_ID);
    expect(GENERATED_ID.exec(a)![1]).to.not.equal(GENERATED_ID.exec(b)![1]);
  });

  it('are echoed when a caller sends a well-formed one, generated otherwise', () => {
    const own = newRequestId();
    expect(requestIdFor(own), 'a generated id is well-formed, so it can be passed on').to.equal(own);
    expect(requestIdFor('abc-123.x:y')).to.equal('abc-123.x:y');
    for (const bad of [undefined, '', 'a b', 'x\r\ny', 'a'.repeat(129)]) expect(requestIdFor(bad)).to.match(GENERATED_ID);
  });
});
