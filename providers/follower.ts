import { type Clock, systemClock, type Timer } from '../runtime/clock.ts';
import {
  type AdapterContext,
  type AdapterJob,
  type AdapterUpdate,
  type InboundEvent,
  PROVIDER_ERROR_CODES,
  type ProviderAdapter,
  ProviderFailure,
  type Report,
  type VerifiedEvent,
  upstreamMessage,
} from './adapter.ts';
import { UnclaimedEvents } from './unclaimed-events.ts';

/**
 * The job follower: one per deployment, on the injected clock. A provider's protocol module (below) only
 * maps requests and answers and makes the HTTP calls; the follower keeps the jobs followed and owns
 * everything about time and order: the backstop poll at the deployment's pollMs, events (webhooks, through
 * the module's `parseEvent`), streams and watches (a provider's socket), the request of a provider that
 * answers within it (`answer`), the deadline, cancels, the submission window after a restart, and one outcome
 * per job. Above it, the job's caller sees a ProviderAdapter exactly as before.
 */

export type TerminalUpdate = Extract<AdapterUpdate, { type: 'succeeded' | 'failed' }>;

/** What one look at a job says: a poll's answer (`get`), an event (`parseEvent`), the submission's answer. */
export type Look = {
  /** The job runs now (told once). */
  running?: boolean;
  /** Lines for the job's timeline, told in order. */
  progress?: readonly string[];
} & (
  | { type: 'pending' }
  /** Over at the provider; `settle` reads its outcome (a result URL, the output files), or finds it was not over. */
  | { type: 'ending'; settle(call: CallContext): Promise<Look> }
  /** The job's outcome. */
  | { type: 'over'; update: TerminalUpdate }
  /** Something changed that the event does not say: the follower asks (`get`) now, or right after a look in flight. */
  | { type: 'lookNow' }
);

/** A job as the follower holds it, handed to the module's calls. */
export interface Followed<N> {
  readonly providerJobId: string;
  readonly job: AdapterJob;
  /** The module's own notes about the job (log lines seen, failures in a row, its URLs); the module changes them. */
  readonly notes: N;
}

/** What a call of a module may use: its cancellation, the job's timeline, and waits on the follower's clock. */
export interface CallContext {
  readonly signal: AbortSignal;
  /** A line for the job's timeline (a 429 wait, a busy server). */
  say(detail: string): void;
  /** Waits on the follower's clock; resolves early when `signal` aborts. */
  wait(ms: number, signal?: AbortSignal): Promise<void>;
}

/** What the request of a job answered within it may use besides a call's: its answer's pieces, told as they come. */
export interface AnswerCall extends CallContext {
  /** A piece of a streamed answer, told at once as the job's `output` (nothing after the job's end). */
  output(delta: string): void;
}

export interface Submitted<N> {
  providerJobId: string;
  notes: N;
  /** What the submission's answer already says (told after submit resolved, so the caller holds the id first). */
  first?: Look;
  /** Deltas of a streamed answer: read from after submit resolved until the job's end (bounded by `drainMs` then). */
  stream?(onDelta: (delta: string) => void, signal: AbortSignal): Promise<void>;
  /**
   * The request whose answer is the job's outcome (a provider that answers within it: OpenAI). The follower
   * makes it once the caller holds the provider job id, and the job runs from then (`running`); the pieces
   * it streams are told as they come (`output`), and the look it resolves to ends the job: `over` with its
   * outcome, or `ending` when its outputs are still to be read (as for any job over at its provider, the
   * deadline no longer cuts it then); a throw is failed. Its signal aborts on a cancel, at the deadline and on
   * close, which stops the request in flight. Nothing is looked up meanwhile (no backstop poll), and a
   * `resume` of the job while it is followed here hands its updates to the new report instead.
   */
  answer?(call: AnswerCall): Promise<Look>;
}

/**
 * A channel on which the provider pushes news of a job (a socket), open while the follower follows the job.
 * What it says comes to the follower as Looks (`tell`), as an event's would.
 */
export interface Watch {
  /** Settles once the channel is closed: dropped by the provider, or closed by `close`. */
  readonly closed: Promise<void>;
  close(): void;
}

/**
 * A provider's protocol: request and answer mapping and the HTTP calls, with no timers and no jobs of its own.
 * Failures of a look are Looks (`over` with a failed update, or `pending` with a line); only `submit` throws,
 * a ProviderFailure when the provider refused the job.
 */
