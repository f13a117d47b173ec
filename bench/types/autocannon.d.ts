// Minimal typings for the parts of autocannon 8's programmatic API the bench uses
// (the package ships no types and @types/autocannon is not a dependency).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  namespace autocannon {
    interface Options {
      url: string;
      connections?: number;
      pipelining?: number;
      duration?: number;
      amount?: number;
      timeout?: number;
      method?: string;
      headers?: Record<string, string>;
      body?: string | Buffer;
      title?: string;
      workers?: number;
      bailout?: number;
      expectBody?: string;
      requests?: Array<{
        method?: string;
        path?: string;
        headers?: Record<string, string>;
        body?: string | Buffer;
        setupRequest?(
          request: { method?: string; path?: string; headers?: Record<string, string>; body?: string | Buffer },
          context: Record<string, unknown>,
        ): { method?: string; path?: string; headers?: Record<string, string>; body?: string | Buffer };
      }>;
    }

    /** Percentiles are keyed like p50, p97_5, p99, p99_9. */
    interface Histogram {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      total: number;
      p50: number;
      p90: number;
      p97_5: number;
      p99: number;
      [percentile: string]: number;
    }

    interface Result {
      title?: string;
      url: string;
      connections: number;
      pipelining: number;
      duration: number;
      start: Date;
      finish: Date;
      errors: number;
      timeouts: number;
      mismatches: number;
      non2xx: number;
      resets: number;
      '1xx': number;
      '2xx': number;
      '3xx': number;
      '4xx': number;
      '5xx': number;
      statusCodeStats: Record<string, { count: number }>;
      latency: Histogram & { totalCount: number };
      requests: Histogram & { sent: number };
      throughput: Histogram;
    }

    interface Instance extends EventEmitter, PromiseLike<Result> {
      stop(): void;
    }
  }

  function autocannon(options: autocannon.Options): autocannon.Instance;
  export = autocannon;
}
