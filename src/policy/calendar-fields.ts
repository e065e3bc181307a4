import { describe } from '../model/request-context.js';
import { isTimeZone, type CalendarUnit } from '../util/calendar-period.js';
import { nearestKey } from '../util/nearest-key.js';
import { ALGORITHM_FIELDS } from './policy-field-schemas.js';

const CALENDAR_UNITS = ALGORITHM_FIELDS.calendar;

/**
 * `algorithm.calendar` and `algorithm.timezone` of a fixed_window or quota: a calendar unit in place of
 * the `window` (or `quota_period`), in an IANA zone. `given` is whether `calendar` was there (valid or
 * not), so the caller requires a window only without it.
 */
export function validateCalendarFields(
  field: (key: 'calendar' | 'timezone' | 'window' | 'quota_period') => unknown,
  fail: (key: string, message: string) => void,
  replaces: readonly ('window' | 'quota_period')[],
): { given: boolean; calendar?: CalendarUnit; timezone?: string } {
  const unit = field('calendar');
  const zone = field('timezone');
  if (unit === undefined) {
    if (zone !== undefined) fail('timezone', 'applies only with calendar (a calendar period such as "month")');
    return { given: false };
  }
  const out: { given: boolean; calendar?: CalendarUnit; timezone?: string } = { given: true };
  if (typeof unit === 'string' && CALENDAR_UNITS.includes(unit)) out.calendar = unit as CalendarUnit;
  else {
    const nearest = typeof unit === 'string' ? nearestKey(unit, CALENDAR_UNITS) : undefined;
    fail('calendar', `must be one of ${CALENDAR_UNITS.join(', ')}, got ${describe(unit)}${nearest === undefined ? '' : `; did you mean \`${nearest}\`?`}`);
  }
  const clashing = replaces.filter((key) => field(key) !== undefined);
  if (clashing.length > 0) fail('calendar', `replaces ${clashing.join(' and ')}: give calendar or ${clashing.join(' / ')}, not both`);
  if (zone !== undefined) {
    if (ALGORITHM_FIELDS.timezone.accepts(zone) && isTimeZone(zone as string)) out.timezone = zone as string;
    else fail('timezone', `must be an IANA time zone name such as "Europe/Berlin" or "UTC", got ${describe(zone)}`);
  }
  return out;
}
