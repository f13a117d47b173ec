// Preloaded (--import) into the service the `peers` scenario starts, when BENCH_ALLOC_PROF_DIR is set: V8's
// sampling heap profiler runs from the start, keeping the objects that scavenges and full collections freed
// too (what a job allocates and drops is what this counts, not only what is still alive), and the profile is
// written to that folder when the process exits (`alloc-<pid>.heapprofile`, the format of Chrome's tools).
// bench/lib/allocation-report.ts sums it by function and by folder. It costs the service CPU: the rounds
// it runs in say nothing of the service's pace.
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import path from 'node:path';

const dir = process.env.BENCH_ALLOC_PROF_DIR;
if (dir) {
  const session = new Session();
  session.connect();
  session.post('HeapProfiler.enable');
  // One sample per 32 KB allocated on average (V8's default), stacks 64 frames deep.
  session.post('HeapProfiler.startSampling', {
    samplingInterval: 32 * 1024,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  let written = false;
  const write = () => {
    if (written) return;
    written = true;
    // The session is this thread's own: the answer comes before post returns.
    session.post('HeapProfiler.stopSampling', (error, result) => {
      if (error) return;
      writeFileSync(path.join(dir, `alloc-${process.pid}.heapprofile`), JSON.stringify(result.profile));
    });
  };
  process.on('exit', write);
}
