import { ApiError, clearCredential, credential, setCredential, unauthenticated } from './api.js';
import type { AppContext, View } from './app-context.js';
import { h, replace } from './dom.js';
import { LiveStream } from './stream.js';
import { limitedView } from './views/limited.js';
import { overviewView } from './views/overview.js';
import { policiesView } from './views/policies.js';
import { policyDetailView } from './views/policy-detail.js';
import { tryView } from './views/try.js';

/** Routes by location hash: #/overview, #/policies, #/policies/<id>, #/limited, #/try. */
const ROUTES: { pattern: RegExp; view: View; nav: string }[] = [
  { pattern: /^#\/overview$/, view: overviewView, nav: 'overview' },
  { pattern: /^#\/policies$/, view: policiesView, nav: 'policies' },
  { pattern: /^#\/policies\/(.+)$/, view: policyDetailView, nav: 'policies' },
  { pattern: /^#\/limited$/, view: limitedView, nav: 'limited' },
  { pattern: /^#\/try$/, view: tryView, nav: 'try' },
];
const NAV = [
  ['overview', 'Overview'],
  ['policies', 'Policies'],
  ['limited', 'Who is limited'],
  ['try', 'Try a decision'],
] as const;

const root = document.getElementById('app')!;
let stream: LiveStream | undefined;

function showLogin(message?: string): void {
  stream?.stop();
  stream = undefined;
  const field = h('input', { type: 'password', name: 'credential', autocomplete: 'off', placeholder: 'API key or JWT', 'data-testid': 'login-key' });
  const form = h(
    'form',
    { class: 'panel login', 'data-testid': 'login' },
    h('h2', {}, 'Rate-limit dashboard'),
    h('p', { class: 'muted' }, 'Sign in with an API key or a token. It is kept for this browser tab only.'),
    message ? h('div', { class: 'error', 'data-testid': 'login-error' }, message) : null,
    field,
    h('button', { type: 'submit', class: 'primary', 'data-testid': 'login-submit' }, 'Sign in'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    setCredential(field.value.trim());
    void start();
  });
  replace(root, form);
  field.focus();
}

/**
 * Opens the pages as the stored credential's caller or, with none stored, asks the stream with no
 * credential: a server that needs none (RL_AUTH_ENABLED=false) answers it, and the page opens as
 * `anonymous` with a note that the server is open; one that needs a credential answers 401, and the
 * sign-in form appears.
 */
async function start(): Promise<void> {
  const open = credential() === null;
  const liveDot = h('span', { class: 'live-dot' });
  const live = new LiveStream((connected) => liveDot.classList.toggle('on', connected));
  stream = live;
  let hello;
  try {
    hello = await live.start();
  } catch (error) {
    live.stop();
    clearCredential();
    const status = error instanceof ApiError ? error.status : 0;
    if (open && status === 401) return showLogin();
    return showLogin(status === 401 ? 'That key or token was not accepted.' : status === 403 ? 'This credential may not read the dashboard.' : `Cannot connect: ${(error as Error).message}`);
  }

  const links = new Map(NAV.map(([id, label]) => [id, h('a', { href: `#/${id}`, 'data-testid': `nav-${id}` }, label)]));
  const main = h('main');
  const app: AppContext = {
    stream: live,
    hello,
    canEdit: hello.can_edit,
    navigate: (hash) => {
      location.hash = hash;
    },
  };
  replace(
    root,
    h(
      'header',
      { class: 'top' },
      h('h1', {}, 'Rate limits'),
      h('nav', {}, [...links.values()]),
      h(
        'div',
        { class: 'who' },
        liveDot,
        h('span', { 'data-testid': 'whoami' }, `${hello.subject} · ${hello.role ?? 'no role'}`),
        open
          ? h(
              'span',
              { class: 'open-note', 'data-testid': 'open-server', title: 'Authentication is off (RL_AUTH_ENABLED): anyone who reaches this server can read and change its policies.' },
              'open server: no credential needed',
            )
          : h('button', { type: 'button', 'data-testid': 'logout', onclick: () => (clearCredential(), showLogin()) }, 'Sign out'),
      ),
    ),
    main,
  );

  let leave: (() => void) | void;
  const route = () => {
    if (stream !== live) return;
    leave?.();
    const hash = location.hash || '#/overview';
    const match = ROUTES.map((r) => ({ r, m: r.pattern.exec(hash) })).find((x) => x.m);
    if (!match) return app.navigate('#/overview');
    for (const [id, link] of links) link.classList.toggle('active', id === match.r.nav);
    leave = match.r.view(main, app, match.m!.slice(1));
  };
  window.onhashchange = route;
  route();
}

unauthenticated.addEventListener('logout', () => {
  const hadCredential = credential() !== null;
  clearCredential();
  showLogin(hadCredential ? 'Your session was not accepted any more; sign in again.' : 'The server asks for a credential now; sign in.');
});

void start();
