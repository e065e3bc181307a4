import { describe } from '../model/request-context.js';
import { ALGORITHM_KEYS, ANY_ALGORITHM_KEYS } from '../schema/policy.js';
import { isObject } from '../util/json-shape.js';
import { nearestKey } from '../util/nearest-key.js';
import { integerWording, isNumberIn } from './bound-wording.js';
import { algorithmFieldReader, leaseTtl, subWindowCount, type AlgorithmFieldReader } from './algorithm-field-reader.js';
import { validateCalendarFields } from './calendar-fields.js';
import { oneOf, own, type ErrFn } from './field-reading.js';
import { ALGORITHM_FIELDS, ALGORITHM_TYPE_NAMES as ALGORITHM_TYPES, algorithmRangeOf } from './policy-field-schemas.js';
import type { AlgorithmConfig, AlgorithmType, LimitAction } from './types.js';
import { unknownFieldErrors } from './unknown-fields.js';

// ---------------------------------------------------------------------------------------------------
// AlgorithmConfig

export function validateAlgorithm(v: unknown, action: LimitAction | undefined, err: ErrFn): AlgorithmConfig | undefined {
  if (v === undefined) {
    err('algorithm', `is required (an object with "type": one of ${oneOf(ALGORITHM_TYPES)})`);
    return undefined;
  }
  if (!isObject(v)) {
    err('algorithm', `must be an object with "type": one of ${oneOf(ALGORITHM_TYPES)}, got ${describe(v)}`);
    return undefined;
  }
  let ok = true;
  const fail = (k: string, message: string): void => {
    err(`algorithm.${k}`, message);
    ok = false;
  };
  const rawType = own(v, 'type');
  let type: AlgorithmType | undefined;
  if (rawType === undefined) fail('type', `is required (one of ${oneOf(ALGORITHM_TYPES)})`);
  else if (typeof rawType !== 'string' || !ALGORITHM_TYPES.includes(rawType)) {
    const nearest = typeof rawType === 'string' ? nearestKey(rawType, ALGORITHM_TYPES) : undefined;
    fail('type', `must be one of ${oneOf(ALGORITHM_TYPES)}, got ${describe(rawType)}${nearest === undefined ? '' : `; did you mean \`${nearest}\`?`}`);
  } else type = rawType as AlgorithmType;
  // Without a known type, the fields are still checked (all problems at once), against every algorithm's.
  const applies = type === undefined ? ANY_ALGORITHM_KEYS : ALGORITHM_KEYS[type];
  const doesNotApply = (key: string): string | undefined =>
    type !== undefined && ANY_ALGORITHM_KEYS.includes(key) && nearestKey(key, applies) === undefined
      ? `does not apply to ${type} (${type} fields: ${applies.join(', ')})`
      : undefined;
  for (const e of unknownFieldErrors(v, applies, 'algorithm', type ?? 'algorithm', doesNotApply)) {
    err(e.field, e.message);
    ok = false;
  }
  const reader = algorithmFieldReader(v, type, applies, fail);
  const { field, integer } = reader;
  const out: AlgorithmConfig = { type: type! };
  readTypeFields(type, reader, fail, out);

  out.cost_per_request = integer('cost_per_request', 'units per unit of quantity');
  const rate = field('sample_rate');
  const { minimum, maximum } = ALGORITHM_FIELDS.sampleRate;
  if (rate !== undefined) {
    if (isNumberIn(rate, ALGORITHM_FIELDS.sampleRate)) out.sample_rate = rate;
    else fail('sample_rate', `must be a number from ${minimum} to ${maximum}, got ${describe(rate)}`);
  } else if (action === 'sample') {
    fail('sample_rate', `is required when action is sample (the fraction of over-limit requests let through, ${minimum} to ${maximum})`);
  }

  if (!ok || type === undefined) return undefined;
  // Drop the keys left undefined so the stored algorithm holds exactly what applies.
  for (const k of Object.keys(out) as (keyof AlgorithmConfig)[]) if (out[k] === undefined) delete out[k];
  return out;
}

/** The fields of one algorithm type into `out`, each checked (a type not known: every field for its form alone). */
function readTypeFields(type: AlgorithmType | undefined, reader: AlgorithmFieldReader, fail: ErrFn, out: AlgorithmConfig): void {
  const { field, integer, rate, duration } = reader;
  switch (type) {
    case undefined: {
      // Each field a known type would read, checked for its form alone (nothing is required).
      integer('limit');
      subWindowCount(field('sub_window_count'), duration('window'), fail);
      duration('quota_period');
      integer('burst', 'the bucket capacity');
      rate('refill_rate');
      rate('leak_rate');
      integer('max_concurrency');
      leaseTtl(field('lease_ttl'), fail);
      validateCalendarFields(field, fail, []);
      break;
    }
    case 'fixed_window': {
      out.limit = integer('limit');
      const periods = validateCalendarFields(field, fail, ['window']);
      out.window = duration('window', !periods.given)?.text;
      out.calendar = periods.calendar;
      out.timezone = periods.timezone;
      break;
    }
    case 'sliding_window_log': {
      out.limit = integer('limit');
      out.window = duration('window')?.text;
      break;
    }
    case 'sliding_window_counter': {
      out.limit = integer('limit');
      const window = duration('window');
      out.window = window?.text;
      out.sub_window_count = subWindowCount(field('sub_window_count'), window, fail);
      break;
    }
    case 'token_bucket':
    case 'leaky_bucket': {
      const rateKey = type === 'token_bucket' ? 'refill_rate' : 'leak_rate';
      out.limit = integer('limit');
      const given = rate(rateKey);
      // The window only sets the default rate (limit per window); with an explicit rate it is optional.
      const rateGiven = field(rateKey) !== undefined;
      out.window = duration('window', !rateGiven)?.text;
      out.burst = integer('burst', 'the bucket capacity');
      if (given !== undefined) out[rateKey] = given;
      break;
    }
    case 'concurrency': {
      const max = integer('max_concurrency');
      const limit = integer('limit');
      if (field('max_concurrency') === undefined && field('limit') === undefined) {
        fail('max_concurrency', `is required for concurrency (${integerWording(algorithmRangeOf(type, 'max_concurrency'))}; "limit" is accepted instead)`);
      }
      out.max_concurrency = max;
      out.limit = limit;
      out.lease_ttl = leaseTtl(field('lease_ttl'), fail);
      break;
    }
    case 'quota': {
      out.limit = integer('limit', 'the budget per period');
      const hasPeriod = field('quota_period') !== undefined;
      const hasWindow = field('window') !== undefined;
      const periods = validateCalendarFields(field, fail, ['quota_period', 'window']);
      out.calendar = periods.calendar;
      out.timezone = periods.timezone;
      if (!hasPeriod && !hasWindow && !periods.given) {
        fail('quota_period', 'is required for quota (a duration string such as "1h" or "30d"; "window" is accepted instead)');
      }
      out.quota_period = duration('quota_period')?.text;
      out.window = duration('window')?.text;
      break;
    }
  }
}
