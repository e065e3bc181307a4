/** A side-by-side comparison of two JSON values, as one row per leaf path present in either. */
export interface DiffRow {
  path: string;
  left: string;
  right: string;
  changed: boolean;
}

const ABSENT = '—';

function flatten(value: unknown, prefix = '', out = new Map<string, string>()): Map<string, string> {
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length > 0) {
    for (const [key, inner] of Object.entries(value as Record<string, unknown>)) flatten(inner, prefix ? `${prefix}.${key}` : key, out);
  } else {
    out.set(prefix, JSON.stringify(value));
  }
  return out;
}

export function diffRows(left: unknown, right: unknown, ignore: readonly string[] = []): DiffRow[] {
  const a = flatten(left);
  const b = flatten(right);
  const paths = [...new Set([...a.keys(), ...b.keys()])].filter((p) => !ignore.includes(p)).sort();
  return paths.map((path) => {
    const l = a.get(path) ?? ABSENT;
    const r = b.get(path) ?? ABSENT;
    return { path, left: l, right: r, changed: l !== r };
  });
}
