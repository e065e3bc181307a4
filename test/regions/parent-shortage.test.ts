import { expect } from 'chai';
import { ParentShortage, type RefusalTiming } from '../../src/regions/parent-shortage.js';

describe('ParentShortage (what the parent said when it admitted no more)', () => {
  it('keeps an answer only while it says something: a refill that was not short leaves no entry, a short one lasts its retry_after', () => {
    const shortage = new ParentShortage();
    for (let i = 0; i < 1000; i++) shortage.note(`counter-${i}`, { retryAfterMs: 0, resetAfterMs: 60_000 }, 0);
    expect(shortage.size).to.equal(0);

    shortage.note('spent', { retryAfterMs: 500, resetAfterMs: 60_000 }, 1_000);
    expect(shortage.at('spent', 1_200)).to.deep.equal({ retryAfterMs: 300, resetAfterMs: 59_800 });
    // A later answer that is not short replaces it.
    shortage.note('spent', { retryAfterMs: 0, resetAfterMs: 59_000 }, 1_300);
    expect(shortage.size).to.equal(0);

    shortage.note('idle', { retryAfterMs: 500, resetAfterMs: 60_000 }, 2_000);
    shortage.forget('idle');
    expect(shortage.at('idle', 2_100)).to.equal(undefined);
    expect(shortage.size).to.equal(0);
  });

  it('a burst of refusals shares one peek; its answer that the parent is not short is kept keepMs (a max wait) to its last ms, then asked again', async () => {
    const shortage = new ParentShortage();
    let now = 0;
    let peeks = 0;
    const peek = async (): Promise<RefusalTiming> => (peeks++, { retryAfterMs: 0, resetAfterMs: 30_000 });
    const looks = [1, 2, 3].map(() => shortage.look('spent', () => now, peek, 100));
    expect(await Promise.all(looks)).to.deep.equal([1, 2, 3].map(() => ({ retryAfterMs: 0, resetAfterMs: 30_000 })));
    expect(peeks).to.equal(1);
    now = 50;
    expect(shortage.look('spent', () => now, peek, 100)).to.deep.equal({ retryAfterMs: 0, resetAfterMs: 29_950 });
    now = 99;
    expect(shortage.look('spent', () => now, peek, 100)).to.deep.equal({ retryAfterMs: 0, resetAfterMs: 29_901 });
    expect(peeks).to.equal(1);
    now = 100;
    await shortage.look('spent', () => now, peek, 100);
    expect(peeks).to.equal(2);
  });

  it("a refill's answer noted while a peek is on its way is not replaced by the peek's older one", async () => {
    const shortage = new ParentShortage();
    const now = 0;
    let peeks = 0;
    const peek = async (): Promise<RefusalTiming> => (peeks++, { retryAfterMs: 0, resetAfterMs: 0 });
    // A refill finds the parent short while a peek is on its way.
    const late = shortage.look('spent', () => now, peek, 100);
    shortage.note('spent', { retryAfterMs: 5000, resetAfterMs: 5000 }, now);
    await late;
    expect(shortage.look('spent', () => now, peek, 100)).to.deep.equal({ retryAfterMs: 5000, resetAfterMs: 5000 });
    expect(peeks).to.equal(1);
  });
});
