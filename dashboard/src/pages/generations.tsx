import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { TERMINAL, watchGeneration, type Via } from '../live.ts';
import { currentWorkspaceId } from '../session.ts';
import { ErrorBox, Link, StatusBadge, useLoad, when } from '../ui.tsx';

const MODES = ['text_to_text', 'text_to_image', 'text_to_video', 'text_to_audio', 'image_to_image', 'image_to_video', 'video_to_video'];
const STATUSES = ['queued', 'reserved', 'submitted', 'running', 'succeeded', 'failed', 'cancelled', 'expired'];

export function GenerationsPage() {
  const workspaceId = currentWorkspaceId();
  const [filters, setFilters] = useState<{ mode: string; status: string }>({ mode: '', status: '' });
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors[cursors.length - 1];
  const page = useLoad(
    () => api<{ data: any[]; nextCursor: string | null }>('GET', '/v1/generations', { query: { workspaceId, limit: 20, cursor, ...filters } }),
    [workspaceId, cursor, filters.mode, filters.status],
  );
  const setFilter = (name: 'mode' | 'status') => (event: Event) => {
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
                <th scope="col">Generation</th>
                <th scope="col">Model</th>
                <th scope="col">Mode</th>
                <th scope="col">Status</th>
                <th scope="col">Credits</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {page.data.data.map((generation) => (
                <tr key={generation.id}>
                  <td>
                    <Link href={`/generations/${generation.id}`} class="mono">
                      {generation.id}
                    </Link>
                  </td>
                  <td>{generation.modelId}</td>
                  <td>{generation.mode.replaceAll('_', ' ')}</td>
                  <td>
                    <StatusBadge status={generation.status} />
                  </td>
                  <td>{generation.credits}</td>
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
          <h2>Timeline</h2>
          <ol class="timeline">
            {(generation.timeline ?? []).map((step: any, index: number) => (
              <li key={index}>
                <StatusBadge status={step.status} /> <time dateTime={step.at}>{when(step.at)}</time>
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
