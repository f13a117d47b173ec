import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

/**
 * A service secret: the configured value (from the environment variable `envName`), or one generated once
 * and kept in `<dataDir>/<file>` (mode 600), so what it signed or sealed stays valid across restarts.
 * Several processes starting together agree on the first one written.
 */
export async function loadOrCreateSecret(configured: string | undefined, dataDir: string, names: { file: string; envName: string }): Promise<Buffer> {
  if (configured !== undefined) return Buffer.from(configured, 'utf8');
  const file = path.join(dataDir, names.file);
  await fs.mkdir(dataDir, { recursive: true });
  try {
    const handle = await fs.open(file, 'wx', 0o600);
    try {
      await handle.writeFile(randomBytes(32).toString('hex'));
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  // A concurrent starter may have created the file and not yet written it: wait for the 64 hex digits.
  for (let attempt = 0; ; attempt++) {
    const text = (await fs.readFile(file, 'utf8')).trim();
    if (/^[0-9a-f]{64}$/.test(text)) return Buffer.from(text, 'hex');
    if (attempt >= 50) throw new Error(`${file} does not hold a secret (64 hex digits); delete it or set ${names.envName}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
