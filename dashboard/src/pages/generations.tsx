import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { TERMINAL, watchGeneration, type Via } from '../live.ts';
import { currentWorkspaceId } from '../session.ts';
import { ErrorBox, Link, StatusBadge, useLoad, when } from '../ui.tsx';

const MODES = ['text_to_text', 'text_to_image', 'text_to_video', 'text_to_audio', 'image_to_image', 'image_to_video', 'video_to_video'];
const STATUSES = ['queued', 'reserved', 'submitted', 'running', 'succeeded', 'failed', 'cancelled', 'expired'];

export function GenerationsPage() {
  const workspaceId = currentWorkspaceId();
  const [filters, setFilters] = useState<{ mode: string; status: string; model: string; apiKeyId: string }>({ mode: '', status: '', model: '', apiKeyId: '' });
  const models = useLoad(() => api<{ data: Array<{ id: string; name: string }> }>('GET', '/v1/models', { query: { workspaceId } }), [workspaceId]);
  const keys = useLoad(() => api<{ data: Array<{ id: string; name: string }> }>('GET', '/v1/api-keys', { query: { workspaceId, limit: 100 } }), [workspaceId]);
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors[cursors.length - 1];
  const page = useLoad(
    () => api<{ data: any[]; nextCursor: string | null }>('GET', '/v1/generations', { query: { workspaceId, limit: 20, cursor, ...filters } }),
    [workspaceId, cursor, filters.mode, filters.status, filters.model, filters.apiKeyId],
  );
  const setFilter = (name: 'mode' | 'status' | 'model' | 'apiKeyId') => (event: Event) => {
    setFilters({ ...filters, [name]: (event.currentTarget as HTMLSelectElement).value });
    setCursors([]);
  };
  return (
    <main>
      <h1>Generations</h1>
      <div class="row filters">
        <label>
          Mode
          <select value={filters.mode} onChange={setFilter('mode')}>
            <option value="">All modes</option>
            {MODES.map((mode) => (
              <option key={mode} value={mode}>
                {mode.replaceAll('_', ' ')}
              </option>
            ))}
          </select>
        </label>
        <label>
          Status
          <select value={filters.status} onChange={setFilter('status')}>
            <option value="">All statuses</option>
            {STATUSES.map((status) => (
              <option key={status} value={status}>
                {status}
              </option>
            ))}
          </select>
        </label>
        <label>
          Model
          <select value={filters.model} onChange={setFilter('model')} data-testid="filter-model">
            <option value="">All models</option>
            {(models.data?.data ?? []).map((model) => (
              <option key={model.id} value={model.id}>
                {model.id}
              </option>
            ))}
          </select>
        </label>
        <label>
          API key
          <select value={filters.apiKeyId} onChange={setFilter('apiKeyId')} data-testid="filter-key">
            <option value="">All keys</option>
            {(keys.data?.data ?? []).map((key) => (
              <option key={key.id} value={key.id}>
                {key.name} ({key.id})
              </option>
            ))}
          </select>
        </label>
        <button type="button" class="secondary" onClick={page.reload}>
          Refresh
        </button>
      </div>
      <ErrorBox error={page.error} />
      {page.data && page.data.data.length === 0 && (
        <p class="muted">
          No generations yet. Try the <Link href="/playground">playground</Link>.
        </p>
      )}
      {page.data && page.data.data.length > 0 && (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Output</th>
                <th scope="col">Prompt</th>
                <th scope="col">Model</th>
                <th scope="col">Status</th>
                <th scope="col">Credits</th>
                <th scope="col">Duration</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {page.data.data.map((generation) => (
                <tr key={generation.id} data-generation={generation.id}>
                  <td>
                    {generation.mode.endsWith('_image') && generation.status === 'succeeded' && generation.outputAssetIds[0] ? (
                      <Thumbnail assetId={generation.outputAssetIds[0]} workspaceId={workspaceId} />
                    ) : (
                      <span class="muted small">{generation.mode.replaceAll('_', ' ')}</span>
                    )}
                  </td>
                  <td>
                    <Link href={`/generations/${generation.id}`}>
                      {excerpt(generation.params?.prompt)} <span class="mono small muted">{generation.id}</span>
                    </Link>
                  </td>
                  <td>{generation.modelId}</td>
                  <td>
                    <StatusBadge status={generation.status} />
                  </td>
                  <td>{generation.credits}</td>
                  <td>{duration(generation.createdAt, generation.completedAt)}</td>
                  <td>{when(generation.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <div class="row">
        {cursors.length > 0 && (
          <button type="button" class="secondary" onClick={() => setCursors(cursors.slice(0, -1))}>
            Previous page
          </button>
        )}
        {page.data?.nextCursor && (
          <button type="button" class="secondary" onClick={() => setCursors([...cursors, page.data!.nextCursor!])}>
            Next page
          </button>
        )}
      </div>
    </main>
  );
}

/** The start of a prompt, on one line. */
function excerpt(prompt: unknown): string {
  if (typeof prompt !== 'string') return '';
  const line = prompt.replace(/\s+/g, ' ').trim();
  return line.length > 60 ? `${line.slice(0, 59)}…` : line;
}

/** From creation to the end (or to now while it runs), as "1.2 s" or "3 min 5 s". */
function duration(createdAt: string, completedAt: string | null): string {
  const ms = Date.parse(completedAt ?? new Date().toISOString()) - Date.parse(createdAt);
  return milliseconds(ms) + (completedAt ? '' : ' so far');
}

export function milliseconds(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** An image output's thumbnail, through a short-lived download URL. */
function Thumbnail({ assetId, workspaceId }: { assetId: string; workspaceId: string }) {
  const loaded = useLoad(() => api('GET', `/v1/assets/${encodeURIComponent(assetId)}/download`, { query: { workspaceId } }), [assetId, workspaceId]);
  return loaded.data ? <img class="thumb" src={loaded.data.url} alt={`Output ${assetId}`} loading="lazy" /> : <span class="thumb" />;
}

/** One output asset, previewed by its media type through a short-lived download URL. */
export function AssetPreview({ assetId, workspaceId }: { assetId: string; workspaceId: string }) {
  const loaded = useLoad(async () => {
    const asset = await api('GET', `/v1/assets/${encodeURIComponent(assetId)}`, { query: { workspaceId } });
    const download = await api('GET', `/v1/assets/${encodeURIComponent(assetId)}/download`, { query: { workspaceId } });
    return { asset, url: download.url as string };
  }, [assetId, workspaceId]);
  if (loaded.error) return <ErrorBox error={loaded.error} />;
  if (!loaded.data) return <p class="muted">Loading {assetId}…</p>;
  const { asset, url } = loaded.data;
  const label = `Output ${asset.id} (${asset.contentType})`;
  return (
    <figure class="preview">
      {asset.mediaType === 'image' && <img src={url} alt={label} data-asset-id={asset.id} />}
      {asset.mediaType === 'audio' && <audio src={url} controls aria-label={label} />}
      {asset.mediaType === 'video' && <video src={url} controls aria-label={label} />}
      {!['image', 'audio', 'video'].includes(asset.mediaType) && <a href={url}>{label}</a>}
      <figcaption class="muted small">
        {asset.contentType}
        {asset.width ? `, ${asset.width}×${asset.height}` : ''} ·{' '}
        <a href={url} download>
          Download
        </a>
      </figcaption>
    </figure>
  );
}

export function GenerationPage({ id }: { id: string }) {
  const workspaceId = currentWorkspaceId();
  const [generation, setGeneration] = useState<any>();
  const [via, setVia] = useState<Via>();
  const [error, setError] = useState<unknown>();
  useEffect(() => {
    setGeneration(undefined);
    setError(undefined);
    // the first state comes from the detail (which also answers a missing generation), then live updates
    api('GET', `/v1/generations/${encodeURIComponent(id)}`, { query: { workspaceId } }).then(
      (first) => setGeneration((current: any) => current ?? first),
      setError,
    );
    return watchGeneration(id, workspaceId, (next) => setGeneration((current: any) => ({ ...current, ...next })), setVia);
  }, [id, workspaceId]);
  // Why it cost what it cost is on the detail read only: read once the generation ended, the rest as shown.
  const ended = generation && TERMINAL.has(generation.status);
  useEffect(() => {
    if (!ended) return;
    api('GET', `/v1/generations/${encodeURIComponent(id)}`, { query: { workspaceId } }).then(
      (detail) => setGeneration((current: any) => ({ ...current, price: detail.price, route: detail.route })),
      setError,
    );
  }, [ended, id, workspaceId]);
  const cancel = async () => {
    try {
      setGeneration(await api('POST', `/v1/generations/${encodeURIComponent(id)}/cancel`, { body: { workspaceId } }));
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <main>
      <h1>
        Generation <span class="mono small">{id}</span>
      </h1>
      <ErrorBox error={error} />
      {generation && (
        <>
          <p class="row status-line" aria-live="polite">
            Status <StatusBadge status={generation.status} />
            {!TERMINAL.has(generation.status) && (
              <span class="muted small">{via === 'stream' ? 'live' : via === 'polling' ? 'refreshing every second' : ''}</span>
            )}
            {!TERMINAL.has(generation.status) && (
              <button type="button" class="danger" onClick={cancel}>
                Cancel
              </button>
            )}
          </p>
          <dl class="facts">
            <dt>Model</dt>
            <dd>{generation.modelId}</dd>
            <dt>Mode</dt>
            <dd>{generation.mode.replaceAll('_', ' ')}</dd>
            <dt>Credits</dt>
            <dd>{generation.credits}</dd>
            <dt>Created</dt>
            <dd>{when(generation.createdAt)}</dd>
            {generation.project && (
              <>
                <dt>Project</dt>
                <dd>{generation.project}</dd>
              </>
            )}
          </dl>
          {generation.errorMessage && (
            <p class="error" role="alert">
              {generation.errorCode}: {generation.errorMessage}
            </p>
          )}
          <h2>Outputs</h2>
          {generation.textOutput && (
            <pre class="text-output" data-testid="text-output">
              {generation.textOutput}
            </pre>
          )}
          <div class="grid">
            {generation.outputAssetIds.map((assetId: string) => (
              <AssetPreview key={assetId} assetId={assetId} workspaceId={workspaceId} />
            ))}
          </div>
          {!generation.textOutput && generation.outputAssetIds.length === 0 && (
            <p class="muted">{TERMINAL.has(generation.status) ? 'No outputs.' : 'Outputs appear here when the generation succeeds.'}</p>
          )}
          {generation.price && <PriceExplained price={generation.price} route={generation.route} />}
          <h2>Timeline</h2>
          <ol class="timeline">
            {(generation.timeline ?? []).map((step: any, index: number) => (
              <li key={index}>
                <StatusBadge status={step.status} /> <time dateTime={step.at}>{when(step.at)}</time>
                {typeof step.sincePreviousMs === 'number' && <span class="muted small"> +{milliseconds(step.sincePreviousMs)}</span>}
                {step.detail && <span class="small"> {step.detail}</span>}
              </li>
            ))}
          </ol>
          <h2>Parameters</h2>
          <pre class="mono">{JSON.stringify({ params: generation.params, inputs: generation.inputs }, null, 2)}</pre>
        </>
      )}
    </main>
  );
}

/** GET /v1/generations/:id `price` and `route`: the terms, what was counted, held, charged and carried, and where it ran. */
function PriceExplained({ price, route }: { price: any; route: any }) {
  return (
    <section class="price-explained" aria-labelledby="price-title" data-testid="price-explained">
      <h2 id="price-title">Why it cost {price.chargedCredits} credits</h2>
      <p data-testid="price-explanation">{price.explanation}</p>
      <dl class="facts">
        <dt>Price</dt>
        <dd>
          {price.unit === 'tokens'
            ? `${price.inputPer1k} credits per 1,000 input tokens, ${price.outputPer1k} per 1,000 output tokens`
            : `${price.creditsPerUnit ?? '?'} credits per ${price.unit}`}{' '}
          <span class="muted small">({price.termsFrom === 'generation' ? 'as when it was created' : "the model's price now"})</span>
        </dd>
        <dt>Counted</dt>
        <dd>
          {price.unit === 'tokens'
            ? `${price.counted.inputTokens ?? 0} input, ${price.counted.outputTokens ?? 0} output tokens`
            : `${price.counted.units} ${price.unit}`}
        </dd>
        <dt>Exact cost</dt>
        <dd>{price.exactCost ?? 'not known yet'} credits</dd>
        <dt>Held at creation</dt>
        <dd>
          {price.reservedCredits} credits{price.reservedWalletCents ? ` and $${(price.reservedWalletCents / 100).toFixed(2)}` : ''}
        </dd>
        <dt>Charged</dt>
        <dd>
          {price.chargedCredits} credits ({price.chargedFromBalance} from the balance, ${(price.chargedWalletCents / 100).toFixed(2)} from the wallet)
        </dd>
        {price.carryBeforeNano !== null && (
          <>
            <dt>Token carry</dt>
            <dd>
              {Number(price.carryBeforeNano) / 1e9} before, {Number(price.carryAfterNano) / 1e9} after (credits)
            </dd>
          </>
        )}
        {route && (
          <>
            <dt>Ran on</dt>
            <dd>
              {route.deploymentId ?? 'its model'} ({route.provider}) · attempts:{' '}
              {route.attempts.length === 0 ? 'none yet' : route.attempts.map((a: any) => `${a.number}. ${a.deploymentId} ${a.outcome}`).join('; ')}
            </dd>
          </>
        )}
      </dl>
      <ul class="small">
        {price.ledger.map((entry: any) => (
          <li key={entry.id}>{entry.description}</li>
        ))}
      </ul>
    </section>
  );
}
