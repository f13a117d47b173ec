import { Migration } from '@mikro-orm/migrations';

/**
 * `generations.trace_context`: the W3C trace context (`traceparent`, `tracestate`) and the request id of the
 * request that created the job, as JSON; null when tracing was off. A queued job starts (and a job in flight
 * at a restart is taken up again) in that trace, not in the trace of whatever freed its slot.
 */
export class Migration0017TraceContext extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table generations add column trace_context jsonb');
  }
}
