import type { LayerCounter, LayeredGrant } from './rlqs-grant.js';
import type { LocalMs } from './types.js';

/** A grant in an Envoy's hands: what it holds, what its reports say it spent. */
export interface HeldGrant {
  grant: LayeredGrant;
  layers: readonly LayerCounter[];
  /** The assignment's end by this server's clock (Envoy's comes a little later: it counts from receipt). */
  expiresAt: LocalMs;
  spent: number;
  /** Reports received since the grant stopped being the bucket's active one (replaced or expired). */
  reportsSinceEnd: number;
}

/** Reports after its end that settle a grant: the first may have left Envoy before Envoy let the grant go. */
const REPORTS_TO_SETTLE = 2;

/**
 * The grants of one bucket of one stream, and what its usage reports spent of them.
 *
 * A report's `num_requests_allowed` is counted against the oldest grant not yet spent out, then the
 * next: Envoy spends a grant before the one that replaced it, so this never counts a grant as less spent
 * than it is. A grant ends when replaced or past its life; the second report after that settles it (its
 * unspent units go back): the first may have been sent while Envoy still spent from it. That assumes
 * reports at least one round trip apart, which any reporting interval of Envoy's is.
 */
export class BucketLedger {
  private active: HeldGrant | undefined;
  private ended: HeldGrant[] = [];

  get current(): HeldGrant | undefined {
    return this.active;
  }

  /** The new grant becomes the active one; the one it replaces ends now. */
  replace(next: HeldGrant | undefined): void {
    if (this.active !== undefined) this.ended.push(this.active);
    this.active = next;
  }

  /** One usage report: its allowed requests counted, the active grant ended if past its life; the grants it settles. */
  report(allowed: number, now: LocalMs): HeldGrant[] {
    if (this.active !== undefined && this.active.expiresAt <= now) this.replace(undefined);
    let rest = allowed;
    for (const held of [...this.ended, ...(this.active ? [this.active] : [])]) {
      const spend = Math.min(rest, held.grant.units - held.spent);
      held.spent += spend;
      rest -= spend;
    }
    for (const held of this.ended) held.reportsSinceEnd++;
    const settled = this.ended.filter((held) => held.reportsSinceEnd >= REPORTS_TO_SETTLE);
    if (settled.length > 0) this.ended = this.ended.filter((held) => held.reportsSinceEnd < REPORTS_TO_SETTLE);
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
