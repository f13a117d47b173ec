import type { Scenario } from '../lib/types.ts';
import { serviceIdentity } from './service-identity.ts';
import { uploadDownload } from './upload-download.ts';
import { webhookDelivery } from './webhook-delivery.ts';

/** Every scenario `npm run bench` runs, in order. Add a file in this folder and list it here. */
export const scenarios: Scenario[] = [serviceIdentity, uploadDownload, webhookDelivery];
