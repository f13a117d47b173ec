// Preloaded (--import) into a server the soak scenario starts, when BENCH_MEMORY_PROBE_FILE is set: on
// SIGUSR2 it appends one JSON line with the process's memory figures to that file. The service has no
// metrics endpoint for them, and this keeps the reading out of its code and off its request path.
// Started with --expose-gc, it first runs a full collection, so heapUsed is what is still referenced.
import { appendFileSync } from 'node:fs';
import v8 from 'node:v8';

const file = process.env.BENCH_MEMORY_PROBE_FILE;
if (file) {
  process.on('SIGUSR2', () => {
    const collect = (globalThis as { gc?: () => void }).gc;
    const sampled = process.memoryUsage();
    if (collect) collect();
    const after = process.memoryUsage();
    const heap = v8.getHeapStatistics();
    appendFileSync(
      file,
      `${JSON.stringify({
        at: Date.now(),
        rss: after.rss,
        heapTotal: after.heapTotal,
        heapUsed: after.heapUsed,
        heapUsedBeforeGc: sampled.heapUsed,
        external: after.external,
        arrayBuffers: after.arrayBuffers,
        mallocedMemory: heap.malloced_memory,
        gc: Boolean(collect),
      })}\n`,
    );
  });
}
