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

// kill -9 in a loop under creates, webhooks subscribed: nothing lost, stuck or charged twice.
import { crashLoopPglite, crashLoopPostgres } from './crash-loop.ts';
scenarios.push(crashLoopPglite, crashLoopPostgres);

// Memory under steady load for BENCH_SOAK_MINUTES (default 10) after a warm-up: PGlite on disk, PostgreSQL.
import { soak, soakPostgres } from './soak.ts';
scenarios.push(soak, soakPostgres);

// Cluster mode on PostgreSQL + Redis: 3 nodes vs 1 on the same database, forwarded-request latency.
import { cluster } from './cluster.ts';
scenarios.push(cluster);

// Bulk creates: POST /v1/generations/batch (100 a request) vs POST /v1/generations one by one, PostgreSQL, same run.
import { generationBatch } from './generation-batch.ts';
scenarios.push(generationBatch);

// End-to-end jobs/s against the job systems a user would pick instead: pg-boss, graphile-worker, BullMQ.
import { peers } from './peers.ts';
scenarios.push(peers);

// Restart after kill -9 on a long history: time to ready, memory and resumption vs an almost empty database.
import { restartHistoryPglite, restartHistoryPostgres } from './restart-history.ts';
scenarios.push(restartHistoryPglite, restartHistoryPostgres);

// GET /v1/usage with 1,000 jobs in its range vs 121,000: the same latency whatever the history (PostgreSQL).
import { usageHistory } from './usage-history.ts';
scenarios.push(usageHistory);

// GET /v1/usage/series: a week by hour over 10,000 jobs of history vs 1,000,000, and a year by day (PostgreSQL).
import { usageSeries } from './usage-series.ts';
scenarios.push(usageSeries);

// One client's latency on PostgreSQL: creates in a loop vs pgbench's one client, create → succeeded p99 at 200 jobs/s.
import { latency, latencyCluster } from './latency.ts';
scenarios.push(latency, latencyCluster);

// One outside client's sequential creates through Node's fetch, against the latency scenario's client and a bare socket.
import { clientLatency } from './client-latency.ts';
scenarios.push(clientLatency);

// The cost of observability: metrics on vs off and tracing on vs off, GET /v1 and creates, each pair in the same run.
// Tracing is measured twice: spans to a no-op exporter (the request path's cost), and exported by OTLP.
import {
  metricsCostCreate,
  metricsCostIdentity,
  tracingCostCreate,
  tracingCostIdentity,
  tracingExportCostCreate,
  tracingExportCostIdentity,
} from './observability.ts';
scenarios.push(metricsCostIdentity, tracingCostIdentity, tracingExportCostIdentity, metricsCostCreate, tracingCostCreate, tracingExportCostCreate);
// Live streams: memory per idle SSE stream (10,000 held) and the fan-out rate, vs raw uWS holding SSE responses.
import { streams } from './streams.ts';
scenarios.push(streams);

// Fair shares of one provider slot: a workspace's single job behind another's 20 (job-times), and 1,000 grants between weights 3 and 1.
import { fairness, fairnessWeights } from './fairness.ts';
scenarios.push(fairness, fairnessWeights);

// Jobs through real provider adapters (Replicate by webhook, OpenAI chat) against their fakes, each ÷ a bare undici client of the same fake.
import { providers } from './providers.ts';
scenarios.push(providers);

// Creates/s with a catalog of 2,000 models vs 20, same run: nothing on the request path may grow with the catalog.
import { catalogSize } from './catalog-size.ts';
scenarios.push(catalogSize);

// The OpenAI-compatible door (whole, streamed) and the job API against the same chat call straight to the OpenAI fake, one sequential client.
import { gateway, gatewayPostgres } from './gateway.ts';
scenarios.push(gateway, gatewayPostgres);
