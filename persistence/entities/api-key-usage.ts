import { EntitySchema } from '@mikro-orm/core';

/** Requests and generations of one key on one UTC day; counters are added to in batches. */
export interface ApiKeyUsage {
  keyId: string;
  /** `YYYY-MM-DD`, UTC. */
  day: string;
  requests: number;
  generations: number;
}

export const ApiKeyUsageEntity = new EntitySchema<ApiKeyUsage>({
  name: 'ApiKeyUsage',
  tableName: 'api_key_usage',
  properties: {
    keyId: { type: 'string', fieldName: 'key_id', primary: true },
    day: { type: 'string', columnType: 'date', primary: true },
    requests: { type: 'number', columnType: 'bigint' },
    generations: { type: 'number', columnType: 'bigint' },
  },
});