export interface ProtocolModule<N> {
  readonly kind: string;
  readonly maxConcurrentJobs?: number;
  readonly answersWithinRequest?: boolean;
  /** Hands the job over; resolves once the provider accepted it. */
  submit(job: AdapterJob, call: CallContext): Promise<Submitted<N>>;
  /**
   * What following a job accepted earlier needs, from its provider job id alone; a failure when it is not one.
   * `adopted`: the job was handed over again and an event of its earlier submission named it (the submission window).
   */
  resume(providerJobId: string, job: AdapterJob, adopted?: boolean): { notes: N } | { failure: ProviderFailure };
  /** One look at the job (the backstop poll). Absent: nothing to look up (a job's `answer` is its outcome), so no poll. */
  get?(followed: Followed<N>, call: CallContext): Promise<Look>;
  /** Asks the provider to stop the job; never throws. `notes` when the job is followed here. */
  cancel(providerJobId: string, notes: N | undefined, signal: AbortSignal): Promise<void>;
  verifyEvent?(event: InboundEvent): VerifiedEvent;
  /** What a verified event says of a followed job. */
  parseEvent?(followed: Followed<N>, payload: unknown): Look;
  /** The outcome of a job its deadline overtook (then cancelled at the provider). */
  overdue(followed: Followed<N>): TerminalUpdate;
  /**
   * How long until the job's next backstop look, in ms from now; asked whenever the follower schedules one:
   * when it starts following the job (`submitted`, `resumed`, `adopted`), after an event, and after a look.
   * Absent: the deployment's pollMs, and at once after a resume. A provider that may only be asked after
   * a while of silence (Cog: a look may run the job again) says when from the job's notes.
   */
  nextLookMs?(followed: Followed<N>, after: LookAfter): number;
  /** How long past its deadline a job is still followed (a provider that ends it there itself, and says so). */
  readonly deadlineGraceMs?: number;
  /**
   * The overdue outcome is told once the module's `cancel` is done, not as it goes out: a cancel of several
   * requests (ComfyUI: read the queue, then delete or interrupt), whose effect whoever hears the outcome may count on.
   */
  readonly cancelBeforeOverdue?: boolean;
  /**
   * Opens the provider's channel of news about a followed job (ComfyUI's socket). The follower opens it when it
   * follows the job (submitted, resumed or adopted), closes it at the job's end, and when it drops, looks at once
   * and opens it again after pollMs, doubling while it keeps dropping (up to `watchRetryMaxMs`; back to pollMs
   * once it tells something). A look it tells does not push the backstop poll back (a channel's chatter is not
   * a job's end): a `pending` look that says nothing only says the channel works. A channel `submit` opened
   * before it handed the job over (so that none of its news is missed) is the module's to hand out here, from its notes.
   */
  watch?(followed: Followed<N>, tell: (look: Look) => void): Watch;
  /** The longest wait before a dropped watch is opened again (default 30 s). */
  readonly watchRetryMaxMs?: number;
  /** Releases what the module holds for all its jobs (a connection pool), once the follower is closed. */
  close?(): Promise<void>;
  /** A success is told after `running` even when no look said it ran (a job state machine that takes success from running only). */
  readonly runningBeforeSuccess?: boolean;
  /** How long a finished job's stream may take to deliver its last pieces. */
  readonly drainMs?: number;
  /**
   * The submission window: a job handed over again after a restart first waits this long for an event that
   * names it by its job token (its earlier submission reached the provider), and is adopted by it.
   */
  readonly adoption?: {
    /** 0: no window. */
    windowMs: number;
    /** How long an event of a job nothing follows is kept (default windowMs). */
    keepMs?: number;
    /**
     * The provider job id is our generation id (Cog): events of ids nothing follows are kept under it, token or
     * not, and a job followed from then on (its submission's answer came after its start event) takes them.
     */
    byProviderJobId?: boolean;
    /** An event naming a job that nothing follows here may be kept for that job's hand-over. */
    keeps(providerJobId: string, payload: unknown): boolean;
    /** A later event replaces a kept one, unless this says no (an end is not replaced by a start). */
    replaces?(held: unknown, incoming: unknown): boolean;
    /** The line on the job's timeline while it waits. */
    waiting(ms: number): string;
  };
}

/** What happened just before a look is scheduled (`nextLookMs`). */
export type LookAfter = 'submitted' | 'resumed' | 'adopted' | 'event' | 'look';

