import { randomUUID } from 'node:crypto';
import { PROVIDER_ERROR_CODES, ProviderFailure, type AdapterContext, type AdapterJob, type ProviderAdapter, type Report } from '../adapter.ts';
import { ComfyuiClient } from './client.ts';
import type { ComfyuiDeploymentTarget } from './deployment.ts';
import { PromptFollower } from './follower.ts';
import { mediaTypeOf, uploadName } from './media.ts';
import type { ComfyuiSettings } from './settings.ts';
import { socketAgent } from './socket.ts';
import { fillWorkflow, loadWorkflowTemplate, placeholderValues } from './workflow.ts';

/**
 * A ComfyUI server running one deployment's workflow. submit uploads the job's input files
 * (`POST /upload/image`), fills the workflow template and queues it (`POST /prompt`); a PromptFollower
 * then follows it by its socket and by `/history` until its end. The provider job id is
 * `<prompt_id>:<client_id>`: the client id lets a resume reopen the socket the prompt's messages go to.
 * ComfyUI sends no webhooks, so there is no verifyEvent.
 *
 * Throws at creation when the deployment's workflow is unreadable or names an unknown placeholder.
 */
export function createComfyuiAdapter(
  settings: ComfyuiSettings,
  deployment: { id: string; target: ComfyuiDeploymentTarget },
  context: AdapterContext,
): ProviderAdapter {
  const { template, problems } = loadWorkflowTemplate(deployment.target);
  if (!template) throw new Error(`ComfyUI deployment ${deployment.id}: ${problems.join('; ')}`);
  const client = new ComfyuiClient(settings, context);
  const agent = socketAgent(Math.min(context.requestTimeoutMs, 10_000), context.maxResponseBytes);
  const followers = new Map<string, PromptFollower>();
  const outputNodes = deployment.target.outputNodes;
  let closed = false;

  /** Takes the prompt off the queue, or interrupts it when it is the one running; never throws. */
  async function stopAtServer(promptId: string): Promise<void> {
    try {
      // A prompt deleted while pending may start in between: look again, up to three times.
      for (let round = 0; round < 3; round++) {
        const queue = await client.queue();
        if (queue.pending.includes(promptId)) {
          await client.deleteQueued(promptId);
          continue;
        }
        // /interrupt stops whatever runs (older servers ignore the prompt_id we send), so only when it is ours.
        if (queue.running.includes(promptId)) await client.interrupt(promptId);
        return;
      }
    } catch {
      // Cancelling is best effort: a server that cannot be reached runs the prompt to its end.
    }
  }

  function follow(promptId: string, clientId: string, job: AdapterJob, report: Report): PromptFollower {
    followers.get(promptId)?.stop();
    const follower = new PromptFollower(promptId, clientId, job, report, { client, context, settings, socketAgent: agent, outputNodes, stopAtServer }, () => {
      if (followers.get(follower.promptId) === follower) followers.delete(follower.promptId);
    });
    return follower;
  }

  return {
    kind: 'comfyui',
    maxConcurrentJobs: settings.maxConcurrentJobs,

    async submit(job, report) {
      if (closed) throw new ProviderFailure(PROVIDER_ERROR_CODES.unavailable, 'The ComfyUI adapter is closed.');
      if (!mediaTypeOf(job.mode))
        throw new ProviderFailure(PROVIDER_ERROR_CODES.inputRejected, `A ComfyUI workflow makes files; mode ${job.mode} is not served.`);
      const onWait = (ms: number) => report({ type: 'progress', detail: `ComfyUI is rate limiting (429); waiting ${Math.ceil(ms / 1000)} s.` });

      const files: Record<string, string> = {};
      const slots: Array<[string, { bytes: Buffer; contentType: string } | undefined]> = [
        ...job.inputs.images.map((file, index) => [index === 0 ? 'image' : `image${index + 1}`, file] as [string, typeof file]),
        ['mask', job.inputs.mask],
        ['video', job.inputs.videos[0]],
      ];
      for (const [slot, file] of slots) {
        // Only the files the workflow takes go up.
        if (!file || !template.placeholders.has(slot)) continue;
        files[slot] = await client.upload(file, uploadName(job.generationId, slot, file.contentType), job.deadline, onWait);
      }

      const values = placeholderValues(template, { input: job.input, params: job.params, defaults: deployment.target.defaults, files });
      const workflow = fillWorkflow(template, values);
      const clientId = randomUUID().replace(/-/g, '');
      const wanted = randomUUID();
      const follower = follow(wanted, clientId, job, report);
      follower.openSocket();
      let promptId: string;
      try {
        promptId = await client.queuePrompt(workflow, clientId, wanted, job.deadline, onWait);
      } catch (error) {
        follower.stop();
        const code = (error as ProviderFailure).code;
        // An answer lost or garbled may hide a queued prompt: take it off (current servers kept our prompt_id).
        if (code === PROVIDER_ERROR_CODES.timeout || code === PROVIDER_ERROR_CODES.badResponse || code === PROVIDER_ERROR_CODES.unavailable)
          void stopAtServer(wanted);
        throw error;
      }
      follower.promptId = promptId;
      if (closed) {
        follower.stop();
      } else {
        followers.set(promptId, follower);
        follower.start(false);
      }
      return { providerJobId: `${promptId}:${clientId}` };
    },

    resume(providerJobId, job, report) {
      if (closed) return;
      const { promptId, clientId } = parseJobId(providerJobId);
      if (!promptId) {
        report({
          type: 'failed',
          errorCode: PROVIDER_ERROR_CODES.error,
          errorMessage: `${JSON.stringify(providerJobId.slice(0, 100))} is not a ComfyUI job id.`,
        });
        return;
      }
      const follower = follow(promptId, clientId ?? randomUUID().replace(/-/g, ''), job, report);
      followers.set(promptId, follower);
      follower.openSocket();
      follower.start(true);
    },

    async cancel(providerJobId) {
      const { promptId } = parseJobId(providerJobId);
      if (!promptId) return;
      followers.get(promptId)?.stop();
      followers.delete(promptId);
      await stopAtServer(promptId);
    },

    async close() {
      closed = true;
      for (const follower of followers.values()) follower.stop();
      followers.clear();
      await agent.close().catch(() => undefined);
    },
  };
}

/** `<prompt_id>:<client_id>`; a bare prompt id is followed by polling and a socket of its own. */
export function parseJobId(providerJobId: string): { promptId?: string; clientId?: string } {
  const [promptId, clientId] = providerJobId.split(':');
  const valid = (text: string | undefined) => text !== undefined && /^[A-Za-z0-9_-]{1,128}$/.test(text);
  if (!valid(promptId)) return {};
  return valid(clientId) ? { promptId, clientId } : { promptId };
}
