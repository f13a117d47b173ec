import t from 'tap';
import {
  acceptedJob,
  committedJob,
  declinedJob,
  expiringJob,
  grantedJob,
  heldJob,
  holdsSlot,
  letGoJob,
  loadedJob,
  settledJob,
  WorkspaceJobs,
  type WorkspaceJob,
  type WorkspaceJobStatus,
} from '../../actors/workspace/jobs.ts';
import type { GenerationRow } from '../../persistence/entities/generation.ts';
import type { KeyJob } from '../../domain/key-limits.ts';

const key: KeyJob = { keyId: 'key_1', day: '2026-01-02', month: '2026-01-01', credits: 5, walletCents: 0 };
const row = { id: 'gen_1', status: 'queued' } as GenerationRow;
const trace = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', requestId: 'req_1' };
const accepted = { id: 'gen_1', slotKey: 'local', deadline: 1_000, row, trace, key };

/** A job in each status, as the transitions make it. */
function inStatus(status: WorkspaceJobStatus): WorkspaceJob {
  const creating = acceptedJob(accepted, false);
  const queued = committedJob(creating);
  const active = grantedJob(queued);
  switch (status) {
    case 'creating':
      return creating;
    case 'starting':
      return acceptedJob(accepted, true);
    case 'queued':
      return queued;
    case 'active':
      return active;
    case 'held':
      return heldJob(active);
    case 'declined':
      return declinedJob(active);
    case 'settling':
      return settledJob(active)!;
  }
}

const ALL: WorkspaceJobStatus[] = ['creating', 'starting', 'queued', 'active', 'held', 'declined', 'settling'];

t.test('a create: queued once committed, or active at once when it took a slot at creation', async (t) => {
  const creating = acceptedJob(accepted, false);
  t.same(creating, { ...accepted, status: 'creating' }, 'to queue: it keeps its deadline, row, trace and key charge for then');
  t.same(committedJob(creating), { ...accepted, status: 'queued' }, 'committed: queued, nothing lost');

  const starting = acceptedJob(accepted, true);
  t.same(starting, { id: 'gen_1', status: 'starting', slotKey: 'local', key }, 'reserved at creation: no deadline, row nor trace to keep');
  t.same(committedJob(starting), { id: 'gen_1', status: 'active', slotKey: 'local', key }, 'committed: active');

  for (const status of ['queued', 'active', 'held', 'declined', 'settling'] as const) {
    const job = inStatus(status);
    t.equal(committedJob(job), job, `a commit of a job already ${status} (its state reloaded since, or it settled) changes nothing`);
  }
});

t.test('a queued job granted a slot is active, its deadline, row and trace handed on; one told to expire keeps its place', async (t) => {
  const queued = inStatus('queued');
  t.same(grantedJob(queued), { id: 'gen_1', status: 'active', slotKey: 'local', key });
  const expiring = expiringJob(queued);
  t.equal(expiring.status, 'queued', 'still queued until it settles');
  t.equal(expiring.deadline, undefined, 'its deadline is not watched any more');
  t.equal(expiring.row, row, 'its row still goes with it should it start');
});

t.test('held during a pause, let go after it; only an active job is held', async (t) => {
  const active = inStatus('active');
  t.equal(heldJob(active).status, 'held');
  t.same(letGoJob(heldJob(active)), active, 'let go: active again');
  for (const status of ALL.filter((s) => s !== 'active')) t.equal(heldJob(inStatus(status)).status, status, `a job ${status} is not held`);
  for (const status of ALL.filter((s) => s !== 'held')) t.equal(letGoJob(inStatus(status)).status, status, `a job ${status} is not let go`);
});