interface Follow<N> extends Followed<N> {
  /** Whom the job's updates go to; a resume while its `answer` is out here hands them to another. */
  report: Report;
  /** Its outcome is its request's `answer`: no backstop poll. */
  answers: boolean;
  /** following: polled and told; settling: its outcome is being read; ended: told its end, or dropped. */
  phase: 'following' | 'settling' | 'ended';
  running: boolean;
  polling: boolean;
  /** A lookNow came while a look was in flight (or since it was scheduled): one more look right after. */
  lookAgain: boolean;
  poll?: Timer;
  /** The module's watch while open; how often it dropped in a row; the timer that opens it again. */
  watching?: Watch;
  watchDrops: number;
  watchRetry?: Timer;
  deadline?: Timer;
  abort: AbortController;
  stream?: { abort: AbortController; ended: Promise<void> };
}

/** The clock of an adapter's context: the service's, or (a context without one) the system's with its `now`. */
export function clockOf(context: AdapterContext): Clock {
  return context.clock ?? { now: () => context.now(), setTimer: systemClock.setTimer };
}

/** A ProviderAdapter made of a protocol module and a follower on the context's clock. */
export function followedAdapter<N>(module: ProtocolModule<N>, context: AdapterContext): ProviderAdapter {
  return new JobFollower(module, context).adapter();
}

export class JobFollower<N> {
  private readonly follows = new Map<string, Follow<N>>();
  /** Submissions in flight, by generation id. */
  private readonly submitting = new Map<string, AbortController>();
  private readonly closing = new AbortController();
  private readonly clock: Clock;
  private readonly unclaimed: UnclaimedEvents<{ providerJobId: string; payload: unknown }> | undefined;

  constructor(
    private readonly module: ProtocolModule<N>,
    private readonly context: AdapterContext,
  ) {
    this.clock = clockOf(context);
    this.unclaimed = module.adoption
      ? new UnclaimedEvents({
          keepMs: module.adoption.keepMs ?? module.adoption.windowMs,
          max: 1_000,
          now: () => this.clock.now(),
          clock: this.clock,
          closing: this.closing.signal,
        })
      : undefined;
  }

  adapter(): ProviderAdapter {
    const m = this.module;
    return {
      kind: m.kind,
      ...(m.maxConcurrentJobs !== undefined ? { maxConcurrentJobs: m.maxConcurrentJobs } : {}),
      ...(m.answersWithinRequest ? { answersWithinRequest: true } : {}),
      submit: (job, report) => this.submit(job, report),
      resume: (providerJobId, job, report) => this.resume(providerJobId, job, report),
      cancel: (providerJobId) => this.cancel(providerJobId),
      ...(m.verifyEvent ? { verifyEvent: (event: InboundEvent) => m.verifyEvent!(event) } : {}),
      ...(m.parseEvent ? { deliverEvent: (providerJobId: string, payload: unknown, jobId?: string) => this.deliverEvent(providerJobId, payload, jobId) } : {}),
      close: () => this.close(),
    };
  }

  /** Jobs followed now (for tests and the health of the process). */
  get size(): number {
    return this.follows.size;
  }

  async submit(job: AdapterJob, report: Report): Promise<{ providerJobId: string }> {
    if (this.closing.signal.aborted) throw new ProviderFailure(PROVIDER_ERROR_CODES.unavailable, `The ${this.module.kind} adapter is closed.`);
    // A cancel of a job whose provider job id is its own (Cog) stops its submission too: its wait in the
    // submission window, or for a free slot.
    const submitting = new AbortController();
    this.submitting.set(job.generationId, submitting);
    let submitted: Submitted<N>;
    try {
      const adoption = this.module.adoption;
      const windowMs = adoption && job.afterRestart ? adoption.windowMs : 0;
      if (adoption && windowMs > 0 && this.unclaimed) {
        // Handed over again after a restart: its earlier submission may have reached the provider, whose event then names this job.
        report({ type: 'progress', detail: adoption.waiting(windowMs) });
        const held = await this.unclaimed.take(job.generationId, windowMs, submitting.signal);
        if (submitting.signal.aborted) throw new ProviderFailure(PROVIDER_ERROR_CODES.cancelled, 'The job was cancelled before it was handed over.');
        const resumed = held ? this.module.resume(held.providerJobId, job, true) : undefined;
        if (held && resumed && 'notes' in resumed) {
          const f = this.follow(held.providerJobId, job, report, resumed.notes, 'adopted');
          // Told after submit answered, so the caller holds the provider job id first.
          setImmediate(() => this.event(f, held.payload));
          return { providerJobId: held.providerJobId };
        }
      }
      submitted = await this.module.submit(job, this.callOf(AbortSignal.any([this.closing.signal, submitting.signal]), report));
    } finally {
      if (this.submitting.get(job.generationId) === submitting) this.submitting.delete(job.generationId);
    }
    const f = this.follow(submitted.providerJobId, job, report, submitted.notes, 'submitted', submitted.answer !== undefined);
    // Told after submit answered, so the caller holds the provider job id first.
    setImmediate(() => {
      if (submitted.answer && f.phase === 'following') void this.ask(f, submitted.answer);
      if (submitted.stream && f.phase === 'following') this.openStream(f, submitted.stream);
      if (submitted.first) this.apply(f, submitted.first);
      this.catchUp(f);
    });
    return { providerJobId: submitted.providerJobId };
  }

