import { useMemo, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { navigate } from '../router.ts';
import { currentWorkspaceId } from '../session.ts';
import { ErrorBox, useLoad } from '../ui.tsx';
import { priceText, type Pricing } from '../prices.ts';

interface Model {
  id: string;
  name: string;
  mode: string;
  description: string;
  credits: number;
  pricing: Pricing;
  available: boolean;
  parameterSchema: Schema;
}
interface Schema {
  type?: string;
  properties?: Record<string, Property>;
  required?: string[];
}
interface Property {
  type?: string | string[];
  enum?: unknown[];
  description?: string;
  default?: unknown;
  minimum?: number;
  maximum?: number;
  maxLength?: number;
  items?: Property;
}

const LONG_TEXT = new Set(['prompt', 'systemPrompt', 'negativePrompt', 'text']);

/** One form field per property of the model's parameterSchema; the service validates the whole. */
function ParamField({ name, property, required }: { name: string; property: Property; required: boolean }) {
  const id = `param-${name}`;
  const label = (
    <>
      {name}
      {required ? ' (required)' : ''}
    </>
  );
  const hint = property.description ? <span class="muted small">{property.description}</span> : null;
  const type = Array.isArray(property.type) ? property.type.find((t) => t !== 'null') : property.type;
  if (property.enum) {
    return (
      <label for={id}>
        {label}
        {hint}
        <select id={id} name={name} required={required}>
          {!required && <option value="">(default)</option>}
          {property.enum.map((value) => (
            <option key={String(value)} value={JSON.stringify(value)} selected={value === property.default}>
              {String(value)}
            </option>
          ))}
        </select>
      </label>
    );
  }
  if (type === 'boolean') {
    return (
      <label class="check" for={id}>
        <input id={id} type="checkbox" name={name} defaultChecked={property.default === true} />
        {label}
        {hint}
      </label>
    );
  }
  if (type === 'number' || type === 'integer') {
    return (
      <label for={id}>
        {label}
        {hint}
        <input
          id={id}
          name={name}
          type="number"
          required={required}
          step={type === 'integer' ? 1 : 'any'}
          min={property.minimum}
          max={property.maximum}
          placeholder={property.default !== undefined ? `default ${String(property.default)}` : ''}
          data-kind={type}
        />
      </label>
    );
  }
  if (type === 'string' && LONG_TEXT.has(name)) {
    return (
      <label for={id}>
        {label}
        {hint}
        <textarea id={id} name={name} required={required} maxLength={property.maxLength} rows={3} />
      </label>
    );
  }
  if (type === 'string') {
    return (
      <label for={id}>
        {label}
        {hint}
        <input id={id} name={name} required={required} maxLength={property.maxLength} />
      </label>
    );
  }
  return (
    <label for={id}>
      {label} (JSON){hint}
      <input id={id} name={name} required={required} data-kind="json" placeholder={property.default !== undefined ? JSON.stringify(property.default) : ''} />
    </label>
  );
}

function readParams(form: HTMLFormElement, schema: Schema): Record<string, unknown> {
  const params: Record<string, unknown> = {};
  for (const [name, property] of Object.entries(schema.properties ?? {})) {
    const element = form.elements.namedItem(name) as HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement | null;
    if (!element) continue;
    if (element instanceof HTMLInputElement && element.type === 'checkbox') {
      if (element.checked || property.default !== undefined) params[name] = element.checked;
      continue;
    }
    const raw = element.value;
    if (raw === '') continue;
    if (element instanceof HTMLSelectElement) params[name] = JSON.parse(raw);
    else if (element.dataset.kind === 'integer' || element.dataset.kind === 'number') params[name] = Number(raw);
    else if (element.dataset.kind === 'json') {
      try {
        params[name] = JSON.parse(raw);
      } catch {
        params[name] = raw;
      }
    } else params[name] = raw;
  }
  return params;
}

export function PlaygroundPage() {
  const workspaceId = currentWorkspaceId();
  const models = useLoad(() => api<{ data: Model[] }>('GET', '/v1/models', { query: { workspaceId } }), [workspaceId]);
  const [modelId, setModelId] = useState<string>();
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const usable = useMemo(() => (models.data?.data ?? []).filter((model) => model.available), [models.data]);
  const model = usable.find((m) => m.id === modelId) ?? usable[0];
  const needsImages = model?.mode.startsWith('image_to');
  const needsVideos = model?.mode.startsWith('video_to');

  const submit = async (event: Event) => {
    event.preventDefault();
    if (!model) return;
    const form = event.currentTarget as HTMLFormElement;
    setBusy(true);
    setError(undefined);
    try {
      const params = readParams(form, model.parameterSchema);
      const inputs: Record<string, string[]> = {};
      const ids = (name: string) =>
        String(new FormData(form).get(name) ?? '')
          .split(/[\s,]+/)
          .filter(Boolean);
      if (needsImages) inputs.imageAssetIds = ids('imageAssetIds');
      if (needsVideos) inputs.videoAssetIds = ids('videoAssetIds');
      const project = String(new FormData(form).get('project') ?? '').trim();
      const generation = await api('POST', '/v1/generations', {
        body: { workspaceId, mode: model.mode, model: model.id, params, ...(Object.keys(inputs).length ? { inputs } : {}), ...(project ? { project } : {}) },
      });
      navigate(`/generations/${generation.id}`);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main>
      <h1>Playground</h1>
      <ErrorBox error={models.error} />
      {models.data && usable.length === 0 && <p class="muted">Your plan has no model available.</p>}
      {model && (
        <form onSubmit={submit} key={model.id}>
          <label for="model">
            Model
            <select id="model" name="model" value={model.id} onChange={(event) => setModelId((event.currentTarget as HTMLSelectElement).value)}>
              {usable.map((m) => (
                <option key={m.id} value={m.id}>
                  {m.name} — {m.mode.replaceAll('_', ' ')}
                </option>
              ))}
            </select>
          </label>
          <p class="muted">{model.description}</p>
          <p class="small" data-testid="model-price">
            Price: {priceText(model.pricing)} · Held while a job runs (with the default settings): {model.credits} credits
            {model.pricing.per === 'tokens' ? ' at most (the whole answer at its longest); you are charged the tokens used, the rest given back' : ''}
          </p>
          {Object.entries(model.parameterSchema.properties ?? {}).map(([name, property]) => (
            <ParamField key={name} name={name} property={property} required={(model.parameterSchema.required ?? []).includes(name)} />
          ))}
          {needsImages && (
            <label>
              Input image asset ids (from Assets)
              <input name="imageAssetIds" required placeholder="ast_…" />
            </label>
          )}
          {needsVideos && (
            <label>
              Input video asset ids (from Assets)
              <input name="videoAssetIds" required placeholder="ast_…" />
            </label>
          )}
          <label>
            Project (optional)
            <input name="project" maxLength={200} />
          </label>
          <ErrorBox error={error} />
          <button type="submit" disabled={busy}>
            Generate
          </button>
        </form>
      )}
    </main>
  );
}
