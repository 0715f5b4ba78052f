import crypto from 'node:crypto';
import { deliveryBody, deliveryHeaders, isDelivered, nextAttemptDelay, parseEvents, signatureOf } from './webhook-rules';

describe('webhook rules', () => {
  it('signs the raw body with HMAC-SHA256 of the secret', () => {
    const body = '{"event":"prompt.changed"}';
    const expected = crypto.createHmac('sha256', 'top-secret').update(body).digest('hex');
    expect(signatureOf('top-secret', body)).toBe(`sha256=${expected}`);
  });

  it('sends the signature only with a secret, and the delivery id on every attempt', () => {
    const delivery = { id: 'd-1', event: 'run.finished', body: '{}' };
    expect(deliveryHeaders(delivery, null)).not.toHaveProperty('x-promptwire-signature');
    expect(deliveryHeaders(delivery, 's')).toMatchObject({ 'x-promptwire-delivery': 'd-1', 'x-promptwire-event': 'run.finished', 'content-type': 'application/json' });
  });

  it('waits three times longer after each failure, capped at an hour, and stops after the last attempt', () => {
    const policy = { baseDelayMs: 1000, maxAttempts: 12 };
    expect([1, 2, 3, 4].map((attempts) => nextAttemptDelay(attempts, policy, 0.5))).toEqual([1000, 3000, 9000, 27000]);
    expect(nextAttemptDelay(11, policy, 0.5)).toBe(3_600_000);
    expect(nextAttemptDelay(12, policy, 0.5)).toBeNull();
    expect(nextAttemptDelay(1, policy, 0)).toBe(900);
    expect(nextAttemptDelay(1, policy, 1)).toBe(1100);
  });

  it('reads stored event lists leniently', () => {
    expect(parseEvents(' run.finished,bogus,run.finished,prompt.changed')).toEqual(['run.finished', 'prompt.changed']);
  });

  it('builds one body with the event, the delivery id and the data', () => {
    expect(JSON.parse(deliveryBody({ id: 'd', event: 'prompt.changed', occurredAt: 0, data: { a: 1 } }))).toEqual({ event: 'prompt.changed', delivery: 'd', occurredAt: '1970-01-01T00:00:00.000Z', data: { a: 1 } });
  });

  it('counts only 2xx as delivered', () => {
    expect([200, 204, 299].every(isDelivered)).toBe(true);
    expect([199, 301, 404, 500].some(isDelivered)).toBe(false);
  });
});
