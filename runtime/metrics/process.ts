import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Meter } from '@opentelemetry/api';

/** Process CPU, memory and event-loop delay, observed when metrics are collected. Returns a stop function. */
export function observeProcess(meter: Meter): () => void {
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const cpu = meter.createObservableCounter('process.cpu.time', { description: 'CPU time of the process, by mode (user, system).', unit: 's' });
  const memory = meter.createObservableGauge('process.memory.usage', { description: 'Resident set size of the process.', unit: 'By' });
  const heap = meter.createObservableGauge('v8js.memory.heap.used', { description: 'V8 heap in use.', unit: 'By' });
  const delayP99 = meter.createObservableGauge('nodejs.eventloop.delay.p99', {
    description: '99th percentile of the event-loop delay since the previous collection.',
    unit: 's',
  });
  const delayMax = meter.createObservableGauge('nodejs.eventloop.delay.max', {
    description: 'Largest event-loop delay since the previous collection.',
    unit: 's',
  });
  const user = { 'cpu.mode': 'user' };
  const system = { 'cpu.mode': 'system' };
  meter.addBatchObservableCallback(
    (result) => {
      const usage = process.cpuUsage();
      result.observe(cpu, usage.user / 1e6, user);
      result.observe(cpu, usage.system / 1e6, system);
      const mem = process.memoryUsage();
      result.observe(memory, mem.rss);
      result.observe(heap, mem.heapUsed);
      if (loop.count > 0) {
        result.observe(delayP99, loop.percentile(99) / 1e9);
        result.observe(delayMax, loop.max / 1e9);
      }
      loop.reset();
    },
    [cpu, memory, heap, delayP99, delayMax],
  );
  return () => loop.disable();
}
