import type { Scenario } from '../lib/types.ts';
import { serviceIdentity } from './service-identity.ts';
import { uploadDownload } from './upload-download.ts';
import { webhookDelivery, webhookDeliveryPostgres } from './webhook-delivery.ts';

/** Every scenario `npm run bench` runs, in order. Add a file in this folder and list it here. */
export const scenarios: Scenario[] = [serviceIdentity, uploadDownload, webhookDelivery, webhookDeliveryPostgres];

// Authenticated reads with a Bearer key, in-process and Redis rate limiter.
import { keyedReadMemory, keyedReadRedis } from './keyed-read.ts';
scenarios.push(keyedReadMemory, keyedReadRedis);

// Generations against PostgreSQL: durable creates vs pgbench, and end-to-end jobs/s.
import { generationCreate, generationEndToEnd } from './generations.ts';
scenarios.push(generationCreate, generationEndToEnd);
