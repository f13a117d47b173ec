// Preloaded (--import) into every server the bench starts: if the harness dies without cleaning up
// (kill -9, crash), the child notices its parent changed and stops itself instead of lingering.
// A one-second, unref'd timer: no cost on the request path.
const parent = process.ppid;
const timer = setInterval(() => {
  if (process.ppid === parent) return;
  clearInterval(timer);
  process.kill(process.pid, 'SIGTERM');
  setTimeout(() => process.exit(1), 5_000).unref();
}, 1_000);
timer.unref();
export {};
