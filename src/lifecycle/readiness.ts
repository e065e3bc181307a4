/**
 * Lifecycle state shared by /readyz, the gRPC health service and shutdown:
 * starting (503) → ready (200) → draining (503 from the moment SIGTERM arrives).
 */
export type ReadinessState = 'starting' | 'ready' | 'draining';

export class Readiness {
  private current: ReadinessState = 'starting';
  private readonly listeners: ((state: ReadinessState) => void)[] = [];

  get state(): ReadinessState {
    return this.current;
  }

  get isReady(): boolean {
    return this.current === 'ready';
  }

  markReady(): void {
    if (this.current === 'starting') this.set('ready');
  }

  markDraining(): void {
    this.set('draining');
  }

  onChange(listener: (state: ReadinessState) => void): void {
    this.listeners.push(listener);
  }

  private set(state: ReadinessState): void {
    this.current = state;
    for (const listener of this.listeners) listener(state);
  }
}
