/** What readiness depends on besides the database answering. */
export class HealthState {
  recovered = false;
  draining = false;
  recoveryError: string | undefined;
}
