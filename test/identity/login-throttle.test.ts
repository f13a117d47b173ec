import t from 'tap';
import type { Test } from 'tap';
import { Agent, request } from 'undici';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { signUp, uniqueEmail } from '../helpers/identity.ts';
import { LOGIN_THROTTLE } from '../../http/auth/login-throttle.ts';

// Clients on different source addresses: Linux routes all of 127/8 to loopback, so a socket bound to
// 127.0.0.2 reaches the server on 127.0.0.1 and the server sees 127.0.0.2 as the client's address.
// (On PostgreSQL + Redis these tests run with the Redis back end: TEST_REDIS_URL.)

interface Answer {
  status: number;
  code: string | undefined;
  retryAfter: number | undefined;
  cookie: boolean;
}

function client(t: Test, server: TestServer, localAddress: string) {
  const agent = new Agent({ localAddress });
  t.teardown(() => agent.close());
  return async (email: string, password: string): Promise<Answer> => {
    const response = await request(`${server.url}/v1/auth/login`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password }),
    });
    const text = await response.body.text();
    const retryAfter = response.headers['retry-after'];
    return {
      status: response.statusCode,
      code: text ? JSON.parse(text).error?.code : undefined,
      retryAfter: retryAfter === undefined ? undefined : Number(retryAfter),
      cookie: response.headers['set-cookie'] !== undefined,
    };
  };
}

t.test('failures from one address throttle that address with doubling waits; the right password from another address gets in', async (t) => {
  const clock = new ManualClock();
  const server = await startTestServer(t, { clock });
  const owner = await signUp(server, { password: 'the right password' });
  const fromA = client(t, server, '127.0.0.2');
  const fromB = client(t, server, '127.0.0.3');

  for (let i = 0; i < LOGIN_THROTTLE.freeFailures; i++) t.equal((await fromA(owner.email, `guess ${i}`)).status, 401, `free failure ${i + 1}`);
  const throttled = await fromA(owner.email, 'the right password');
  t.match(throttled, { status: 429, code: 'rate_limited', retryAfter: 1, cookie: false }, 'A waits, even with the right password');

  t.match(await fromB(owner.email, 'the right password'), { status: 200, cookie: true }, 'the owner from B is not held back by A');
  t.equal((await fromB(owner.email, 'a typo')).status, 401, 'B has its own count');

  // Each failure past the free ones doubles A's wait, up to the cap.
  const waits: number[] = [];
  let wait = 1;
  for (let i = 0; i < 12; i++) {
    clock.advance(wait * 1000 - 1);
    t.equal((await fromA(owner.email, 'still guessing')).status, 429, `not a millisecond before the ${wait} s wait ends`);
    clock.advance(1);
    t.equal((await fromA(owner.email, 'still guessing')).status, 401, `a guess after ${wait} s`);
    const next = await fromA(owner.email, 'still guessing');
    t.equal(next.status, 429);
    wait = next.retryAfter!;
    waits.push(wait);
  }
  t.same(waits, [2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900, 900], 'doubling from 1 s, capped at 15 minutes');
  t.match(await fromB(owner.email, 'the right password'), { status: 200 }, 'B still gets in');

  clock.advance(wait * 1000);
  t.match(await fromA(owner.email, 'the right password'), { status: 200, cookie: true }, 'the right password from A after the wait');
  for (let i = 0; i < LOGIN_THROTTLE.freeFailures; i++) t.equal((await fromA(owner.email, 'typo')).status, 401, 'a success starts A afresh');
});

t.test('an account failing from many addresses: an address that failed waits for the window to end, a clean one still gets in', async (t) => {
  const clock = new ManualClock(); // starts on a window boundary
  const server = await startTestServer(t, { clock });
  const owner = await signUp(server, { password: 'the right password' });
  const bots = ['127.0.0.10', '127.0.0.11', '127.0.0.12', '127.0.0.13'].map((address) => client(t, server, address));
  t.equal(bots.length * LOGIN_THROTTLE.freeFailures, LOGIN_THROTTLE.perAccount, "the bots' free failures reach the account ceiling");
  for (const bot of bots) for (let i = 0; i < LOGIN_THROTTLE.freeFailures; i++) t.equal((await bot(owner.email, `guess ${i}`)).status, 401);

  clock.advance(60_000);
  const held = await bots[0]!(owner.email, 'another guess');
  t.match(held, { status: 429, code: 'rate_limited', retryAfter: 840 }, 'past its own 1 s wait, a failed address now waits for the end of the window');

  const newcomer = client(t, server, '127.0.0.20');
  t.equal((await newcomer(owner.email, 'one guess')).status, 401, 'a clean address gets a guess');
  t.match(await newcomer(owner.email, 'a second guess'), { status: 429, retryAfter: 840 }, 'and only one while the account is over its ceiling');
  t.match(await client(t, server, '127.0.0.21')(owner.email, 'the right password'), { status: 200, cookie: true }, 'the owner from a clean address gets in');

  clock.advance(840_000);
  t.equal((await newcomer(owner.email, 'a guess in the next window')).status, 401, 'a new window');
  t.equal((await newcomer(owner.email, 'the right password')).status, 200);
});

t.test('one address failing on many accounts is held back for all of them, other addresses are not', async (t) => {
  const clock = new ManualClock();
  const server = await startTestServer(t, { clock });
  const owner = await signUp(server, { password: 'the right password' });
  const sprayer = client(t, server, '127.0.0.30');
  for (let i = 0; i < LOGIN_THROTTLE.perAddress; i++) t.equal((await sprayer(uniqueEmail('spray'), 'guess')).status, 401);
  t.match(await sprayer(owner.email, 'the right password'), { status: 429, code: 'rate_limited', retryAfter: 900 }, 'the address is over its budget');
  t.match(await client(t, server, '127.0.0.31')(owner.email, 'the right password'), { status: 200 }, 'another address is not');
  clock.advance(900_000);
  t.match(await sprayer(owner.email, 'the right password'), { status: 200 }, 'the next window');
});
