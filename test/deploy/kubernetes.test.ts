import t from 'tap';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { ROOT } from '../fixtures/child.ts';
import { checkClusterNodes } from './cluster-settings.ts';
import { loadDatabaseSettings } from '../../runtime/config.ts';

/**
 * deploy/kubernetes, rendered by `kubectl kustomize` (offline, no cluster) and checked object by object: the
 * base and the example production overlay, each object against the Kubernetes API schemas (kubernetes-models,
 * which validates with the OpenAPI schemas of the API), then the StatefulSet's pods as Kubernetes would start
 * them (their env resolved: the pod's name, the Secret the operator made with docs/deploy.md's command,
 * `$(VAR)` references, the image's NODE_ENV=production) against the service's configuration and cluster
 * mode's rules, and what a good chart ships: a NetworkPolicy, a topology spread, a ServiceAccount without a
 * token, probe time-outs, a migrate step before the node, bounded emptyDirs, an image by version.
 */
const KUBECTL = process.env.KUBECTL ?? '/usr/bin/kubectl';
const BASE = path.join(ROOT, 'deploy/kubernetes/base');
const PRODUCTION = path.join(ROOT, 'deploy/kubernetes/overlays/production');
const renderOf = (dir: string) => spawnSync(KUBECTL, ['kustomize', dir], { encoding: 'utf8' });
const rendered = renderOf(BASE);
const renderedProduction = renderOf(PRODUCTION);
const skip = rendered.error ? `kubectl is not available (${rendered.error.message})` : false;
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  spec?: any;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  automountServiceAccountToken?: boolean;
}
const parseObjects = (text: string) =>
  parseAllDocuments(text)
    .map((doc) => doc.toJS() as K8sObject)
    .filter(Boolean);
const objects = skip ? [] : parseObjects(rendered.stdout);
const productionObjects = skip ? [] : parseObjects(renderedProduction.stdout);
const findIn = (list: K8sObject[], kind: string, name?: string) => list.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
const find = (kind: string, name?: string) => findIn(objects, kind, name);

/**
 * The Secret the operator creates, as docs/deploy.md's `kubectl create secret generic` command makes it: its
 * keys read from the docs, each given a value of the kind the command generates (random hex; URLs with one),
 * made once per name (every pod reads the same Secret). An overlay's Secret of another name has the same keys.
 */
const secrets = new Map<string, K8sObject>();
function operatorSecret(name: string): K8sObject {
  const made = secrets.get(name);
  if (made) return made;
  const docs = readFileSync(path.join(ROOT, 'docs/deploy.md'), 'utf8');
  const command = /kubectl create secret generic (\S+)((?:[^\n]*\\\n)*[^\n]*)/.exec(docs);
  if (!command) throw new Error('docs/deploy.md has no `kubectl create secret generic` command');
  const random = () => randomBytes(32).toString('hex');
  const stringData: Record<string, string> = {};
  for (const [, key] of command[2]!.matchAll(/--from-literal=([A-Z0-9_]+)=/g)) {
    stringData[key!] =
      key === 'DATABASE_URL' ? `postgres://gs:${random()}@postgres.db:5432/gs` : key === 'REDIS_URL' ? `redis://:${random()}@redis.db:6379` : random();
  }
  const secret = { apiVersion: 'v1', kind: 'Secret', metadata: { name }, stringData };
  secrets.set(name, secret);
  return secret;
}

t.test('kubectl kustomize renders the base and the production overlay', { skip }, async (t) => {
  t.equal(rendered.status, 0, rendered.stderr);
  t.equal(renderedProduction.status, 0, renderedProduction.stderr);
  const kinds = [
    'ConfigMap/generation-service-catalog',
    'NetworkPolicy/generation-service',
    'PodDisruptionBudget/generation-service',
    'Service/generation-service',
    'Service/generation-service-internal',
    'ServiceAccount/generation-service',
    'StatefulSet/generation-service',
  ];
  t.same(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort(), kinds, 'the base: no Secret (the operator makes it)');
  t.same(productionObjects.map((o) => `${o.kind}/${o.metadata.name}`).sort(), kinds, 'the overlay: the same objects');
});

