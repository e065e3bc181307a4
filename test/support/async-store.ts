import type { CounterStore } from '../../src/counters/counter-store.js';

/**
 * `store` without its synchronous operations (`sync`): a DecisionService then awaits it as it awaits
 * Redis, and uses the deny cache, while the counting stays the in-memory emulator's. `lend`: it also
 * lends units (take, giveBack), so policies with a `lease` get process leases, as in Redis mode.
 */
export function awaitingOnly(store: CounterStore, options: { lend?: boolean } = {}): CounterStore {
  const lending = options.lend && store.take && store.giveBack ? { take: store.take.bind(store), giveBack: store.giveBack.bind(store) } : {};
  return {
    ...lending,
    consume: (...args) => store.consume(...args),
    peek: (...args) => store.peek(...args),
    refund: (...args) => store.refund(...args),
    acquire: (...args) => store.acquire(...args),
    release: (...args) => store.release(...args),
    isHealthy: () => store.isHealthy(),
    close: () => store.close(),
  };
}