  /** Events that came for the job's id before it was followed here (byProviderJobId). */
  private catchUp(f: Follow<N>): void {
    if (!this.module.adoption?.byProviderJobId || !this.unclaimed) return;
    const held = this.unclaimed.takeNow(f.providerJobId);
    if (held) this.event(f, held.payload);
  }

  resume(providerJobId: string, job: AdapterJob, report: Report): void {
    if (this.closing.signal.aborted) return;
    const answering = this.follows.get(providerJobId);
    if (answering?.answers) {
      // Its request is still out here, and nothing could look the job up again: its answer goes to the new report.
      answering.report = report;
      return;
    }
    const resumed = this.module.resume(providerJobId, job);
    if ('failure' in resumed) {
      report({ type: 'failed', errorCode: resumed.failure.code, errorMessage: resumed.failure.message });
      return;
    }
    // Asked straight away (unless the module says otherwise): the job may have ended while nobody followed it.
    const f = this.follow(providerJobId, job, report, resumed.notes, 'resumed');
    this.catchUp(f);
  }

  async cancel(providerJobId: string): Promise<void> {
    this.submitting.get(providerJobId)?.abort();
    if (this.module.adoption?.byProviderJobId) this.unclaimed?.takeNow(providerJobId);
    const f = this.follows.get(providerJobId);
    // Following stops first, quietly: nothing is told after our own cancel.
    if (f) this.end(f);
    await this.module.cancel(providerJobId, f?.notes, this.closing.signal).catch(() => undefined);
  }

  deliverEvent(providerJobId: string, payload: unknown, jobId?: string): void {
    const f = this.follows.get(providerJobId);
    if (!f) {
      const adoption = this.module.adoption;
      const key = adoption?.byProviderJobId ? providerJobId : jobId;
      if (adoption && this.unclaimed && key !== undefined && adoption.keeps(providerJobId, payload)) {
        // An event of a job whose submission's answer was lost: kept for the job's new hand-over, which adopts it.
        const replaces = adoption.replaces;
        this.unclaimed.hold(key, { providerJobId, payload }, replaces ? (held) => replaces(held.payload, payload) : undefined);
      }
      return;
    }
    this.event(f, payload);
  }

  async close(): Promise<void> {
    this.closing.abort();
    for (const f of [...this.follows.values()]) this.end(f);
    this.submitting.clear();
    this.unclaimed?.clear();
    await this.module.close?.().catch(() => undefined);
  }

  private event(f: Follow<N>, payload: unknown): void {
    if (f.phase !== 'following' || !this.module.parseEvent) return;
    this.apply(f, this.module.parseEvent(f, payload));
    // An event came: the backstop poll waits a whole interval from now (or as long as the module says).
    if (f.phase === 'following' && !f.polling) this.reschedule(f, 'event');
  }

  /** The next look: at once when a lookNow asked for one, else when `nextLook` says. */
  private reschedule(f: Follow<N>, after: LookAfter): void {
    this.schedule(f, f.lookAgain ? 0 : this.nextLook(f, after));
  }

  private lookNow(f: Follow<N>): void {
    f.lookAgain = true;
    // A look in flight may have read the job before the news: another one follows it (poll reschedules).
    if (!f.polling) this.schedule(f, 0);
  }

  private openWatch(f: Follow<N>): void {
    if (!this.module.watch || f.phase === 'ended' || f.watching || this.closing.signal.aborted) return;
    let watch: Watch;
    try {
      watch = this.module.watch(f, (look) => {
        // `watch` is still unset while the module hands over what its channel held (told as it opens).
        if (watch !== undefined && f.watching !== watch) return;
        f.watchDrops = 0;
        this.apply(f, look);
      });
    } catch {
      watch = { closed: Promise.resolve(), close() {} };
    }
    f.watching = watch;
    void watch.closed.then(
      () => this.watchClosed(f, watch),
      () => this.watchClosed(f, watch),
    );
  }

