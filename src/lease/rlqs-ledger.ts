import type { LayerCounter, LayeredGrant } from './rlqs-grant.js';
import type { LocalMs } from './types.js';

/** A grant in an Envoy's hands: what it holds, what its reports say it spent. */
export interface HeldGrant {
  grant: LayeredGrant;
  layers: readonly LayerCounter[];
  /** The assignment's end by this server's clock (Envoy's comes a little later: it counts from receipt). */
  expiresAt: LocalMs;
  spent: number;
  /** Which counter its units came from (the layers' counters and window tags): grants of one counter are credited together. */
  counter?: string;
  /** When it stopped being the bucket's active grant (replaced, or its life over), by this server's clock. */
  endedAt?: LocalMs;
}

/** How long after its end a report settles a grant: the hold, which the reporting interval, and so a round trip, stays within. */
function settleAfterMs(held: HeldGrant): number {
  return Math.min(...held.layers.map((layer) => layer.holdMs));
}

/**
 * The grants of one bucket of one stream, and what its usage reports spent of them.
 *
 * A report's `num_requests_allowed` is counted, per counter, against the oldest grant of that counter
 * not yet spent out, then the next: Envoy spends a grant before the one that replaced it, so this never
 * counts a grant as less spent than it is. Grants of different counters (an older window, a replaced
 * policy) are credited each from the whole report: a report does not say which counter its requests
 * came from, so a grant of another counter counts as spent up to everything reported since it was
 * sent, and only units surely unspent go back to the counter they came from (under, never over). A grant ends when replaced or past its life; the first report received a hold after that
 * settles it (its unspent units go back). A report counted sooner may have left Envoy before the
 * replacement reached it: Envoy reports at once when it applies a new strategy, so two reports can be
 * closer together than a round trip. A hold later, a report was sent after Envoy let the grant go, as long
 * as a round trip is shorter than the hold (docs/envoy.md asks for a hold above the reporting interval).
 */
export class BucketLedger {
  private active: HeldGrant | undefined;
  private ended: HeldGrant[] = [];

  get current(): HeldGrant | undefined {
    return this.active;
  }

  /** The new grant becomes the active one; the one it replaces ends `now`. */
  replace(next: HeldGrant | undefined, now: LocalMs): void {
    if (this.active !== undefined) {
      this.active.endedAt = now;
      this.ended.push(this.active);
    }
    this.active = next;
  }

  /** One usage report: its allowed requests counted, the active grant ended if past its life; the grants it settles. */
  report(allowed: number, now: LocalMs): HeldGrant[] {
    if (this.active !== undefined && this.active.expiresAt <= now) this.replace(undefined, this.active.expiresAt);
    const rest = new Map<string | undefined, number>();
    for (const held of [...this.ended, ...(this.active ? [this.active] : [])]) {
      const left = rest.get(held.counter) ?? allowed;
      const spend = Math.min(left, held.grant.units - held.spent);
      held.spent += spend;
      rest.set(held.counter, left - spend);
    }
    const due = (held: HeldGrant) => held.endedAt! + settleAfterMs(held) <= now;
    const settled = this.ended.filter(due);
    if (settled.length > 0) this.ended = this.ended.filter((held) => !due(held));
    return settled;
  }

  /** Every grant still held (the active one last), removed: for the stream's end or the bucket's abandon. */
  takeAll(): HeldGrant[] {
    const all = [...this.ended, ...(this.active ? [this.active] : [])];
    this.ended = [];
    this.active = undefined;
    return all;
  }

  /** Units taken for this bucket that no report said were spent. */
  unitsHeld(): number {
    let held = this.active ? this.active.grant.units - this.active.spent : 0;
    for (const grant of this.ended) held += grant.grant.units - grant.spent;
    return held;
  }
}