t.test('every object is valid against the Kubernetes schemas', { skip }, async (t) => {
  for (const object of [...objects, ...productionObjects]) {
    const models = (await import(`kubernetes-models/${object.apiVersion}`)) as Record<string, new (data: unknown) => { validate(): void }>;
    const Model = models[object.kind];
    if (!Model) {
      t.fail(`${object.apiVersion} ${object.kind}: no schema`);
      continue;
    }
    t.doesNotThrow(() => new Model(object).validate(), `${object.kind}/${object.metadata.name}`);
  }
  // The validator is not lenient: a wrong type is refused.
  const { StatefulSet } = await import('kubernetes-models/apps/v1');
  const broken = structuredClone(find('StatefulSet')!);
  broken.spec.replicas = 'three';
  t.throws(() => new StatefulSet(broken as any).validate(), 'a broken object is refused');
});

/** The env of the StatefulSet's pod `ordinal` as the kubelet gives it: fieldRefs, Secret and ConfigMap keys, then $(VAR) references. */
function podEnv(
  statefulSet: K8sObject,
  ordinal: number,
  namespace: string,
  container = statefulSet.spec.template.spec.containers[0],
  list = objects,
): Record<string, string> {
  const pod = { 'metadata.name': `${statefulSet.metadata.name}-${ordinal}`, 'metadata.namespace': namespace };
  const source = (kind: string, name: string) => {
    const object = kind === 'Secret' ? operatorSecret(name) : findIn(list, kind, name);
    if (!object) throw new Error(`${kind}/${name} is not in the rendered objects`);
    return {
      ...Object.fromEntries(Object.entries(object.data ?? {}).map(([k, v]) => [k, kind === 'Secret' ? Buffer.from(v, 'base64').toString() : v])),
      ...object.stringData,
    };
  };
  // The image's own settings first (deploy/container/Dockerfile's ENV): NODE_ENV=production.
  const env: Record<string, string> = { NODE_ENV: 'production' };
  for (const from of container.envFrom ?? []) {
    Object.assign(env, from.secretRef ? source('Secret', from.secretRef.name) : source('ConfigMap', from.configMapRef.name));
  }
  for (const item of container.env ?? []) {
    const ref = item.valueFrom;
    const value = ref?.fieldRef
      ? pod[ref.fieldRef.fieldPath as keyof typeof pod]
      : ref?.secretKeyRef
        ? source('Secret', ref.secretKeyRef.name)[ref.secretKeyRef.key]
        : ref?.configMapKeyRef
          ? source('ConfigMap', ref.configMapKeyRef.name)[ref.configMapKeyRef.key]
          : // $(NAME) refers to a variable defined earlier in the list (or from envFrom); $$ escapes.
            String(item.value ?? '').replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole: string, name?: string) =>
              name === undefined ? '$' : (env[name] ?? whole),
            );
    if (value === undefined) throw new Error(`${item.name}: nothing to read`);
    env[item.name] = value;
  }
  return env;
}

