import t from 'tap';
import { addMonth, addMonths, nextPeriodEnd } from '../../actors/billing/period.ts';

const anchor = Date.UTC(2026, 0, 31, 12);

t.test('the period after one ending at the anchor ends a month after it', async (t) => {
  t.equal(nextPeriodEnd(anchor, anchor), addMonth(anchor));
  t.equal(nextPeriodEnd(anchor, anchor + 1), addMonth(anchor), 'any end before the first month is over');
  t.equal(new Date(nextPeriodEnd(anchor, anchor)).toISOString(), '2026-02-28T12:00:00.000Z');
});

t.test('later periods count whole months from the anchor', async (t) => {
  t.equal(nextPeriodEnd(anchor, addMonths(anchor, 1)), addMonths(anchor, 2));
  t.equal(new Date(nextPeriodEnd(anchor, addMonths(anchor, 1))).toISOString(), '2026-03-31T12:00:00.000Z', 'back to the 31st after February');
  t.equal(nextPeriodEnd(anchor, addMonths(anchor, 2) - 1), addMonths(anchor, 2), 'an end a moment before a month boundary');
});
