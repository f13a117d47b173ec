import { loadConfigOrExit } from '../runtime/config.ts';
import { claimPidFile, reloadAnswers, servicePaths } from '../runtime/service-pid.ts';
import { startService, StartupError } from './service.ts';

/** `npm start`: configuration from the environment, start, and a graceful stop on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  const config = loadConfigOrExit();

  let service;
  try {
    service = await startService({ config });
  } catch (error) {
    if (error instanceof StartupError) {
      process.stderr.write(`cannot start: ${error.message}\n`);
      process.exit(error.exitCode);
    }
    throw error;
  }
  const { services } = service;
  // The pid file the ops command finds this process by (npm's own pid is not the one to signal).
  const paths = servicePaths(config.dataDir, config.cluster?.nodeId);
  const releasePidFile = await claimPidFile(paths).catch((error: unknown) => {
    services.logger.warn({ err: error, file: paths.pid }, 'cannot write the pid file: npm run ops -- reload cannot find this process');
    return async () => undefined;
  });
  services.logger.info({ url: service.url, database: services.db.kind, engine: services.engine }, 'listening');
  // For people: on stderr, so that stdout carries the JSON log lines alone (the 'listening' line above says the same).
  process.stderr.write(
    `${[
      '',
      `Generation Service ${services.version} listening on ${service.url}`,
      `  public base URL: ${services.publicUrl}`,
      `  database: ${services.db.kind === 'pglite' ? (config.databaseUrl === 'memory://' ? 'PGlite (in memory)' : `PGlite in ${config.dataDir}`) : 'PostgreSQL'}`,
      `  web dashboard: ${services.publicUrl}/ (open it at this address: the session's writes are accepted from this origin)`,
      `  API description: ${services.publicUrl}/v1/openapi.json`,
      `  readiness: ${services.publicUrl}/health/ready`,
      ...(config.allowLoopbackEgress ? ['  development mode: webhook receivers and input URLs on this machine (loopback) are allowed'] : []),
      '',
      'Get started: paste the quick start of README.md, or sign up (the answer sets your session cookie; POST /v1/auth/login later):',
      `  curl -si -H 'content-type: application/json' -d '{"email":"you@example.com","password":"a-long-password","name":"You"}' ${services.publicUrl}/v1/auth/signup`,
      'Emergency stop of all generation: npm run ops -- pause "reason" | resume | status (docs/operations.md)',
      `Reload the catalog file: npm run ops -- reload (sends SIGHUP to process ${process.pid}, found in ${paths.pid})`,
      '',
    ].join('\n')}\n`,
  );
  if (config.cluster) {
    services.logger.info({ nodeId: config.cluster.nodeId, internalPort: config.cluster.internalPort, shards: config.cluster.shards }, 'cluster node');
  }

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      services.logger.warn({ signal }, 'second signal: exiting now');
      process.exit(130);
    }
    services.logger.info({ signal }, 'stopping gracefully');
    service
      .stop()
      .then(() => releasePidFile())
      .then(
        () => process.exit(0),
        (error: unknown) => {
          services.logger.error({ err: error }, 'graceful stop failed');
          process.exit(1);
        },
      );
  };
  // SIGHUP: read the catalog file again (it is also followed as it changes; docs/catalog.md), and answer the ops command.
  const answer = reloadAnswers(paths);
  process.on('SIGHUP', () => {
    void services.catalogSource
      .reload()
      .then(async (result) => {
        services.logger.info({ signal: 'SIGHUP', ...result }, 'catalog reload');
        await answer(result);
      })
      .catch((error: unknown) => services.logger.error({ err: error }, 'SIGHUP: the reload could not be answered'));
  });
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

main().catch((error: unknown) => {
  process.stderr.write(`fatal: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
