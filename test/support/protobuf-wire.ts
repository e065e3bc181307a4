/**
 * A minimal protobuf wire-format reader for tests that must read an answer the way another
 * implementation would: by field numbers alone, with no .proto file of ours involved.
 */
export type WireValue = number | Buffer;

/** Every field of one message: field number → values in order (varints as numbers, length-delimited as bytes). */
export function readFields(bytes: Buffer): Map<number, WireValue[]> {
  const fields = new Map<number, WireValue[]>();
  let at = 0;
  const varint = (): number => {
    let result = 0;
    let shift = 0;
    for (;;) {
      const byte = bytes[at++];
      result += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return result;
      shift += 7;
    }
  };
  while (at < bytes.length) {
    const tag = varint();
    const field = Math.floor(tag / 8);
    const wireType = tag % 8;
    let value: WireValue;
    if (wireType === 0) value = varint();
    else if (wireType === 2) {
      const length = varint();
      value = bytes.subarray(at, at + length);
      at += length;
    } else if (wireType === 1 || wireType === 5) {
      // fixed64 / double and fixed32 / float, kept as their raw bytes
      const length = wireType === 1 ? 8 : 4;
      value = bytes.subarray(at, at + length);
      at += length;
    } else throw new Error(`wire type ${wireType} not expected in these messages`);
    fields.set(field, [...(fields.get(field) ?? []), value]);
  }
  return fields;
}

/** The single length-delimited field `n` of a message as a sub-message's fields (empty when absent). */
export function messageField(fields: Map<number, WireValue[]>, n: number): Map<number, WireValue[]> {
  const value = fields.get(n)?.[0];
  return value instanceof Buffer ? readFields(value) : new Map();
}

export function stringField(fields: Map<number, WireValue[]>, n: number): string {
  const value = fields.get(n)?.[0];
  return value instanceof Buffer ? value.toString('utf8') : '';
}

export function varintField(fields: Map<number, WireValue[]>, n: number): number {
  const value = fields.get(n)?.[0];
  return typeof value === 'number' ? value : 0;
}

/** Encodes a length-delimited field. */
export function lengthDelimited(field: number, payload: Buffer): Buffer {
  return Buffer.concat([varintBytes(field * 8 + 2), varintBytes(payload.length), payload]);
}

/** Encodes a varint field. */
export function varintFieldBytes(field: number, value: number): Buffer {
  return Buffer.concat([varintBytes(field * 8), varintBytes(value)]);
}

function varintBytes(n: number): Buffer {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
  return Buffer.from(out);
}