for (const [label, list] of [
  ['base', objects],
  ['production overlay', productionObjects],
] as const) {
  t.test(`${label}: the pods: settings the service reads, cluster mode complete, ids and internal addresses unique`, { skip }, async (t) => {
    const statefulSet = findIn(list, 'StatefulSet')!;
    const headless = findIn(list, 'Service', statefulSet.spec.serviceName)!;
    const spec = statefulSet.spec.template.spec;
    const container = spec.containers[0];
    // The catalog file as the pod sees it: the ConfigMap's key at the mounted path.
    const catalogMount = container.volumeMounts.find((m: { name: string }) => spec.volumes.find((v: any) => v.name === m.name)?.configMap);
    const catalogMap = findIn(list, 'ConfigMap', spec.volumes.find((v: any) => v.name === catalogMount.name).configMap.name)!;
    const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-kubernetes-'));
    t.teardown(() => fs.rm(scratch, { recursive: true, force: true }));
    for (const [key, text] of Object.entries(catalogMap.data ?? {})) await fs.writeFile(path.join(scratch, key), text);

    const nodes = Array.from({ length: statefulSet.spec.replicas as number }, (_, ordinal) => {
      const env = podEnv(statefulSet, ordinal, statefulSet.metadata.namespace ?? 'default', undefined, list);
      t.equal(path.dirname(env.CATALOG_FILE ?? ''), catalogMount.mountPath, `pod ${ordinal}: CATALOG_FILE is in the catalog's mount`);
      return { name: `${statefulSet.metadata.name}-${ordinal}`, env: { ...env, CATALOG_FILE: path.join(scratch, path.basename(env.CATALOG_FILE ?? '')) } };
    });
    const configs = checkClusterNodes(t, nodes);
    for (const [ordinal, config] of configs.entries()) {
      t.equal(config.cluster?.nodeId, `${statefulSet.metadata.name}-${ordinal}`, `pod ${ordinal}: its node id is its pod name`);
      t.equal(
        config.cluster?.internalAddress,
        `${statefulSet.metadata.name}-${ordinal}.${headless.metadata.name}`,
        `pod ${ordinal}: reached through the headless Service`,
      );
      t.equal(config.blobStore.kind, 's3', `pod ${ordinal}: blobs in a bucket every node reads`);
    }
    const shutdownMs = configs[0]?.shutdownTimeoutMs ?? Infinity;
    const preStopSeconds = Number(container.lifecycle?.preStop?.exec?.command?.at(-1) ?? 0);
    t.ok(
      spec.terminationGracePeriodSeconds * 1000 > preStopSeconds * 1000 + shutdownMs,
      `terminationGracePeriodSeconds (${spec.terminationGracePeriodSeconds}) is above the preStop pause (${preStopSeconds} s) plus SHUTDOWN_TIMEOUT_MS (${shutdownMs} ms)`,
    );
  });
}

t.test('probes, ports, services, budget, resources, scraping', { skip }, async (t) => {
  const statefulSet = find('StatefulSet')!;
  const pod = statefulSet.spec.template;
  const container = pod.spec.containers[0];
  const port = (name: string) => container.ports.find((p: { name: string }) => p.name === name)?.containerPort;
  const env = podEnv(statefulSet, 0, 'default');
  t.equal(port('http'), Number(env.PORT), 'the http port is PORT');
  t.equal(port('internal'), Number(env.CLUSTER_INTERNAL_PORT), 'the internal port is CLUSTER_INTERNAL_PORT');
  t.equal(port('metrics'), Number(env.METRICS_PORT), 'the metrics port is METRICS_PORT');
  t.same(container.readinessProbe.httpGet, { path: '/health/ready', port: 'http' }, 'readiness on /health/ready');
  t.same(container.livenessProbe.httpGet, { path: '/health/live', port: 'http' }, 'liveness on /health/live');
  t.ok(
    container.resources?.requests?.cpu && container.resources?.requests?.memory && container.resources?.limits?.memory,
    'resources requested, memory limited',
  );
  t.equal(container.securityContext?.allowPrivilegeEscalation, false);
  t.equal(pod.spec.securityContext?.runAsNonRoot, true, 'not root');

  const headless = find('Service', statefulSet.spec.serviceName)!;
  t.equal(headless.spec.clusterIP, 'None', "the StatefulSet's Service is headless");
  t.equal(headless.spec.publishNotReadyAddresses, true, 'and names pods before they are ready (a starting node already owns shards)');
  t.same(
    headless.spec.ports.map((p: { targetPort: string }) => p.targetPort),
    ['internal'],
    'it carries the node-to-node port',
  );
  const client = find('Service', 'generation-service')!;
  t.same(
    client.spec.ports.map((p: { targetPort: string }) => p.targetPort),
    ['http'],
    'the client Service carries the API port',
  );
  const labels = pod.metadata.labels;
  for (const selector of [
    client.spec.selector,
    headless.spec.selector,
    find('PodDisruptionBudget')!.spec.selector.matchLabels,
    statefulSet.spec.selector.matchLabels,
  ]) {
    t.ok(selector && Object.entries(selector).every(([k, v]) => labels[k] === v), `selector ${JSON.stringify(selector)} matches the pods`);
  }
  t.equal(find('PodDisruptionBudget')!.spec.maxUnavailable, 1, 'one node at a time may be disrupted');
  t.same(
    pod.metadata.annotations,
    { 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(port('metrics')), 'prometheus.io/path': '/metrics' },
    'scraped on /metrics',
  );
});

