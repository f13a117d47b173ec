import net from 'node:net';

/** Sends bytes exactly as given and returns what came back before the server closed or went quiet. */
export function rawRequest(port: number, payload: string | Buffer, quietMs = 300): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(received);
    };
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(finish, quietMs);
    };
    socket.on('connect', () => {
      socket.write(payload);
      arm();
    });
    socket.on('data', (chunk) => {
      received += chunk.toString('utf8');
      arm();
    });
    socket.on('end', finish);
    socket.on('close', finish);
    socket.on('error', (error) => (received ? finish() : reject(error)));
  });
}

/** The status code and JSON body of a raw HTTP/1.1 response. */
export function parseRaw(response: string): { status: number; headers: Record<string, string>; body: any } {
  const [head = '', ...rest] = response.split('\r\n\r\n');
  const lines = head.split('\r\n');
  const status = Number(lines[0]?.split(' ')[1]);
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const at = line.indexOf(':');
    if (at > 0) headers[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
  }
  const text = rest.join('\r\n\r\n');
  let body: any;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = text;
  }
  return { status, headers, body };
}
