import { useState } from 'preact/hooks';
import { api, ApiFailure } from '../api.ts';
import { currentWorkspaceId } from '../session.ts';
import { bytes, ErrorBox, Link, Notice, useLoad, when } from '../ui.tsx';
import { AssetPreview } from './generations.tsx';

/** PUT to the presigned URL with XMLHttpRequest, whose upload events give the progress bar. */
function put(url: string, headers: Record<string, string>, file: File, onProgress: (fraction: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open('PUT', url);
    for (const [name, value] of Object.entries(headers)) request.setRequestHeader(name, value);
    request.upload.onprogress = (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    };
    request.onload = () => {
      if (request.status >= 200 && request.status < 300) return resolve();
      let message = `The upload failed with status ${request.status}.`;
      try {
        message = JSON.parse(request.responseText).error.message ?? message;
      } catch {
        /* not an envelope */
      }
      reject(new ApiFailure(request.status, 'upload_failed', message));
    };
    request.onerror = () => reject(new ApiFailure(0, 'network_error', 'The upload was interrupted; try again.'));
    request.send(file);
  });
}

export function AssetsPage() {
  const workspaceId = currentWorkspaceId();
  const [favorites, setFavorites] = useState(false);
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors[cursors.length - 1];
  const page = useLoad(
    () =>
      api<{ data: any[]; nextCursor: string | null }>('GET', '/v1/assets', {
        query: { workspaceId, limit: 24, cursor, favorite: favorites ? 'true' : undefined },
      }),
    [workspaceId, cursor, favorites],
  );
  const [progress, setProgress] = useState<number>();
  const [uploaded, setUploaded] = useState<string>();
  const [error, setError] = useState<unknown>();

  const upload = async (event: Event) => {
    event.preventDefault();
    const formElement = event.currentTarget as HTMLFormElement;
    const file = (formElement.elements.namedItem('file') as HTMLInputElement).files?.[0];
    if (!file) return;
    setError(undefined);
    setUploaded(undefined);
    setProgress(0);
    try {
      const target = await api('POST', '/v1/files/upload-url', {
        body: { workspaceId, filename: file.name, contentType: file.type || 'application/octet-stream', bytes: file.size },
      });
      await put(target.url, target.headers, file, setProgress);
      const asset = await api('POST', '/v1/files/upload-complete', { body: { workspaceId, uploadId: target.uploadId } });
      setUploaded(asset.id);
      formElement.reset();
      setCursors([]);
      page.reload();
    } catch (failure) {
      setError(failure);
    } finally {
      setProgress(undefined);
    }
  };
  const toggleFavorite = async (asset: any) => {
    try {
      await api('PATCH', `/v1/assets/${encodeURIComponent(asset.id)}`, { body: { workspaceId, favorite: !asset.favorite } });
      page.reload();
    } catch (failure) {
      setError(failure);
    }
  };

  return (
    <main>
      <h1>Assets</h1>
      <h2>Upload</h2>
      <form onSubmit={upload} class="inline">
        <label>
          File (image, video or audio)
          <input name="file" type="file" required accept="image/*,video/*,audio/*" />
        </label>
        <button type="submit" disabled={progress !== undefined}>
          Upload
        </button>
      </form>
      {progress !== undefined && (
        <label class="progress">
          Uploading
          <progress max={1} value={progress} aria-valuetext={`${Math.round(progress * 100)}%`} />
        </label>
      )}
      {uploaded && (
        <Notice>
          Uploaded: asset{' '}
          <span class="mono" data-testid="uploaded-asset">
            {uploaded}
          </span>
        </Notice>
      )}
      <ErrorBox error={error} />
      <div class="row filters">
        <label class="check">
          <input
            type="checkbox"
            checked={favorites}
            onChange={(event) => {
              setFavorites((event.currentTarget as HTMLInputElement).checked);
              setCursors([]);
            }}
          />
          Favorites only
        </label>
      </div>
      <ErrorBox error={page.error} />
      {page.data && page.data.data.length === 0 && <p class="muted">No assets yet.</p>}
      <div class="grid">
        {page.data?.data.map((asset) => (
          <article key={asset.id} class="card" data-asset-id={asset.id}>
            <AssetPreview assetId={asset.id} workspaceId={workspaceId} />
            <p class="small">
              <span class="mono">{asset.name ?? asset.id}</span>
              <br />
              {bytes(asset.bytes)} · {when(asset.createdAt)}
            </p>
            {asset.sourceGenerationId && (
              <p class="small">
                From <Link href={`/generations/${asset.sourceGenerationId}`}>its generation</Link>
              </p>
            )}
            <button type="button" class="secondary" aria-pressed={asset.favorite} onClick={() => toggleFavorite(asset)}>
              {asset.favorite ? '★ Favorite' : '☆ Add to favorites'}
            </button>
          </article>
        ))}
      </div>
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
