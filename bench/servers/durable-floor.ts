// The floor of a durable create on this machine: `node:http`, the JSON body parsed, one committed INSERT
// (node-postgres, one pooled connection, autocommit) and a 201 with a small JSON answer. No auth, no limits,
// no ledger: what any HTTP service that stores a row before it answers pays at least. Started by the
// `client-latency` scenario in its own process (env HOST, PORT, DATABASE_URL); GET /health answers 200.
import http from 'node:http';
import pg from 'pg';

const host = process.env.HOST ?? '127.0.0.1';
const port = Number(process.env.PORT ?? 0);
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 1 });
await pool.query('create table if not exists floor_creates (id bigserial primary key, body jsonb not null, created_at timestamptz not null default now())');

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/health') {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    return;
  }
  if (req.method !== 'POST' || req.url !== '/v1/generations') {
    res.writeHead(404).end();
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"invalid json"}');
      return;
    }
    pool.query<{ id: string }>('insert into floor_creates (body) values ($1) returning id', [body]).then(
      ({ rows }) => {
        const answer = JSON.stringify({ id: rows[0]!.id, status: 'queued' });
        res.writeHead(201, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) }).end(answer);
      },
      () => res.writeHead(500).end(),
    );
  });
});
server.keepAliveTimeout = 60_000;
server.listen(port, host, () => process.stdout.write(`${JSON.stringify({ ready: true, port })}\n`));

const stop = () => server.close(() => pool.end().then(() => process.exit(0)));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
