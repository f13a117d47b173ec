import t from 'tap';
import { DirectTransaction } from '../../persistence/direct-transaction.ts';
import { writeMoneyChanges } from '../../persistence/stores/workspace/money.ts';
import { storeDatabase } from '../persistence/store-support.ts';

const { db } = await storeDatabase(t);

/**
 * A money change for a workspace without an account is refused by the statement itself (write_check,
 * migration 0019), so its transaction fails on the server, also when COMMIT was sent along with it.
 */
t.test('a change for a workspace without an account fails its statement, and nothing it rode with is written', async (t) => {
  const at = new Date();
  const entry = { kind: 'grant' as const, credits: 5, reservedCredits: 0, walletCents: 0, reservedWalletCents: 0, reference: 'money-writes-test' };
  for (const commitWithStatements of [false, true]) {
    await t.rejects(
      DirectTransaction.run(
        db.em().getKnex(),
        (tx) => {
          const em = db.em();
          em.setTransactionContext(tx as never);
          return writeMoneyChanges(
            em,
            [{ workspaceId: 'ws_no_such_workspace', entries: [entry], at }],
            [
              {
                sql: `insert into actor_snapshots (kind, id, version, state, updated_at) values ('money-writes', ?, 1, '{}'::jsonb, now())`,
                params: [String(commitWithStatements)],
              },
            ],
          );
        },
        { commitWithStatements },
      ),
      { code: 'GSW01', message: 'no account for workspace ws_no_such_workspace' },
      `commitWithStatements ${commitWithStatements}`,
    );
  }
  const rows = await db.em().execute<Array<{ n: string }>>(`select count(*) as n from actor_snapshots where kind = 'money-writes'`);
  t.equal(Number(rows[0]!.n), 0, 'the write riding in the same statement was not committed');
  const ledger = await db.em().execute<Array<{ n: string }>>(`select count(*) as n from credit_ledger where reference = 'money-writes-test'`);
  t.equal(Number(ledger[0]!.n), 0, 'no ledger entry');
});
