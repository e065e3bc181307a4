/**
 * The named fields of a Lua script's reply array and how each is read, as types: what a script's
 * declared reply (src/redis/script-protocol.ts) reads into, and what an in-memory port of the script
 * (src/counters/emulator) answers with. Here, below both, so the emulator's answers are typed from the
 * same declarations without knowing Redis.
 */

/**
 * How a reply field is read: a number; a 1/0 flag; a decimal tag ('' none: null); an id (a string; 0 or
 * absent: none); pairs, a nested flat list field, value, field, value... (as HGETALL gives it) read as a Map.
 */
export type FieldKind = 'number' | 'flag' | 'tag' | 'id' | 'pairs';

/** A field's value as read (a protocol's `parse`). */
type Parsed<K extends FieldKind> = K extends 'number'
  ? number
  : K extends 'flag'
    ? boolean
    : K extends 'tag'
      ? number | null
      : K extends 'pairs'
        ? Map<string, string>
        : string | undefined;
/** A field's value as a port of the script gives it (a protocol's `encodeReply`): a tag in its wire form, '' for none; pairs as the flat list. */
type Wire<K extends FieldKind> = K extends 'tag' ? string : K extends 'pairs' ? string[] : Parsed<K>;

export type ReplyFields = Readonly<Record<string, FieldKind>>;
export type ParsedReply<F extends ReplyFields> = { -readonly [N in keyof F]: Parsed<F[N]> };
export type WireReply<F extends ReplyFields> = { -readonly [N in keyof F]: Wire<F[N]> };