t.test('a declined slot: only a job holding one gives it back, and it keeps what its key counted until it settles', async (t) => {
  for (const status of ['active', 'held', 'starting'] as const) {
    t.same(declinedJob(inStatus(status)), { id: 'gen_1', status: 'declined', slotKey: 'local', key }, `from ${status}`);
  }
  for (const status of ['creating', 'queued', 'declined', 'settling'] as const) {
    t.equal(declinedJob(inStatus(status)).status, status, `a job ${status} holds no slot: unchanged`);
  }
});

t.test('settled: a job that held a slot stays, settling, until its settlement commits; any other leaves at once', async (t) => {
  for (const status of ['active', 'held', 'starting'] as const) {
    t.same(settledJob(inStatus(status)), { id: 'gen_1', status: 'settling', slotKey: 'local' }, `from ${status}: its key charge is settled, not kept`);
  }
  for (const status of ['creating', 'queued', 'declined'] as const) t.equal(settledJob(inStatus(status)), undefined, `from ${status}: gone`);
  const settling = inStatus('settling');
  t.equal(settledJob(settling), settling, 'settled twice: the first settlement still in flight stays as it is');
});

t.test('which statuses hold one of the plan slots', async (t) => {
  t.same(
    ALL.filter((status) => holdsSlot(inStatus(status))),
    ['starting', 'active', 'held'],
  );
});

t.test('a job loaded from its row: queued with its deadline and trace, or active for any status past queued', async (t) => {
  t.same(loadedJob({ id: 'gen_1', status: 'queued', slotKey: 'local', queueDeadline: 1_000, trace, key }), {
    id: 'gen_1',
    slotKey: 'local',
    key,
    status: 'queued',
    deadline: 1_000,
    trace,
  });
  for (const status of ['reserved', 'submitted', 'running']) {
    t.same(loadedJob({ id: 'gen_1', status, slotKey: 'local', queueDeadline: 1_000, trace }), { id: 'gen_1', slotKey: 'local', status: 'active' }, status);
  }
});

t.test('the map: one entry per job, in the order accepted, with its counts kept by every change', async (t) => {
  const jobs = new WorkspaceJobs();
  const job = (id: string, status: WorkspaceJobStatus): WorkspaceJob => ({ ...inStatus(status), id });
  jobs.put(job('gen_a', 'active'));
  jobs.put(job('gen_b', 'creating'));
  jobs.put(job('gen_c', 'queued'));
  jobs.put(job('gen_d', 'starting'));
  t.same(
    [...jobs.values()].map((j) => j.id),
    ['gen_a', 'gen_b', 'gen_c', 'gen_d'],
  );
  t.equal(jobs.holdingSlots, 2, 'active and starting hold slots');
  t.equal(jobs.uncommitted, 2, 'creating and starting are not committed');
  t.equal(jobs.count('queued'), 1);

  jobs.update('gen_b', committedJob);
  t.same(
    [...jobs.values()].map((j) => j.id),
    ['gen_a', 'gen_b', 'gen_c', 'gen_d'],
    'a change keeps its place: gen_b, accepted before gen_c, is ahead of it in the queue',
  );
  t.equal(jobs.count('queued'), 2);
  t.equal(jobs.count('creating'), 0);
  t.equal(jobs.uncommitted, 1);

  jobs.update('gen_a', heldJob);
  t.equal(jobs.count('held'), 1);
  t.equal(jobs.holdingSlots, 2, 'a held job still holds its slot');

  jobs.put(settledJob(jobs.get('gen_a')!)!);
  t.equal(jobs.count('settling'), 1);
  t.equal(jobs.holdingSlots, 1, 'a settling job holds no slot');

  t.equal(jobs.delete('gen_a')?.status, 'settling', 'deleted: its last record');
  t.equal(jobs.delete('gen_a'), undefined, 'twice: nothing');
  jobs.update('gen_x', heldJob);
  t.equal(jobs.get('gen_x'), undefined, 'an update of a job the workspace does not have adds none');
  t.same(
    ALL.map((status) => jobs.count(status)),
    [0, 1, 2, 0, 0, 0, 0],
    'the counts match what is left',
  );
});
