import t from 'tap';
import { Value } from '@sinclair/typebox/value';
import { OPENAI_DEFAULT_BASE_URL, parseOpenAiSettings } from '../../providers/openai/settings.ts';
import { openaiDeploymentTarget } from '../../providers/openai/deployment.ts';
import { chatRequest, imageGenerateRequest, speechRequest } from '../../providers/openai/requests.ts';

const KEY = 'sk-proj-secret-value-123';

t.test('not configured: no key and no base URL', async (t) => {
  t.same(parseOpenAiSettings({}), { settings: undefined, problems: [] });
  t.same(parseOpenAiSettings({ OPENAI_CHAT_MODEL: 'gpt-4o' }), { settings: undefined, problems: [] }, "the old provider's model names do not configure it");
});

t.test('a key alone: OpenAI itself, with the defaults', async (t) => {
  t.same(parseOpenAiSettings({ OPENAI_API_KEY: KEY }), { settings: { apiKey: KEY, baseUrl: OPENAI_DEFAULT_BASE_URL }, problems: [] });
});

t.test('every setting read', async (t) => {
  const { settings, problems } = parseOpenAiSettings({
    OPENAI_API_KEY: KEY,
    OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1/',
    OPENAI_ORGANIZATION: 'org-abc',
    OPENAI_TIMEOUT_MS: '30000',
    OPENAI_MAX_CONCURRENT_JOBS: '4',
  });
  t.same(problems, []);
  t.same(settings, { apiKey: KEY, baseUrl: 'http://127.0.0.1:11434/v1', organization: 'org-abc', timeoutMs: 30_000, maxConcurrentJobs: 4 });
  t.equal(parseOpenAiSettings({ OPENAI_API_KEY: KEY, OPENAI_MAX_CONCURRENT_JOBS: '0' }).settings?.maxConcurrentJobs, undefined, '0: no limit');
});

t.test('each problem is one line naming the variable, never a secret', async (t) => {
  const { settings, problems } = parseOpenAiSettings({
    OPENAI_API_KEY: `${KEY} with spaces`,
    OPENAI_BASE_URL: 'ftp://example.com',
    OPENAI_TIMEOUT_MS: '5',
    OPENAI_MAX_CONCURRENT_JOBS: 'many',
  });
  t.equal(settings, undefined);
  t.equal(problems.length, 4);
  t.match(problems, [/^OPENAI_BASE_URL: /, /^OPENAI_API_KEY: /, /^OPENAI_TIMEOUT_MS: /, /^OPENAI_MAX_CONCURRENT_JOBS: /]);
  t.notOk(problems.join('\n').includes(KEY), 'the key is not quoted');
  t.match(parseOpenAiSettings({ OPENAI_BASE_URL: 'http://localhost:8000/v1' }).problems, [/^OPENAI_API_KEY: required when OPENAI_BASE_URL is set/]);
  t.match(parseOpenAiSettings({ OPENAI_API_KEY: KEY, OPENAI_BASE_URL: 'https://user:pass@example.com/v1' }).problems, [
    /^OPENAI_BASE_URL: must not carry credentials/,
  ]);
  t.match(parseOpenAiSettings({ OPENAI_API_KEY: KEY, OPENAI_BASE_URL: 'not a url' }).problems, [/^OPENAI_BASE_URL: not a valid URL/]);
});

t.test('the deployment target schema', async (t) => {
  t.ok(Value.Check(openaiDeploymentTarget, { model: 'gpt-4o-mini' }));
  t.ok(Value.Check(openaiDeploymentTarget, { model: 'dall-e-3', quality: 'hd', style: 'vivid', imageResponseFormat: 'url', sizes: { '1:1': '1024x1024' } }));
  t.ok(Value.Check(openaiDeploymentTarget, { model: 'kokoro', voices: { ember: 'af_sky' } }));
  t.notOk(Value.Check(openaiDeploymentTarget, {}), 'model is required');
  t.notOk(Value.Check(openaiDeploymentTarget, { model: 'x', version: 'y' }), 'nothing unknown');
  t.notOk(Value.Check(openaiDeploymentTarget, { model: 'x', sizes: { '5:4': '1024x1024' } }), 'only our aspect ratios');
  t.notOk(Value.Check(openaiDeploymentTarget, { model: 'x', sizes: { '1:1': 'big' } }), 'sizes as WxH');
  t.notOk(Value.Check(openaiDeploymentTarget, { model: 'x', quality: 'ultra' }));
});

t.test('our parameters onto the documented request fields', async (t) => {
  t.same(chatRequest({ model: 'gpt-4o-mini' }, { prompt: 'p' }), { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'p' }] });
  t.equal((chatRequest({ model: 'gpt-5-mini' }, { prompt: 'p', maxTokens: 9 }) as unknown as Record<string, unknown>).max_completion_tokens, 9);
  t.equal(
    (chatRequest({ model: 'llama3', tokenLimitField: 'max_completion_tokens' }, { prompt: 'p', maxTokens: 9 }) as unknown as Record<string, unknown>)
      .max_completion_tokens,
    9,
  );
  t.equal(
    (chatRequest({ model: 'llama3' }, { prompt: 'p', maxTokens: 9 }) as unknown as Record<string, unknown>).max_tokens,
    9,
    'compatible servers get max_tokens',
  );
  t.equal(imageGenerateRequest({ model: 'dall-e-3' }, { prompt: 'p', aspectRatio: '21:9' }).size, '1792x1024');
  t.equal(imageGenerateRequest({ model: 'gpt-image-1' }, { prompt: 'p', aspectRatio: '4:3' }).size, '1536x1024');
  t.equal(imageGenerateRequest({ model: 'sdxl', imageResponseFormat: 'none' }, { prompt: 'p' }).response_format, undefined);
  t.same(speechRequest({ model: 'tts-1' }, { prompt: 'p', voice: 'ember', format: 'ogg' }).body, {
    model: 'tts-1',
    input: 'p',
    voice: 'coral',
    response_format: 'opus',
  });
});
