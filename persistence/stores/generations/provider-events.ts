import { boundQuery } from '../../bound-query.ts';
import { emOf } from '../orm.ts';
import type { Unit } from '../unit.ts';

/**
 * The job a provider's event is about, on its deployment: the one in flight there under the provider's job
 * id, or the one still reserved under our own id (`jobId`) whose provider job id is not written yet.
 */
export async function jobOfProviderEvent(
  unit: Unit,
  deploymentId: string,
  providerJobId: string,
  jobId: string,
): Promise<{ id: string; workspace_id: string } | undefined> {
  return (
    await boundQuery<{ id: string; workspace_id: string }>(
      emOf(unit),
      `select id, workspace_id from generations where deployment_id = ? and (
         (provider_job_id = ? and status in ('submitted', 'running')) or (id = ? and provider_job_id is null and status = 'reserved'))`,
      [deploymentId, providerJobId, jobId],
    )
  )[0];
}
