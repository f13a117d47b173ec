import { Migration } from '@mikro-orm/migrations';

/**
 * `write_check(ok, message)`: raises SQLSTATE GSW01 with `message` unless `ok`. A statement whose caller would
 * otherwise check its answer in code checks it on the server instead, so that a failed check aborts the
 * transaction there: a batch that sends COMMIT together with its statements (one round trip) cannot look
 * at their answers before COMMIT runs.
 */
export class Migration0019WriteChecks extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create function write_check(p_ok boolean, p_message text) returns boolean
      language plpgsql as $check$
      begin
        if p_ok is not true then
          raise exception using errcode = 'GSW01', message = p_message;
        end if;
        return true;
      end
      $check$`);
  }

  override async down(): Promise<void> {
    this.addSql('drop function if exists write_check(boolean, text)');
  }
}
