import { FixedWindowSlot, type Slot } from '../emulator/keyspace.js';
import { slotLine } from './snapshot-format.js';

/** A key JSON would have to escape (quote, backslash, control characters, the two JS line separators). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\u2028\u2029]/;
const COMMA = 0x2c;

/**
 * The bytes of one slice of a snapshot, in a buffer reused from slice to slice. A fixed_window key (most
 * keys, and a million of them is the case to serve) is encoded without allocating: its key copied in,
 * its three integers written digit by digit. Allocating a few strings per key instead made the writer
 * trigger young-generation collections often enough to show in decision latency (BENCHMARKS.md, "Memory
 * counters across restarts"). Other slots, and keys JSON must escape, go through slotLine.
 */
export class SnapshotChunk {
  private buffer = Buffer.allocUnsafe(1 << 20);
  length = 0;

  /** The bytes so far; valid until the next `reset`. */
  get bytes(): Buffer {
    return this.buffer.subarray(0, this.length);
  }

  reset(): void {
    this.length = 0;
  }

  /** Appends the line of one key (snapshot-format.ts). */
  add(key: string, slot: Slot): void {
    if (!(slot instanceof FixedWindowSlot) || NEEDS_ESCAPE.test(key)) return this.text(slotLine(key, slot));
    this.room(key.length * 3 + 80);
    this.text('[0,"');
    this.length += this.buffer.write(key, this.length);
    this.text('",');
    this.number(slot.windowNumber);
    this.buffer[this.length++] = COMMA;
    this.number(slot.windowMs);
    this.buffer[this.length++] = COMMA;
    this.number(slot.used);
    this.text(']\n');
  }

  private text(text: string): void {
    this.room(text.length * 3);
    this.length += this.buffer.write(text, this.length);
  }

  /** A safe non-negative integer digit by digit; anything else as JavaScript prints it (what JSON reads back). */
  private number(n: number): void {
    if (!Number.isSafeInteger(n) || n < 0) return this.text(String(n));
    let digits = 1;
    for (let rest = n; rest >= 10; rest = Math.floor(rest / 10)) digits++;
    for (let at = this.length + digits - 1, rest = n; at >= this.length; at--, rest = Math.floor(rest / 10)) this.buffer[at] = 0x30 + (rest % 10);
    this.length += digits;
  }

  private room(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.length + bytes));
    this.buffer.copy(grown, 0, 0, this.length);
    this.buffer = grown;
  }
}
