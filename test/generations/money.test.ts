import t from 'tap';
import { newId } from '../../persistence/ids.ts';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { setPlan } from './support.ts';
import { createGeneration, getGeneration, isTerminal, ledgerByGeneration, moneyOf, serverQuery, waitFor } from './flow.ts';

t.test(
  '1,000 concurrent creates against a balance that affords exactly 100: 100 accepted, 900 refused with 402, and the ledger sums to the balance',
  async (t) => {
    const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '0', RATE_LIMIT_TEAM: '1000000' } });
    const user = await signUp(server);
    // The team plan holds 500 unfinished jobs, so the queue limit is not what binds: the credits are.
    await setPlan(server, user.workspaceId, 'team');
    const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
    // The workspace's account opened with 100 credits (a grant in the ledger, as opening an account writes it).
    const at = new Date(server.services.clock.now());
    const em = server.services.db.em();
    await em.execute(
      `insert into workspace_accounts (workspace_id, available_credits, reserved_credits, wallet_cents, reserved_wallet_cents, wallet_activated, updated_at)
     values (?, 100, 0, 0, 0, false, ?)`,
      [user.workspaceId, at],
    );
    await em.execute(
      `insert into credit_ledger (id, workspace_id, kind, credits, reserved_credits, wallet_cents, reserved_wallet_cents, generation_id, reference, created_at)
     values (?, ?, 'grant', 100, 0, 0, 0, null, 'test:opening', ?)`,
      [newId('txn', at.getTime()), user.workspaceId, at],
    );
    t.notOk(server.services.actors.isLive('ws', user.workspaceId), 'the workspace actor has not loaded yet');

    // text-mini costs 1 credit a job.
    const responses = await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: `job ${i}` } }),
      ),
    );
    const byStatus: Record<number, number> = {};
    for (const r of responses) byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
    t.same(byStatus, { 201: 100, 402: 900 }, 'exactly 100 accepted');
    for (const r of responses.filter((r) => r.status === 402)) {
      if (r.body.error?.code !== 'insufficient_credits') t.fail(`a refusal is insufficient_credits: ${JSON.stringify(r.body)}`);
    }
    const accepted = responses.filter((r) => r.status === 201).map((r) => r.body.id);
    t.equal(new Set(accepted).size, 100, '100 distinct generations');

    const query = serverQuery(server);
    const [count] = await query<{ n: string }>('select count(*)::int8 as n from generations where workspace_id = ?', [user.workspaceId]);
    t.equal(Number(count!.n), 100, 'refused requests made no generation');

    for (const id of accepted) await waitFor(server, key, user.workspaceId, id, isTerminal, 'a terminal state');
    const finals = await Promise.all(accepted.map((id) => getGeneration(server, key, user.workspaceId, id)));
    t.same(
      finals.map((g) => g.status),
      accepted.map(() => 'succeeded'),
      'all 100 ran to success',
    );

    const money = await moneyOf(query, user.workspaceId);
    t.same(
      money,
      { available: 0, reserved: 0, ledgerAvailable: 0, ledgerReserved: 0, reservations: [] },
      'the balance is spent to zero, never below, and equals its ledger',
    );
    const ledger = await ledgerByGeneration(query, user.workspaceId);
    t.equal(Object.keys(ledger).length, 100);
    const odd = accepted.filter((id) => ledger[id]?.reserve !== 1 || ledger[id]?.capture !== 1 || Object.keys(ledger[id]!).length !== 2);
    t.same(odd, [], 'each generation has exactly one reserve and one capture');
    const [sums] = await query<{ captured: string; reserved: string }>(
      `select coalesce(sum(case when kind = 'capture' then reserved_credits else 0 end), 0)::int8 as captured,
            coalesce(sum(case when kind = 'reserve' then credits else 0 end), 0)::int8 as reserved
     from credit_ledger where workspace_id = ?`,
      [user.workspaceId],
    );
    t.same(
      { captured: Number(sums!.captured), reserved: Number(sums!.reserved) },
      { captured: -100, reserved: -100 },
      '100 credits reserved and 100 captured in all',
    );
  },
);