t.test('the catalog ConfigMap is a valid placeholder: entries of the shipped catalog', { skip }, async (t) => {
  const text = find('ConfigMap', 'generation-service-catalog')!.data!['catalog.yaml']!;
  t.match(text, /operator's catalog/, 'it says whose file it is');
  const placeholder = parse(text) as { defaultPlan: string; plans: Array<{ id: string }>; models: Array<{ id: string }> };
  const shipped = parse(await fs.readFile(path.join(ROOT, 'catalog/default.yaml'), 'utf8')) as typeof placeholder;
  t.same(
    Object.keys(placeholder).sort(),
    Object.keys(shipped)
      .filter((k) => k in placeholder)
      .sort(),
    'only sections the shipped catalog has',
  );
  t.equal(placeholder.defaultPlan, shipped.defaultPlan);
  for (const plan of placeholder.plans)
    t.same(
      plan,
      shipped.plans.find((p) => p.id === plan.id),
      `plan ${plan.id} as shipped`,
    );
  t.ok(placeholder.models.length > 0, 'at least one model');
  for (const model of placeholder.models)
    t.same(
      model,
      shipped.models.find((m) => m.id === model.id),
      `model ${model.id} as shipped`,
    );
});

t.test('a ServiceAccount without an API token, a topology spread over machines and zones', { skip }, async (t) => {
  const statefulSet = find('StatefulSet')!;
  const pod = statefulSet.spec.template;
  const account = find('ServiceAccount')!;
  t.equal(account.automountServiceAccountToken, false, 'the ServiceAccount mounts no token');
  t.equal(pod.spec.serviceAccountName, account.metadata.name, 'the pods run as it, not as default');
  t.equal(pod.spec.automountServiceAccountToken, false, 'and mount no token either');
  const spread = pod.spec.topologySpreadConstraints as Array<{
    topologyKey: string;
    whenUnsatisfiable: string;
    maxSkew: number;
    labelSelector: { matchLabels: Record<string, string> };
  }>;
  const byKey = Object.fromEntries((spread ?? []).map((c) => [c.topologyKey, c]));
  t.equal(byKey['kubernetes.io/hostname']?.whenUnsatisfiable, 'DoNotSchedule', 'never two nodes on one machine while another machine has room');
  t.equal(byKey['kubernetes.io/hostname']?.maxSkew, 1);
  t.ok(byKey['topology.kubernetes.io/zone'], 'spread over zones too');
  for (const constraint of spread ?? []) {
    t.ok(
      Object.entries(constraint.labelSelector.matchLabels).every(([k, v]) => pod.metadata.labels[k] === v),
      `${constraint.topologyKey}: its selector matches the pods`,
    );
  }
});

t.test('a NetworkPolicy: the API open, the node-to-node port to the nodes alone, metrics to the monitoring namespace', { skip }, async (t) => {
  const statefulSet = find('StatefulSet')!;
  const pod = statefulSet.spec.template;
  const ports = new Map<string, number>(pod.spec.containers[0].ports.map((p: { name: string; containerPort: number }) => [p.name, p.containerPort]));
  const policy = find('NetworkPolicy')!;
  t.ok(
    Object.entries(policy.spec.podSelector.matchLabels).every(([k, v]) => pod.metadata.labels[k] === v),
    'it selects the pods',
  );
  t.same(policy.spec.policyTypes, ['Ingress'], 'incoming connections (outgoing ones go to providers and receivers anywhere)');
  type Rule = { from?: Array<{ podSelector?: { matchLabels: Record<string, string> }; namespaceSelector?: unknown }>; ports: Array<{ port: string }> };
  const rules = policy.spec.ingress as Rule[];
  const ruleFor = (name: string) => rules.filter((r) => r.ports.some((p) => p.port === name || p.port === (ports.get(name) as unknown)));
  for (const rule of rules) for (const port of rule.ports) t.ok(ports.has(port.port), `port ${port.port} is a port of the container`);
  t.same(
    ruleFor('http').map((r) => r.from),
    [undefined],
    'the API port: from anywhere (the ingress or load balancer)',
  );
  const internal = ruleFor('internal');
  t.equal(internal.length, 1, 'the node-to-node port: one rule');
  t.ok(
    internal[0]!.from?.length === 1 &&
      internal[0]!.from[0]!.podSelector &&
      !internal[0]!.from[0]!.namespaceSelector &&
      Object.entries(internal[0]!.from[0]!.podSelector.matchLabels).every(([k, v]) => pod.metadata.labels[k] === v),
    'from the pods of this StatefulSet alone',
  );
  const metrics = ruleFor('metrics');
  t.ok(metrics.length === 1 && metrics[0]!.from && metrics[0]!.from.length > 0, 'the metrics port: only from where Prometheus runs');
  t.equal(ruleFor('http').length + internal.length + metrics.length, rules.length, 'no other way in');
});

t.test('probe time-outs, a migrate step before the node, bounded emptyDirs, an image by version', { skip }, async (t) => {
  const statefulSet = find('StatefulSet')!;
  const spec = statefulSet.spec.template.spec;
  const container = spec.containers[0];
  for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
    t.ok(
      container[probe]?.timeoutSeconds >= 3,
      `${probe}: a time-out of ${container[probe]?.timeoutSeconds} s (the default 1 s is under /health/ready's 2 s database wait)`,
    );
  }
  const [migrate, ...others] = spec.initContainers ?? [];
  t.equal(others.length, 0, 'one init container');
  t.same(migrate?.command, ['node', 'dist/app/migrate.js'], "the init container runs the service's migrate-only mode");
  t.ok(existsSync(path.join(ROOT, 'app/migrate.ts')), 'which the build compiles from app/migrate.ts');
  t.equal(migrate?.image, container.image, 'from the same image as the node');
  t.same(migrate?.envFrom, container.envFrom, 'with the same Secret');
  t.equal(migrate?.securityContext?.readOnlyRootFilesystem, true, 'as locked down as the node');
  const migrateEnv = podEnv(statefulSet, 0, 'default', migrate);
  const settings = loadDatabaseSettings(migrateEnv);
  t.ok(settings.databaseUrl?.startsWith('postgres'), "it migrates the nodes' PostgreSQL database (the migrate mode reads DATABASE_URL and DATA_DIR alone)");
  t.equal(settings.databaseUrl, podEnv(statefulSet, 0, 'default').DATABASE_URL, 'the same as the nodes use');
  t.equal(podEnv(statefulSet, 0, 'default').MIGRATE_AT_START, 'false', 'the node itself does not migrate: it refuses a schema left behind');

  for (const volume of spec.volumes.filter((v: { emptyDir?: unknown }) => v.emptyDir)) {
    t.ok(volume.emptyDir.sizeLimit, `emptyDir ${volume.name}: a sizeLimit (${volume.emptyDir.sizeLimit})`);
  }
  const version = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  t.equal(container.image, `generation-service:${version}`, "the base's image: the release's version, not latest");
  const production = findIn(productionObjects, 'StatefulSet')!.spec.template.spec;
  t.match(production.containers[0].image, /^[a-z0-9.-]+\/generation-service:\d+\.\d+\.\d+$/, 'the overlay: a registry image by version');
});

t.test('the production overlay: namespace, an existing Secret by name, resources, the public URL', { skip }, async (t) => {
  for (const object of productionObjects) t.equal(object.metadata.namespace, 'generation-service', `${object.kind}/${object.metadata.name}: in the namespace`);
  const statefulSet = findIn(productionObjects, 'StatefulSet')!;
  const spec = statefulSet.spec.template.spec;
  for (const container of [...spec.containers, ...spec.initContainers]) {
    t.same(
      container.envFrom.map((e: { secretRef?: { name: string } }) => e.secretRef?.name),
      ['generation-service-production'],
      `${container.name}: the existing Secret, by its name`,
    );
  }
  const base = find('StatefulSet')!.spec.template.spec.containers[0];
  t.not(spec.containers[0].resources.requests.cpu, base.resources.requests.cpu, 'its own resources');
  const env = Object.fromEntries(spec.containers[0].env.map((e: { name: string; value?: string }) => [e.name, e.value]));
  t.match(env.BASE_URL, /^https:\/\//, 'its public URL, on https');
  t.ok(env.S3_BUCKET, 'its bucket');
  t.equal(env.MIGRATE_AT_START, 'false', "the base's settings kept where it sets none");
});