  /** The watch dropped: news may have been missed, so a look now; opened again after a wait that doubles. */
  private watchClosed(f: Follow<N>, watch: Watch): void {
    if (f.watching !== watch) return;
    f.watching = undefined;
    if (f.phase === 'ended' || this.closing.signal.aborted) return;
    if (f.phase === 'following') this.lookNow(f);
    const delayMs = Math.min(this.context.pollIntervalMs * 2 ** f.watchDrops, this.module.watchRetryMaxMs ?? 30_000);
    f.watchDrops += 1;
    f.watchRetry?.cancel();
    f.watchRetry = this.clock.setTimer(() => this.openWatch(f), delayMs);
  }

  /** The delay of the job's next backstop look: the module's, else pollMs (at once after a resume). */
  private nextLook(f: Follow<N>, after: LookAfter): number {
    if (this.module.nextLookMs) return Math.max(0, this.module.nextLookMs(f, after));
    return after === 'resumed' ? 0 : this.context.pollIntervalMs;
  }

  private follow(providerJobId: string, job: AdapterJob, report: Report, notes: N, after: LookAfter, answers = false): Follow<N> {
    const previous = this.follows.get(providerJobId);
    if (previous) this.end(previous);
    const f: Follow<N> = {
      providerJobId,
      job,
      notes,
      report,
      answers,
      phase: 'following',
      running: false,
      polling: false,
      lookAgain: false,
      watchDrops: 0,
      abort: new AbortController(),
    };
    this.follows.set(providerJobId, f);
    const overdueAt = job.deadline + (this.module.deadlineGraceMs ?? 0);
    f.deadline = this.clock.setTimer(() => this.overdue(f), Math.max(0, overdueAt - this.clock.now()));
    this.schedule(f, this.nextLook(f, after));
    // Opened once the caller holds the provider job id (submit answered), as what it tells may be the job's news.
    if (this.module.watch) setImmediate(() => this.openWatch(f));
    return f;
  }

  private callOf(signal: AbortSignal, report: Report): CallContext {
    return {
      signal,
      say: (detail) => {
        if (!this.closing.signal.aborted) report({ type: 'progress', detail });
      },
      wait: (ms, waitSignal = signal) => this.wait(ms, waitSignal),
    };
  }

