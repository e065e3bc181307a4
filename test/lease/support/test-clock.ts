import type { LeaseClock } from '../../../src/lease/types.js';

/** Lets every pending promise callback run (a test clock's world moves only between steps). */
export function flush(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

interface Timer {
  at: number;
  /** Ties fire in the order they were set. */
  seq: number;
  fn: () => void;
  owner: { alive: boolean } | undefined;
}

/**
 * A clock that moves only when the test moves it: `now` (ms), and timers that fire, in time order, as
 * `advanceTo` passes them. Its LeaseClocks (`clockFor`) may read it offset, and their timers may belong
 * to an owner: none fires once the owner died (a crashed server's). Used by the lease simulation
 * (test/regions/simulation.property.test.ts) and the region store's tests.
 */
export class TestClock {
  private timers: Timer[] = [];
  private seq = 0;

  constructor(public now: number) {}

  /** A clock reading `offset` ms from this one, whose timers belong to `owner` (none fire once it died). */
  clockFor(owner?: { alive: boolean }, offset = 0): LeaseClock {
    return {
      now: () => this.now + offset,
      setTimer: (fn, ms) => {
        const timer = { at: this.now + Math.max(0, ms), seq: this.seq++, fn, owner };
        this.timers.push(timer);
        return timer;
      },
      clearTimer: (handle) => {
        this.timers = this.timers.filter((t) => t !== handle);
      },
    };
  }

  /** Timers set and not yet fired nor cleared. */
  get pending(): number {
    return this.timers.length;
  }

  /**
   * Moves the clock to `to` (never back), firing the timers due by then in time order, each at its own
   * time, and letting what each sets off run before the next (timers it sets that are due fire too).
   */
  async advanceTo(to: number): Promise<void> {
    for (;;) {
      await flush();
      this.timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.timers[0];
      if (next === undefined || next.at > to) break;
      this.timers.shift();
      this.now = Math.max(this.now, next.at);
      if (next.owner === undefined || next.owner.alive) next.fn();
    }
    this.now = Math.max(this.now, to);
    await flush();
  }
}
