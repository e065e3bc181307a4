import { log } from '../util/log.js';

/** One thing to close: named in the log when it fails. */
interface ShutdownStep {
  name: string;
  close: () => unknown;
}

/**
 * What a process has opened, in the order it opened it; closed in the reverse order, so whatever a
 * piece uses is still open while it closes. The one order for both ends of a life: a start-up that fails
 * half-way and a drain close the same steps the same way. Each step is awaited before the next; a step
 * that fails is logged and counted, and the later ones still run.
 */
export class ShutdownOrder {
  private readonly steps: ShutdownStep[] = [];
  private closing?: Promise<void>;

  /** `close` runs once, after every step added later has closed. */
  add(name: string, close: () => unknown): void {
    if (this.closing) throw new Error(`cannot add "${name}": the shutdown has begun`);
    this.steps.push({ name, close });
  }

  /**
   * Runs `open`, which adds to this order as it opens things. When it fails half-way, what it had added is
   * closed, and its error thrown.
   */
  async opening<T>(open: () => Promise<T>): Promise<T> {
    try {
      return await open();
    } catch (error) {
      await this.close().catch(() => undefined);
      throw error;
    }
  }

  /** The steps' names in the order they will close. */
  names(): string[] {
    return this.steps.map((step) => step.name).reverse();
  }

  /**
   * Closes every step once, last added first. Resolves when all have closed; rejects, after all have run,
   * naming the steps that failed. Called again, it answers the first call's promise.
   */
  close(): Promise<void> {
    this.closing ??= this.closeAll();
    return this.closing;
  }

  private async closeAll(): Promise<void> {
    const failed: string[] = [];
    for (const step of [...this.steps].reverse()) {
      try {
        await step.close();
      } catch (error) {
        failed.push(step.name);
        log.error('shutdown step failed', { step: step.name, error: String((error as Error)?.stack ?? error) });
      }
    }
    if (failed.length > 0) throw new ShutdownError(failed);
  }
}

/** Some steps of a shutdown failed (each was logged); every other step still ran. */
export class ShutdownError extends Error {
  constructor(readonly failed: readonly string[]) {
    super(`${failed.length} shutdown step(s) failed: ${failed.join(', ')}`);
    this.name = 'ShutdownError';
  }
}
