import { ConfigError, loadConfig } from '../../runtime/config.ts';

/** The problems loadConfig refuses `env` for (each with its message); none when it loads. */
export function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return error.problems;
  }
}
