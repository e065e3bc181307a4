/** Printing: JSON for machines (`--json`), aligned plain-text tables for people. */

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export function printLines(lines: string[]): void {
  if (lines.length > 0) process.stdout.write(`${lines.join('\n')}\n`);
}

/** Rows as left-aligned columns under upper-case headers; cells are stringified. */
export function table(headers: string[], rows: unknown[][]): string[] {
  const cells = rows.map((row) => row.map(cell));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((row) => row[i]?.length ?? 0)));
  const line = (row: string[]): string => row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]))).join('  ');
  return [line(headers.map((h) => h.toUpperCase())), ...cells.map(line)];
}

function cell(value: unknown): string {
  if (value === undefined || value === null) return '-';
  if (typeof value === 'string') return value === '' ? '-' : value;
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}
