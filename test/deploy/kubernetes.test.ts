import t from 'tap';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { ROOT } from '../fixtures/child.ts';
import { checkClusterNodes } from './cluster-settings.ts';

/**
 * deploy/kubernetes, rendered by `kubectl kustomize` (offline, no cluster) and checked object by object:
 * each against the Kubernetes API schemas (kubernetes-models, which validates with the OpenAPI schemas of
 * the API), then the StatefulSet's pods as Kubernetes would start them (their env resolved: the pod's
 * name, the Secret, `$(VAR)` references) against the service's configuration and cluster mode's rules.
 */
const KUBECTL = process.env.KUBECTL ?? '/usr/bin/kubectl';
const rendered = spawnSync(KUBECTL, ['kustomize', path.join(ROOT, 'deploy/kubernetes')], { encoding: 'utf8' });
const skip = rendered.error ? `kubectl is not available (${rendered.error.message})` : false;

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  spec?: any;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}
const objects = skip
  ? []
  : parseAllDocuments(rendered.stdout)
      .map((doc) => doc.toJS() as K8sObject)
      .filter(Boolean);
const find = (kind: string, name?: string) => objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));

t.test('kubectl kustomize renders the base', { skip }, async (t) => {
  t.equal(rendered.status, 0, rendered.stderr);
  t.same(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort(), [
    'ConfigMap/generation-service-catalog',
    'PodDisruptionBudget/generation-service',
    'Secret/generation-service-secrets',
    'Service/generation-service',
    'Service/generation-service-internal',
    'StatefulSet/generation-service',
  ]);
});

t.test('every object is valid against the Kubernetes schemas', { skip }, async (t) => {
  for (const object of objects) {
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
function podEnv(statefulSet: K8sObject, ordinal: number, namespace: string): Record<string, string> {
  const container = statefulSet.spec.template.spec.containers[0];
  const pod = { 'metadata.name': `${statefulSet.metadata.name}-${ordinal}`, 'metadata.namespace': namespace };
  const source = (kind: string, name: string) => {
    const object = find(kind, name);
    if (!object) throw new Error(`${kind}/${name} is not in the base`);
    return {
      ...Object.fromEntries(Object.entries(object.data ?? {}).map(([k, v]) => [k, kind === 'Secret' ? Buffer.from(v, 'base64').toString() : v])),
      ...object.stringData,
    };
  };
  const env: Record<string, string> = {};
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

t.test('the pods: settings the service reads, cluster mode complete, ids and internal addresses unique', { skip }, async (t) => {
  const statefulSet = find('StatefulSet')!;
  const headless = find('Service', statefulSet.spec.serviceName)!;
  const spec = statefulSet.spec.template.spec;
  const container = spec.containers[0];
  // The catalog file as the pod sees it: the ConfigMap's key at the mounted path.
  const catalogMount = container.volumeMounts.find((m: { name: string }) => spec.volumes.find((v: any) => v.name === m.name)?.configMap);
  const catalogMap = find('ConfigMap', spec.volumes.find((v: any) => v.name === catalogMount.name).configMap.name)!;
  const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-kubernetes-'));
  t.teardown(() => fs.rm(scratch, { recursive: true, force: true }));
  for (const [key, text] of Object.entries(catalogMap.data ?? {})) await fs.writeFile(path.join(scratch, key), text);

  const nodes = Array.from({ length: statefulSet.spec.replicas as number }, (_, ordinal) => {
    const env = podEnv(statefulSet, ordinal, 'default');
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
