import type { CounterStore } from '../../src/counters/counter-store.js';

/**
 * `store` without its synchronous operations (`sync`): a DecisionService then awaits it as it awaits
 * Redis, and uses the deny cache, while the counting stays the in-memory emulator's.
 */
export function awaitingOnly(store: CounterStore): CounterStore {
  return {
    consume: (...args) => store.consume(...args),
    peek: (...args) => store.peek(...args),
    refund: (...args) => store.refund(...args),
    acquire: (...args) => store.acquire(...args),
    release: (...args) => store.release(...args),
    isHealthy: () => store.isHealthy(),
    close: () => store.close(),
  };
}
