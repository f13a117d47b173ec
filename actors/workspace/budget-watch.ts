import type { ModelCatalog } from '../../domain/catalog/index.ts';
import { crossedThresholds, hasThresholds, type BudgetSettings } from '../../domain/budgets.ts';
import { claimCrossings, readBudgetFigures, readBudgetSettings } from '../../persistence/budgets.ts';
import type { Database } from '../../persistence/database.ts';
import { newId } from '../../persistence/ids.ts';
import { inNewTransaction } from '../../persistence/stores/transaction.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logger.ts';
import { writeBudgetEvents } from '../webhook/budget-event.ts';

export interface BudgetWatchDeps {
  db: Database;
  clock: Clock;
  logger: Logger;
  catalog(): ModelCatalog;
  /** Wakes a webhook endpoint's actor, after a commit gave it deliveries. */
  wake(endpointId: string): void;
}

/**
 * Budget alerts (docs/money.md): after money moved in a workspace, reads its committed figures, and for
 * each threshold past claims its crossing row (insert if absent) and writes its event and deliveries in
 * the same transaction. Which node checks, and how often, changes nothing: the row's primary key lets one
 * insert through per threshold and period, so the event is emitted once on one node or many. Checks of one
 * workspace run one at a time on a node, and the moves during a check ask for one more check after it, CHECK_GAP_MS
 * later, so a burst of jobs costs a few checks a second, not one each.
 */
/**
 * The least time between two checks of one busy workspace: a workspace whose money moves all the time is read
 * a few times a second, not once or twice per job (each check reads its settings and figures); an alert comes
 * at most this much later.
 */
export const CHECK_GAP_MS = 250;

export class BudgetWatch {
  private readonly running = new Map<string, Promise<void>>();
  private readonly again = new Set<string>();

  constructor(private readonly deps: BudgetWatchDeps) {}

  /** Money of the workspace moved (a reservation, a capture, a release committed): check it soon, off the caller's path. */
  moneyMoved(workspaceId: string): void {
    void this.check(workspaceId);
  }

  /** Checks the workspace (after any check in progress); resolves when done. Never rejects: a failure is logged, the next move checks again. */
  check(workspaceId: string): Promise<void> {
    const current = this.running.get(workspaceId);
    if (current) {
      this.again.add(workspaceId);
      return current;
    }
    const run = (async () => {
      try {
        for (;;) {
          this.again.delete(workspaceId);
          await this.checkOnce(workspaceId);
          if (!this.again.has(workspaceId)) break;
          // Moves during a check: one more check, after a pause that gathers the moves of a busy workspace into it.
          await new Promise((resolve) => setTimeout(resolve, CHECK_GAP_MS).unref());
        }
      } catch (error) {
        this.deps.logger.warn({ err: error, workspaceId }, 'budget alerts: check failed; the next change of the workspace checks again');
      } finally {
        this.running.delete(workspaceId);
      }
    })();
    this.running.set(workspaceId, run);
    return run;
  }

  /** Resolves once every check in progress has ended (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running.values()]);
  }

  private async checkOnce(workspaceId: string): Promise<void> {
    const now = this.deps.clock.now();
    // Read each time (one primary-key row): a change made through any node applies to the next move at once.
    const settings = await readBudgetSettings(openUnit(this.deps.db), workspaceId);
    if (!hasThresholds(settings)) return;
    const endpoints = await emitCrossings(this.deps.db, this.deps.catalog(), workspaceId, settings, now);
    for (const id of endpoints) this.deps.wake(id);
  }
}

/**
 * One check of a workspace against `settings` at `now`: the crossings not emitted yet are claimed and their
 * events written in one transaction. Returns the endpoints that got deliveries.
 */
export async function emitCrossings(db: Database, catalog: ModelCatalog, workspaceId: string, settings: BudgetSettings, now: number): Promise<string[]> {
  const figures = await readBudgetFigures(openUnit(db), workspaceId, now, (plan) => {
    try {
      return catalog.plan(plan).monthlyCredits;
    } catch {
      return 0;
    }
  });
  if (!figures) return [];
  const crossed = crossedThresholds(settings, figures);
  if (crossed.length === 0) return [];
  const at = new Date(now);
  return inNewTransaction(db, async (tx) => {
    const claimed = await claimCrossings(
      tx,
      workspaceId,
      crossed.map((c) => ({ ...c, eventId: newId('evt', now) })),
      at,
    );
    return writeBudgetEvents(tx, workspaceId, claimed);
  });
}
