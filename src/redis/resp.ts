import { Command } from 'ioredis';

/**
 * A script call's arguments written as Redis reads them (RESP bulk strings), by the store itself rather
 * than by ioredis. A call's arguments repeat from one call to the next (a spec's parameters, a group
 * operation's header), so the store keeps them encoded once and a call joins ready pieces: ioredis
 * would build several strings per argument on every call (the largest part of the allocation of a
 * decision over several layers; BENCHMARKS.md). The bytes on the wire are ioredis's own (test/redis/resp.test.ts).
 */

/** One argument as a RESP bulk string. */
export function bulkString(arg: string): string {
  return `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
}

/** Several arguments, one after the other. */
export function bulkStrings(args: readonly string[]): string {
  let out = '';
  for (const arg of args) out += bulkString(arg);
  return out;
}

/** The short arguments every call repeats (script names, ARGV counts, operations), each encoded once. */
const WORDS = new Map<string, string>();
const MAX_WORDS = 512;

/** An argument drawn from a small set (a script name, an operation): encoded once, then looked up. */
export function bulkWord(arg: string): string {
  let encoded = WORDS.get(arg);
  if (encoded === undefined) {
    encoded = bulkString(arg);
    if (WORDS.size < MAX_WORDS) WORDS.set(arg, encoded);
  }
  return encoded;
}

/** Units as most calls send them (0 to 63), encoded once. */
const SMALL_COUNTS = Array.from({ length: 64 }, (_, n) => bulkString(String(n)));

/** A whole number of units (or any decimal argument) as a bulk string; the small ones are made once. */
export function bulkCount(n: number): string {
  return Number.isInteger(n) && n >= 0 && n < SMALL_COUNTS.length ? SMALL_COUNTS[n] : bulkString(String(n));
}

/**
 * ARGV as pieces: each piece holds one or more encoded arguments, `count` how many in all. Pieces are
 * only appended; `reserve` keeps a place for one argument known later (a group's operation count).
 */
export class EncodedArgs {
  readonly pieces: string[] = [];
  count = 0;

  add(arg: string): void {
    this.pieces.push(bulkString(arg));
    this.count++;
  }

  /** An argument drawn from a small set (bulkWord). */
  addWord(arg: string): void {
    this.pieces.push(bulkWord(arg));
    this.count++;
  }

  /** A piece encoded beforehand that holds `args` arguments. */
  addEncoded(piece: string, args: number): void {
    this.pieces.push(piece);
    this.count += args;
  }

  /** A place for one argument, filled by `fill`; its index. */
  reserve(): number {
    this.count++;
    return this.pieces.push('') - 1;
  }

  fill(place: number, arg: string): void {
    this.pieces[place] = bulkString(arg);
  }

  append(other: EncodedArgs): void {
    for (const piece of other.pieces) this.pieces.push(piece);
    this.count += other.count;
  }
}

/**
 * An ioredis Command for EVALSHA or EVAL of `script` over `keys` and `argv`. Its `args` hold what the
 * client reads of them (the script and the keys: a Cluster routes by the first key); what it writes is
 * the whole call, joined from the encoded pieces at the moment of writing (again, should the client resend it).
 */
export function encodedScriptCommand(name: 'eval' | 'evalsha', script: string, keys: readonly string[], argv: EncodedArgs): Command {
  const command = new Command(name, [], { replyEncoding: 'utf8' });
  command.args = [script, String(keys.length), ...keys];
  command.toWritable = () => {
    const parts = [`*${3 + keys.length + argv.count}\r\n$${name.length}\r\n${name}\r\n`, bulkString(script), bulkCount(keys.length)];
    for (const key of keys) parts.push(bulkString(key));
    for (const piece of argv.pieces) parts.push(piece);
    return parts.join('');
  };
  return command;
}
