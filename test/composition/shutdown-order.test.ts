/**
 * The one shutdown order (src/lifecycle/shutdown-order.ts): every step closes once, last added first, each
 * awaited before the next, and a failing step neither stops the later ones nor goes unreported.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { ShutdownError, ShutdownOrder } from '../../src/lifecycle/shutdown-order.js';
import { setLogLevel } from '../../src/util/log.js';

describe('ShutdownOrder', () => {
  before(() => setLogLevel('silent'));
  after(() => setLogLevel('info'));

  it('closes every step once, in the reverse order of adding; failing steps are named and the rest still run (any steps, any failures, closed any number of times)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.record({ fails: fc.boolean(), async: fc.boolean() }), { maxLength: 12 }), fc.integer({ min: 1, max: 3 }), async (steps, closes) => {
        const order = new ShutdownOrder();
        const events: string[] = [];
        steps.forEach((step, i) =>
          order.add(`step ${i}`, async () => {
            events.push(`start ${i}`);
            if (step.async) await new Promise((resolve) => setImmediate(resolve));
            events.push(`end ${i}`);
            if (step.fails) throw new Error(`step ${i} broke`);
          }),
        );
        const reversed = steps.map((_, i) => i).reverse();
        expect(order.names()).to.deep.equal(reversed.map((i) => `step ${i}`));
        const outcomes = await Promise.all(Array.from({ length: closes }, () => order.close().then(() => undefined, (error: unknown) => error)));
        // Each step started only after the one added after it had ended: one at a time, once each.
        expect(events).to.deep.equal(reversed.flatMap((i) => [`start ${i}`, `end ${i}`]));
        const failed = reversed.filter((i) => steps[i].fails).map((i) => `step ${i}`);
        for (const outcome of outcomes) {
          if (failed.length === 0) expect(outcome).to.equal(undefined);
          else expect(outcome).to.be.instanceOf(ShutdownError).and.to.have.deep.property('failed', failed);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('refuses a step added once the shutdown has begun, naming it', async () => {
    const order = new ShutdownOrder();
    order.add('first', () => undefined);
    await order.close();
    expect(() => order.add('late', () => undefined)).to.throw(/cannot add "late"/);
  });

  it('a step that throws synchronously counts as failed like a rejected one', async () => {
    const order = new ShutdownOrder();
    const ran: string[] = [];
    order.add('a', () => ran.push('a'));
    order.add('b', () => {
      throw new Error('b broke');
    });
    order.add('c', () => ran.push('c'));
    const error = await order.close().catch((e: unknown) => e);
    expect(ran).to.deep.equal(['c', 'a']);
    expect(error).to.be.instanceOf(ShutdownError).and.to.have.deep.property('failed', ['b']);
  });

  it('opening: a start-up that fails half-way closes what it had added and throws its own error; one that succeeds closes nothing', async () => {
    const failing = new ShutdownOrder();
    const closed: string[] = [];
    const error = await failing
      .opening(async () => {
        failing.add('store', () => closed.push('store'));
        failing.add('counters', () => closed.push('counters'));
        throw new Error('the port is taken');
      })
      .catch((e: unknown) => e);
    expect((error as Error).message).to.equal('the port is taken');
    expect(closed).to.deep.equal(['counters', 'store']);

    const working = new ShutdownOrder();
    expect(await working.opening(async () => (working.add('store', () => closed.push('again')), 'started'))).to.equal('started');
    expect(closed).to.deep.equal(['counters', 'store']);
    await working.close();
    expect(closed).to.deep.equal(['counters', 'store', 'again']);
  });
});