  private wait(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const done = () => {
        timer.cancel();
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = this.clock.setTimer(done, ms);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  private schedule(f: Follow<N>, delayMs: number): void {
    f.poll?.cancel();
    if (f.phase !== 'following' || f.answers || !this.module.get || this.closing.signal.aborted) return;
    f.poll = this.clock.setTimer(() => void this.poll(f), delayMs);
  }

  private async poll(f: Follow<N>): Promise<void> {
    if (f.phase !== 'following' || f.polling) return;
    f.polling = true;
    f.lookAgain = false;
    let look: Look;
    try {
      look = await this.module.get!(f, this.callOf(f.abort.signal, f.report));
    } catch (error) {
      look = { type: 'over', update: failedUpdate(error) };
    }
    // Still `polling` while its look is told: a lookNow in it (or that came meanwhile) is the next look, at once.
    this.apply(f, look);
    f.polling = false;
    if (f.phase === 'following') this.reschedule(f, 'look');
  }

  private apply(f: Follow<N>, look: Look): void {
    if (f.phase !== 'following') return;
    if (look.running) this.running(f);
    for (const detail of look.progress ?? []) this.tell(f, { type: 'progress', detail });
    switch (look.type) {
      case 'pending':
        return;
      case 'lookNow':
        this.lookNow(f);
        return;
      case 'over':
        void this.ending(f, async () => look.update);
        return;
      case 'ending':
        void this.ending(f, async () => {
          const next = await look.settle(this.callOf(f.abort.signal, f.report));
          return next.type === 'over' ? next.update : next;
        });
        return;
    }
  }

  /** The job is over at the provider: its stream drained, its outcome read, then told (or it goes on being followed). */
  private async ending(f: Follow<N>, outcome: () => Promise<TerminalUpdate | Look>): Promise<void> {
    f.phase = 'settling';
    f.poll?.cancel();
    await this.drained(f);
    let result: TerminalUpdate | Look;
    try {
      result = await outcome();
    } catch (error) {
      result = failedUpdate(error);
    }
    if (f.phase !== 'settling') return;
    if (result.type === 'succeeded' || result.type === 'failed') return this.end(f, result);
    // Not over after all (its result could not be read yet): followed on.
    f.phase = 'following';
    f.lookAgain = false;
    this.apply(f, result);
    if (f.phase === 'following') this.reschedule(f, 'look');
  }

  private overdue(f: Follow<N>): void {
    if (f.phase !== 'following') return;
    const update = this.module.overdue(f);
    // The cancel goes out before the outcome is told: whoever hears the outcome may count on it.
    const cancelled = this.module.cancel(f.providerJobId, f.notes, this.closing.signal).catch(() => undefined);
    if (!this.module.cancelBeforeOverdue) return this.end(f, update);
    // Told once the cancel is done; meanwhile nothing else of the job is (a cancel of ours ends it quietly).
    f.phase = 'settling';
    f.poll?.cancel();
    void cancelled.then(() => {
      if (f.phase === 'settling') this.end(f, update);
    });
  }

  /**
   * Makes the job's request, whose answer is its outcome: the job runs from now, each piece is told as it
   * comes, and the answer ends the job unless a cancel, the deadline or close did first (all three abort it).
   */
  private async ask(f: Follow<N>, answer: NonNullable<Submitted<N>['answer']>): Promise<void> {
    this.running(f);
    const signal = f.abort.signal;
    const call: AnswerCall = {
      signal,
      say: (detail) => this.tell(f, { type: 'progress', detail }),
      wait: (ms, waitSignal = signal) => this.wait(ms, waitSignal),
      // Straight to the job's report: a piece of a token stream takes no other hop.
      output: (delta) => {
        if (f.phase === 'following' && delta !== '') f.report({ type: 'output', delta });
      },
    };
    let look: Look;
    try {
      look = await answer(call);
    } catch (error) {
      look = { type: 'over', update: failedUpdate(error) };
    }
    this.apply(f, look);
  }

  private openStream(f: Follow<N>, stream: NonNullable<Submitted<N>['stream']>): void {
    const abort = new AbortController();
    const ended = stream(
      (delta) => {
        if (f.phase === 'ended' || this.closing.signal.aborted || delta === '') return;
        // Text coming out is the job running, whether or not a look has said so yet.
        this.running(f);
        f.report({ type: 'output', delta });
      },
      AbortSignal.any([this.closing.signal, abort.signal]),
    ).catch(() => undefined);
    f.stream = { abort, ended };
  }

  /** Lets the stream deliver its last pieces (up to the module's drainMs), then closes it. */
  private async drained(f: Follow<N>): Promise<void> {
    const stream = f.stream;
    if (!stream) return;
    const enough = new AbortController();
    await Promise.race([stream.ended, this.wait(this.module.drainMs ?? 0, enough.signal)]);
    enough.abort();
    stream.abort.abort();
  }

  private running(f: Follow<N>): void {
    if (f.running) return;
    f.running = true;
    this.tell(f, { type: 'running' });
  }

  private tell(f: Follow<N>, update: AdapterUpdate): void {
    if (f.phase !== 'ended' && !this.closing.signal.aborted) f.report(update);
  }

  /** Stops following `f`; with an update, tells it as the job's one outcome. */
  private end(f: Follow<N>, update?: TerminalUpdate): void {
    if (f.phase === 'ended') return;
    if (update && !this.closing.signal.aborted) {
      if (update.type === 'succeeded' && this.module.runningBeforeSuccess) this.running(f);
      f.report(update);
    }
    f.phase = 'ended';
    f.poll?.cancel();
    f.deadline?.cancel();
    f.watchRetry?.cancel();
    const watching = f.watching;
    f.watching = undefined;
    watching?.close();
    f.abort.abort();
    f.stream?.abort.abort();
    if (this.follows.get(f.providerJobId) === f) this.follows.delete(f.providerJobId);
  }
}

/** Anything thrown by a module's call, as the job's failed update (a ProviderFailure keeps its code). */
export function failedUpdate(failure: unknown, secrets: readonly string[] = []): Extract<AdapterUpdate, { type: 'failed' }> {
  if (failure instanceof ProviderFailure) return { type: 'failed', errorCode: failure.code, errorMessage: upstreamMessage(failure.message, secrets) };
  return { type: 'failed', errorCode: PROVIDER_ERROR_CODES.error, errorMessage: upstreamMessage((failure as Error)?.message ?? String(failure), secrets) };
}
