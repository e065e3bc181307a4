export interface ManualClock {
  /** The time the clock reads; a test sets it by hand. */
  now: number;
  /** Reads `now`: the function to hand to the code under test. */
  readonly read: () => number;
}

/** A clock set by hand, back at `start` before each test of the enclosing describe(). */
export function manualClock(start: number): ManualClock {
  const clock: ManualClock = { now: start, read: () => clock.now };
  beforeEach(() => {
    clock.now = start;
  });
  return clock;
}
