/**
 * "Did you mean …?" for a misspelt key: the one known key nearest to what was written, when it is
 * close enough to be the likely intent and no other known key is as close. The policy validator (so
 * the API, the CLI and policy files alike) names it in its "unknown field" messages.
 *
 * Distance is the optimal string alignment distance (insertions, deletions, substitutions and
 * transpositions of neighbours each cost 1), compared case-insensitively. Close enough: at most one
 * edit per three characters of the longer word, and always one (so every single-character typo of
 * a two-letter key is caught).
 */
export function nearestKey(written: string, known: readonly string[]): string | undefined {
  const word = written.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  let tie = false;
  for (const candidate of known) {
    const limit = Math.max(1, Math.floor(Math.max(word.length, candidate.length) / 3));
    const distance = editDistance(word, candidate.toLowerCase(), limit);
    if (distance > limit) continue;
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
      tie = false;
    } else if (distance === bestDistance) tie = true;
  }
  return tie ? undefined : best;
}

/** The optimal string alignment distance between `a` and `b`, or `limit + 1` once it is surely above `limit`. */
export function editDistance(a: string, b: string, limit = Infinity): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  // Three rows of the dynamic programme: two back (for transpositions), previous and current.
  let twoBack = new Array<number>(b.length + 1).fill(0);
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  let current = new Array<number>(b.length + 1).fill(0);
  for (let i = 1; i <= a.length; i++) {
    current[0] = i;
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, twoBack[j - 2] + 1);
      current[j] = d;
      if (d < rowMin) rowMin = d;
    }
    if (rowMin > limit) return limit + 1;
    [twoBack, previous, current] = [previous, current, twoBack];
  }
  return previous[b.length];
}
