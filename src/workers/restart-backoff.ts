/**
 * How long the primary waits before restarting a worker that died: doubling from `initialMs` up to
 * `maxMs` while the slot keeps crashing, back to `initialMs` once a worker in it lived `stableMs`.
 * A worker that dies on every start (bad disk, Redis refusing it) cannot turn into a fork loop.
 */
export class RestartBackoff {
  private consecutive = 0;

  constructor(
    private readonly initialMs = 250,
    private readonly maxMs = 30_000,
    private readonly stableMs = 60_000,
  ) {}

  /** The delay before the next start of a worker that just died after `uptimeMs`. */
  next(uptimeMs: number): number {
    if (uptimeMs >= this.stableMs) this.consecutive = 0;
    const delay = Math.min(this.maxMs, this.initialMs * 2 ** this.consecutive);
    this.consecutive++;
    return delay;
  }
}
