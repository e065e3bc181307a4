import type { LiveStream } from './stream.js';
import type { Hello } from './types.js';

/** What every view gets: the live stream, who is logged in, and navigation. */
export interface AppContext {
  stream: LiveStream;
  hello: Hello;
  /** Admins edit; read-only callers see no edit controls (the server would refuse them anyway). */
  canEdit: boolean;
  navigate(hash: string): void;
}

/** Renders into `root`; returns what to undo when the view is left (listeners, charts, timers). */
export type View = (root: HTMLElement, app: AppContext, params: string[]) => (() => void) | void;

/** Calls `load` now and again whenever the policy set changes (the stream's policies_revision). */
export function onPolicyChange(app: AppContext, load: () => void): () => void {
  let revision = app.stream.latest?.policies_revision;
  load();
  return app.stream.subscribe((snapshot) => {
    if (snapshot.policies_revision !== revision) {
      revision = snapshot.policies_revision;
      load();
    }
  });
}
