// @ts-check
/**
 * The approvals console: sign in with a bearer token, watch the tenant's pending approvals live,
 * review one (the exact input it covers, its digest, the rule and policy revision, the shell
 * segment that asked), allow or deny it with a reason, read the history with each call's outcome,
 * and follow a run's dispatches. Plain ES modules, no framework, no HTML strings (see dom.js).
 *
 * Events from the stream are notifications only: the approval they name is read from the API
 * (which reads the journal) before anything is shown, so a forged notification shows nothing.
 */
import { Api, ApiError } from './api.js';
import { byId, h, replace } from './dom.js';
import { age, agentText, outcomeText, refreshAges, ruleSummary, time, until } from './format.js';
import { inputPreview } from './input-preview.js';
import { jsonView } from './json-view.js';
import { findings, hiddenWarning, revealed } from './reveal.js';
import { traceLink } from './trace-link.js';

const TOKEN_KEY = 'toolgate.console.token';
const TITLE = 'Toolgate approvals';
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;
const KEY_PATTERN = /^[0-9a-f]{64}$/;
/** How often the history and run views look for outcomes that settled since. */
const POLL_MS = 5000;
/** When the pending list is read again after the stream (re)opens, and then how often. */
const RESYNC_AFTER_OPEN_MS = 2000;
const RESYNC_MS = 30_000;
/** How many of a run's dispatches its view shows. */
const RUN_ROWS = 2000;

/**
 * @typedef {{ json: string, truncated: boolean, bytes: number, summary: string | null }} InputPreview
 * @typedef {{ approvalKey: string, dispatchId: string, runId: string, status: string,
 *   toolName: string | null, tool: { risk?: string } | null, input: unknown,
 *   agent: { agentType: string, label?: string } | null, decidedBy: string | null, rule: unknown,
 *   submittedBy: string | null, policyRevision: number, inputDigest: string,
 *   suspendedAt: string | null, expiresAt: string | null, onTimeout: string | null,
 *   decision: string | null, reason: string | null, resolvedBy: string | null,
 *   source: string | null, resolvedAt: string | null,
 *   settled?: { outcome: string, errorCode: string | null, at: string } | null,
 *   traceId?: string | null }} Approval
 * @typedef {Omit<Approval, 'input'> & { inputPreview: InputPreview }} ListedApproval
 *   An approval as a list holds it: its input as the preview (`approvals.list`'s items).
 * @typedef {{ approval: Approval, askReason: string | null, risk: string,
 *   shell: { command: string, scope: string, segments: { argv: string[], asked: boolean,
 *   why: string | null, unmatchable: string | null }[] } | null,
 *   elided?: string[], shellElided?: boolean }} Detail
 *   `elided` names `effectiveInput` when the reply carried the input as its preview (over the
 *   gateway's reply budget): {@link readDetail} reads it whole.
 */

const state = {
  /** @type {Api | null} */
  api: null,
  /** @type {{ tenant: string, identity: string, scopes: string[], traceUrlTemplate?: string | null } | null} */
  who: null,
  canApprove: false,
  /** Pending approvals by dispatch id. @type {Map<string, ListedApproval>} */
  pending: new Map(),
  /** The approval under review. @type {Detail | null} */
  detail: null,
  /** Resolutions this tab has in flight, by dispatch id: their answer says what happened. */
  resolving: new Set(),
  /**
   * Dispatches known to be resolved (here, or from the journal after a notification): a listing
   * read from a projection that has not folded the resolution yet does not bring them back.
   * @type {Set<string>}
   */
  resolved: new Set(),
  filters: { run: '', tool: '', minAgeMs: 0 },
  /** Why the pending list could not be read (shown in its place), or null. @type {string | null} */
  listError: null,
  /** Whether the live stream is open: decisions wait for it (a restarting gateway refuses them). */
  live: false,
  /** The history's search, and the cursor of its next page. */
  history: {
    /** @type {Record<string, string>} */
    filters: {},
    /** @type {ListedApproval[]} */
    rows: [],
    /** @type {string | null} */
    next: null,
  },
  /** @type {AbortController | null} */
  stream: null,
  /** @type {number | undefined} */
  poll: undefined,
  /** @type {'pending' | 'history' | 'runs'} */
  view: 'pending',
};

// ---------------------------------------------------------------------------------------------
// sign in and out

async function start() {
  byId('sign-in-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const input = /** @type {HTMLInputElement} */ (byId('token'));
    void signIn(input.value.trim());
  });
  byId('sign-out').addEventListener('click', () => signOut(''));
  window.addEventListener('hashchange', () => route());
  setInterval(() => refreshAges(document), 1000);
  // A safety net under the live feed (a notification lost on the way, a projection that lagged).
  setInterval(() => void loadPending(), RESYNC_MS);
  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved) await signIn(saved);
  else showSignIn('');
}

/** @param {string} message */
function showSignIn(message) {
  byId('app').hidden = true;
  byId('who').hidden = true;
  byId('sign-in').hidden = false;
  byId('sign-in-error').textContent = message;
  document.title = TITLE;
  /** @type {HTMLInputElement} */ (byId('token')).focus();
}

/** @param {string} token */
async function signIn(token) {
  if (!token) return showSignIn('Paste a token first.');
  const api = new Api(token);
  try {
    state.who = await api.get('whoami');
  } catch (err) {
    sessionStorage.removeItem(TOKEN_KEY);
    return showSignIn(
      err instanceof ApiError && err.status === 401
        ? 'That token was refused.'
        : `Cannot sign in: ${errorText(err)}`,
    );
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  /** @type {HTMLInputElement} */ (byId('token')).value = '';
  state.api = api;
  const scopes = state.who?.scopes ?? [];
  state.canApprove = scopes.includes('approve') || scopes.includes('admin');
  byId('sign-in').hidden = true;
  byId('app').hidden = false;
  byId('who').hidden = false;
  replace(
    byId('who-text'),
    h('span', { class: 'tenant' }, `tenant ${state.who?.tenant}`),
    ' · ',
    h('span', { id: 'identity' }, String(state.who?.identity)),
    ' · ',
    h('span', { class: state.canApprove ? 'scope' : 'scope readonly' }, scopes.join(', ')),
    state.canApprove ? null : h('span', { class: 'badge' }, 'read-only'),
  );
  follow();
  route();
}

/** @param {string} message */
function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  state.stream?.abort();
  state.stream = null;
  clearInterval(state.poll);
  state.api = null;
  state.who = null;
  state.pending.clear();
  state.resolved.clear();
  state.detail = null;
  replace(byId('view'));
  showSignIn(message);
}

/**
 * Every API failure goes through here: a refused token ends the session.
 * @param {unknown} err
 */
function failed(err) {
  if (err instanceof ApiError && err.status === 401) {
    signOut('The gateway no longer accepts this token. Sign in again.');
    return true;
  }
  return false;
}

/** @param {unknown} err */
function errorText(err) {
  return err instanceof ApiError ? `${err.code}: ${err.message}` : String(err);
}

/** @param {string} text */
function announce(text) {
  byId('announce').textContent = text;
}

// ---------------------------------------------------------------------------------------------
// the live feed

/**
 * Follows the approval events, and reloads the pending list each time the stream (re)opens, so
 * nothing parked or resolved while it was down is missed. Reconnects with backoff.
 */
function follow() {
  const controller = new AbortController();
  state.stream = controller;
  let backoff = 1000;
  /** Whether the gateway said it is restarting before the stream ended. */
  let restarting = false;
  const connect = async () => {
    if (controller.signal.aborted || !state.api) return;
    try {
      await state.api.followEvents({
        signal: controller.signal,
        onOpen: () => {
          backoff = 1000;
          setLive(true, 'Live');
          void loadPending();
          // A call parked just before the stream opened has no notification coming, and the
          // listing (the journal's projection) may lag it a moment: look once more.
          setTimeout(() => void loadPending(), RESYNC_AFTER_OPEN_MS);
        },
        onEvent: (type, data) => {
          if (type === 'server:restarting') restarting = true;
          else void onApprovalEvent(type, data);
        },
      });
    } catch (err) {
      if (controller.signal.aborted || failed(err)) return;
      if (err instanceof ApiError && err.status === 403) {
        setLive(false, `No live updates: ${err.message}`);
        return;
      }
    }
    if (controller.signal.aborted) return;
    // A stream that ended or failed: decisions wait until it is live again (a gateway that is
    // restarting refuses them, and the list may have changed meanwhile).
    setLive(false, restarting ? 'Server restarting — reconnecting…' : 'Reconnecting…');
    if (restarting) backoff = 1000;
    restarting = false;
    setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, 15000);
  };
  void connect();
}

/**
 * Shows whether the console is live, and enables the decision buttons only while it is.
 * @param {boolean} on
 * @param {string} text
 */
function setLive(on, text) {
  state.live = on;
  const live = byId('live');
  live.textContent = text;
  live.className = on ? 'live on' : 'live off';
  syncDecisionButtons();
}

/** Allow and Deny are enabled only while live and while no resolution of this tab is in flight. */
function syncDecisionButtons() {
  const busy = state.detail ? state.resolving.has(state.detail.approval.dispatchId) : false;
  for (const b of document.querySelectorAll('#decide button.allow, #decide button.deny')) {
    /** @type {HTMLButtonElement} */ (b).disabled = !state.live || busy;
  }
  const note = document.getElementById('offline-note');
  if (note) note.hidden = state.live;
}

/**
 * A notification names an approval; what is shown is read from the API.
 * @param {string} type
 * @param {string} data
 */
async function onApprovalEvent(type, data) {
  /** @type {any} */
  let event;
  try {
    event = JSON.parse(data);
  } catch {
    return;
  }
  const { approvalKey: key, dispatchId, runId } = event ?? {};
  if (!KEY_PATTERN.test(key) || !TOKEN_PATTERN.test(dispatchId) || !TOKEN_PATTERN.test(runId))
    return;
  /** @type {Detail} */
  let detail;
  try {
    detail = await /** @type {Api} */ (state.api).get(`approvals/${key}`, { dispatchId, runId });
  } catch (err) {
    failed(err);
    return;
  }
  const approval = detail.approval;
  if (approval.status === 'pending') {
    if (!state.pending.has(dispatchId)) {
      // Listed like the listing's items: the input as its preview (the review reads all of it).
      const { input, ...item } = approval;
      const preview = detail.elided?.includes('effectiveInput')
        ? /** @type {{ preview: InputPreview }} */ (input).preview
        : inputPreview(input);
      state.pending.set(dispatchId, { ...item, inputPreview: preview });
      announce(`New approval: ${approval.toolName} in run ${approval.runId}`);
    }
  } else {
    state.resolved.add(dispatchId);
    state.pending.delete(dispatchId);
  }
  renderPendingList();
  if (state.detail?.approval.dispatchId === dispatchId && !state.resolving.has(dispatchId)) {
    showDetailStatus(detail);
  }
  if (type === 'approval:resolved') {
    if (state.view === 'history') void loadHistory({ quiet: true });
    if (state.view === 'runs' && currentRun() === runId) void loadRun(runId);
  }
}

// ---------------------------------------------------------------------------------------------
// views

function currentRun() {
  const m = /^#\/runs\/([^/]+)$/.exec(location.hash);
  return m ? decodeURIComponent(m[1] ?? '') : '';
}

function route() {
  if (!state.api) return;
  clearInterval(state.poll);
  const hash = location.hash;
  state.view = hash.startsWith('#/history')
    ? 'history'
    : hash.startsWith('#/runs')
      ? 'runs'
      : 'pending';
  for (const [id, view] of [
    ['nav-pending', 'pending'],
    ['nav-history', 'history'],
    ['nav-runs', 'runs'],
  ]) {
    const link = byId(/** @type {string} */ (id));
    if (state.view === view) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (state.view === 'history') renderHistoryView();
  else if (state.view === 'runs') renderRunsView(currentRun());
  else renderPendingView();
}

// --- pending ---------------------------------------------------------------------------------

/**
 * Reads every pending approval, page by page (a page is bounded in count and in bytes, so a long
 * queue or large inputs take several). A list that cannot be read is said in its place, never
 * shown as an empty queue.
 */
async function loadPending() {
  if (!state.api) return;
  /** @type {ListedApproval[]} */
  const approvals = [];
  try {
    /** @type {string | undefined} */
    let cursor;
    do {
      const page = await state.api.get('approvals', { status: 'pending', limit: 1000, cursor });
      approvals.push(...page.approvals);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
  } catch (err) {
    if (failed(err)) return;
    state.listError = errorText(err);
    announce(`Cannot list approvals: ${state.listError}`);
    renderPendingList();
    return;
  }
  state.listError = null;
  state.pending = new Map(
    approvals.filter((a) => !state.resolved.has(a.dispatchId)).map((a) => [a.dispatchId, a]),
  );
  renderPendingList();
}

function renderPendingView() {
  state.detail = null;
  const run = h('input', {
    id: 'filter-run',
    type: 'search',
    value: state.filters.run,
    autocomplete: 'off',
    oninput: (/** @type {Event} */ e) => {
      state.filters.run = /** @type {HTMLInputElement} */ (e.target).value.trim();
      renderPendingList();
    },
  });
  const tool = h('select', {
    id: 'filter-tool',
    onchange: (/** @type {Event} */ e) => {
      state.filters.tool = /** @type {HTMLSelectElement} */ (e.target).value;
      renderPendingList();
    },
  });
  const ages = [
    [0, 'any time'],
    [60_000, '1 minute'],
    [300_000, '5 minutes'],
    [1_800_000, '30 minutes'],
    [3_600_000, '1 hour'],
    [86_400_000, '1 day'],
  ];
  const minAge = h(
    'select',
    {
      id: 'filter-age',
      onchange: (/** @type {Event} */ e) => {
        state.filters.minAgeMs = Number(/** @type {HTMLSelectElement} */ (e.target).value);
        renderPendingList();
      },
    },
    ages.map(([ms, label]) =>
      h('option', { value: ms, selected: ms === state.filters.minAgeMs }, label),
    ),
  );
  replace(
    byId('view'),
    h('h2', { id: 'pending-title' }, 'Pending approvals'),
    h(
      'form',
      {
        class: 'filters',
        role: 'search',
        'aria-label': 'Filter pending approvals',
        onsubmit: (/** @type {Event} */ e) => e.preventDefault(),
      },
      h('label', { for: 'filter-run' }, 'Run'),
      run,
      h('label', { for: 'filter-tool' }, 'Tool'),
      tool,
      h('label', { for: 'filter-age' }, 'Waiting at least'),
      minAge,
    ),
    h(
      'div',
      { class: 'split' },
      h('div', { id: 'pending-list', class: 'list' }),
      h('section', {
        id: 'detail',
        class: 'detail',
        'aria-labelledby': 'detail-title',
        hidden: true,
        onkeydown: (/** @type {KeyboardEvent} */ e) => {
          if (e.key === 'Escape') closeDetail();
        },
      }),
    ),
  );
  renderPendingList();
}

function filteredPending() {
  const { run, tool, minAgeMs } = state.filters;
  const now = Date.now();
  return [...state.pending.values()]
    .filter((a) => !run || a.runId.includes(run))
    .filter((a) => !tool || a.toolName === tool)
    .filter((a) => !minAgeMs || (a.suspendedAt && now - Date.parse(a.suspendedAt) >= minAgeMs))
    .sort((a, b) => String(a.suspendedAt).localeCompare(String(b.suspendedAt)));
}

function renderPendingList() {
  const count = state.pending.size;
  const unknown = state.listError !== null;
  document.title = unknown ? `(?) ${TITLE}` : count > 0 ? `(${count}) ${TITLE}` : TITLE;
  byId('pending-count').textContent = unknown ? '?' : String(count);
  const list = document.getElementById('pending-list');
  if (!list) return;
  if (unknown) {
    list.dataset.shown = '';
    replace(
      list,
      h(
        'div',
        { class: 'error list-error', role: 'alert' },
        h('strong', {}, 'The pending approvals cannot be read. '),
        `Calls may be waiting. ${state.listError} `,
        h('button', { type: 'button', class: 'quiet', onclick: () => void loadPending() }, 'Retry'),
      ),
    );
    return;
  }
  const select = /** @type {HTMLSelectElement | null} */ (document.getElementById('filter-tool'));
  if (select) {
    const tools = [...new Set([...state.pending.values()].map((a) => a.toolName ?? '?'))].sort();
    if (state.filters.tool && !tools.includes(state.filters.tool)) tools.push(state.filters.tool);
    replace(
      select,
      h('option', { value: '' }, 'any'),
      tools.map((t) => h('option', { value: t, selected: t === state.filters.tool }, t)),
    );
  }
  const focused = document.activeElement?.getAttribute('data-dispatch');
  const rows = filteredPending();
  // Nothing to change: the rows stay the same elements (a click in progress is not lost to a
  // re-render; ages and countdowns tick on their own).
  const shown = JSON.stringify([
    rows.map((a) => a.dispatchId),
    count,
    state.detail?.approval.dispatchId ?? null,
    state.filters,
  ]);
  if (list.dataset.shown === shown && list.isConnected) return;
  list.dataset.shown = shown;
  if (rows.length === 0) {
    replace(
      list,
      h(
        'p',
        { class: 'empty' },
        count === 0
          ? 'Nothing is waiting for approval.'
          : 'No pending approval matches the filters.',
      ),
    );
    return;
  }
  replace(
    list,
    h(
      'table',
      { class: 'approvals' },
      h('caption', {}, `${rows.length} of ${count} pending, oldest first`),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          [
            'Tool',
            'Command / path',
            'Age',
            'Run',
            'Agent',
            'Risk',
            'Rule',
            'Policy',
            'Expires',
          ].map((c) => h('th', { scope: 'col' }, c)),
        ),
      ),
      h(
        'tbody',
        {},
        rows.map((a) => {
          const selected = state.detail?.approval.dispatchId === a.dispatchId;
          const risk = a.tool?.risk ?? 'undeclared';
          return h(
            'tr',
            { class: selected ? 'selected' : undefined, 'data-row': a.dispatchId },
            h(
              'td',
              {},
              h(
                'button',
                {
                  type: 'button',
                  class: 'review',
                  'data-dispatch': a.dispatchId,
                  'aria-label': `Review ${a.toolName} in run ${a.runId}`,
                  'aria-pressed': String(selected),
                  onclick: () => void openDetail(a.approvalKey, a.dispatchId, a.runId),
                },
                a.toolName ?? '?',
              ),
            ),
            inputCell(a),
            h('td', { class: 'num' }, age(a.suspendedAt)),
            h('td', { class: 'mono run' }, a.runId, traceAnchor(a.traceId, a.dispatchId)),
            h('td', {}, agentText(a.agent)),
            h('td', {}, h('span', { class: `risk risk-${risk}` }, risk)),
            h(
              'td',
              { class: 'rule', title: ruleSummary(a.rule, a.decidedBy) },
              ruleSummary(a.rule, a.decidedBy, { short: true }),
            ),
            h('td', { class: 'num' }, `rev ${a.policyRevision}`),
            h('td', { class: 'num' }, until(a.expiresAt)),
          );
        }),
      ),
    ),
  );
  if (focused) {
    /** @type {HTMLElement | null} */ (
      list.querySelector(`button[data-dispatch="${CSS.escape(focused)}"]`)
    )?.focus();
  }
}

/**
 * A link to a dispatch's trace in the deployment's trace UI, or nothing: only when the gateway
 * names a trace UI (`whoami`'s template, from its configuration) and the dispatch was recorded with
 * a trace id; the URL is the template with the id (32 hex digits, checked) put in.
 * @param {string | null | undefined} traceId
 * @param {string} dispatchId
 */
function traceAnchor(traceId, dispatchId) {
  const href = traceLink(state.who?.traceUrlTemplate, traceId);
  if (!href) return null;
  return h(
    'a',
    {
      class: 'trace',
      href,
      target: '_blank',
      rel: 'noopener noreferrer',
      'data-trace': dispatchId,
      'aria-label': `Trace of dispatch ${dispatchId}`,
    },
    'trace',
  );
}

/**
 * The list's command/path cell: the text revealed (hidden characters escaped and marked) and, when
 * it has any, a warning sign a screen reader hears.
 * @param {ListedApproval} a
 */
function inputCell(a) {
  const found = new Map();
  // What the call does in one line: its preview's headline field (command, path, url...), else
  // the start of its JSON.
  const text = revealed(a.inputPreview.summary ?? a.inputPreview.json, found);
  return h(
    'td',
    { class: 'mono input' },
    found.size
      ? h(
          'span',
          { class: 'hidden-flag', title: 'hidden characters', 'aria-label': 'hidden characters' },
          '⚠ ',
        )
      : null,
    ...text,
  );
}

/**
 * @param {string} key
 * @param {string} dispatchId
 * @param {string} runId
 */
async function openDetail(key, dispatchId, runId) {
  if (!state.api) return;
  /** @type {Detail} */
  let detail;
  try {
    detail = await readDetail(state.api, key, dispatchId, runId);
  } catch (err) {
    if (!failed(err)) announce(`Cannot open the approval: ${errorText(err)}`);
    return;
  }
  state.detail = detail;
  renderDetail(detail);
  renderPendingList();
  byId('detail-title').focus();
}

/**
 * An approval with its whole input. A reply that would pass the gateway's budget carries the
 * input as its preview (`elided`); the input is then read in chunks from the dispatch's values
 * (`GET /v1/dispatches/{id}/values/effectiveInput`, the post-hook input the approval covers). Those
 * come from the journal's projection, which may not hold a call parked a moment ago yet: a
 * not-found is asked again for a few seconds.
 * @param {Api} api
 * @param {string} key
 * @param {string} dispatchId
 * @param {string} runId
 * @returns {Promise<Detail>}
 */
async function readDetail(api, key, dispatchId, runId) {
  /** @type {Detail} */
  const detail = await api.get(`approvals/${key}`, { dispatchId, runId });
  if (!detail.elided?.includes('effectiveInput')) return detail;
  const path = `dispatches/${encodeURIComponent(dispatchId)}/values/effectiveInput`;
  let text = '';
  /** @type {number | null} */
  let offset = 0;
  for (let misses = 0; offset !== null;) {
    /** @type {{ text: string, nextOffset: number | null }} */
    let chunk;
    try {
      chunk = await api.get(path, { offset });
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404) || ++misses > 20) throw err;
      await new Promise((resolve) => setTimeout(resolve, 250));
      continue;
    }
    text += chunk.text;
    offset = chunk.nextOffset;
  }
  return { ...detail, approval: { ...detail.approval, input: JSON.parse(text) }, elided: [] };
}

function closeDetail() {
  const dispatchId = state.detail?.approval.dispatchId;
  state.detail = null;
  const section = document.getElementById('detail');
  if (section) {
    section.hidden = true;
    replace(section);
  }
  renderPendingList();
  if (dispatchId) {
    /** @type {HTMLElement | null} */ (
      document.querySelector(`button[data-dispatch="${CSS.escape(dispatchId)}"]`)
    )?.focus();
  }
}

/** @param {Detail} detail */
function renderDetail(detail) {
  const section = byId('detail');
  const a = detail.approval;
  /** @type {[string, import('./dom.js').Child][]} */
  const facts = [
    [
      'Dispatch',
      h('span', {}, h('code', {}, a.dispatchId), ' ', traceAnchor(a.traceId, a.dispatchId)),
    ],
    [
      'Run',
      h(
        'span',
        {},
        h('code', {}, a.runId),
        ' ',
        h('a', { href: `#/runs/${encodeURIComponent(a.runId)}` }, 'open run'),
      ),
    ],
    ['Agent', agentText(a.agent)],
    ['Submitted by', a.submittedBy ?? '—'],
    ['Risk', h('span', { class: `risk risk-${detail.risk}` }, detail.risk)],
    ['Asked by', `${a.decidedBy ?? '—'}: ${ruleSummary(a.rule, a.decidedBy)}`],
    ['Why', detail.askReason ?? '—'],
    ['Policy revision', String(a.policyRevision)],
    ['Waiting since', h('span', {}, time(a.suspendedAt), ' (', age(a.suspendedAt), ')')],
    [
      'Expires',
      h(
        'span',
        {},
        time(a.expiresAt),
        ' (',
        until(a.expiresAt),
        `, then ${a.onTimeout ?? 'deny'})`,
      ),
    ],
    ['Input digest', h('code', { class: 'digest' }, a.inputDigest)],
  ];
  const reason = h('textarea', { id: 'reason', maxlength: '2048', rows: '2' });
  const hidden = findings(a.input);
  if (detail.shell) revealed(detail.shell.command, hidden);
  const decide = state.canApprove
    ? h(
        'form',
        {
          id: 'decide',
          class: 'decide',
          'aria-label': 'Decision',
          onsubmit: (/** @type {Event} */ e) => e.preventDefault(),
        },
        h(
          'label',
          { for: 'reason' },
          'Reason ',
          h('span', { class: 'hint' }, '(journaled; on deny the model sees it)'),
        ),
        reason,
        h(
          'p',
          { id: 'offline-note', class: 'hint', hidden: state.live },
          'Not live: decisions wait until the console reconnects.',
        ),
        h(
          'div',
          { class: 'buttons' },
          h(
            'button',
            {
              type: 'button',
              class: 'allow',
              disabled: !state.live,
              onclick: () => void decideApproval(a, 'allow', reason),
            },
            'Allow',
          ),
          h(
            'button',
            {
              type: 'button',
              class: 'deny',
              disabled: !state.live,
              onclick: () => void decideApproval(a, 'deny', reason),
            },
            'Deny',
          ),
        ),
      )
    : h(
        'p',
        { class: 'readonly-note' },
        'Read-only: this token has no approve scope, so it can review but not resolve.',
      );
  replace(
    section,
    h(
      'div',
      { class: 'detail-head' },
      h('h2', { id: 'detail-title', tabindex: '-1' }, `${a.toolName} in run ${a.runId}`),
      h(
        'button',
        { type: 'button', class: 'quiet', onclick: closeDetail, 'aria-label': 'Close the review' },
        'Close',
      ),
    ),
    h('p', { id: 'detail-status', class: 'status' }),
    hiddenWarning(hidden),
    h(
      'dl',
      { class: 'facts' },
      facts.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]),
    ),
    detail.shell
      ? shellView(detail.shell)
      : detail.shellElided
        ? h(
            'p',
            { class: 'warning' },
            'This shell command is too large to show segment by segment: review the whole input above.',
          )
        : null,
    h(
      'h3',
      {},
      'Input ',
      h('span', { class: 'hint' }, '(after hooks: exactly what the tool will receive)'),
    ),
    jsonView(a.input),
    h('div', { id: 'decision-area' }, decide),
    h('p', { id: 'result', class: 'result', role: 'status', tabindex: '-1' }),
  );
  section.hidden = false;
  showDetailStatus(detail);
}

/** @param {NonNullable<Detail['shell']>} shell */
function shellView(shell) {
  const asked = shell.segments.filter((s) => s.asked).length;
  return h(
    'section',
    { class: 'shell', 'aria-labelledby': 'shell-title' },
    h('h3', { id: 'shell-title' }, 'Shell command'),
    h('pre', { class: 'command' }, ...revealed(shell.command)),
    h(
      'p',
      { class: 'hint' },
      shell.scope === 'call'
        ? 'The rule covers the whole call, not one segment.'
        : `${asked} of ${shell.segments.length} segments made the policy ask (highlighted).`,
    ),
    h(
      'ol',
      { class: 'segments' },
      shell.segments.map((s) =>
        h(
          'li',
          { class: s.asked ? 'asked' : undefined },
          s.asked ? h('strong', { class: 'badge asked-badge' }, 'asked') : null,
          h(
            'span',
            { class: 'argv' },
            s.argv.map((w) => [h('code', {}, ...revealed(w)), ' ']),
          ),
          s.why ? h('span', { class: 'why' }, s.why) : null,
          !s.asked && s.unmatchable
            ? h('span', { class: 'why' }, `cannot be checked: ${s.unmatchable}`)
            : null,
        ),
      ),
    ),
  );
}

/**
 * The detail's status line, and once resolved by someone else, who did and what.
 * @param {Detail} detail
 */
function showDetailStatus(detail) {
  const a = detail.approval;
  const status = document.getElementById('detail-status');
  if (!status) return;
  if (a.status === 'pending') {
    replace(status, 'Pending');
    return;
  }
  replace(
    status,
    `Resolved ${a.decision ?? ''} by ${a.resolvedBy ?? '?'}`,
    ' at ',
    time(a.resolvedAt),
  );
  hideDecision();
  const result = document.getElementById('result');
  if (result && !result.textContent) {
    result.className = 'result lost';
    result.textContent = `Already resolved by ${a.resolvedBy ?? '?'}: ${a.decision ?? '?'}`;
  }
}

function hideDecision() {
  const area = document.getElementById('decision-area');
  if (area) area.hidden = true;
}

/**
 * @param {Approval} a
 * @param {'allow' | 'deny'} decision
 * @param {HTMLElement} reasonField
 */
async function decideApproval(a, decision, reasonField) {
  if (!state.api) return;
  const reason = /** @type {HTMLTextAreaElement} */ (reasonField).value.trim();
  const result = byId('result');
  if (!state.live) return;
  state.resolving.add(a.dispatchId);
  syncDecisionButtons();
  try {
    const { resolved } = await state.api.post(`approvals/${a.approvalKey}/resolve`, {
      decision,
      ...(reason ? { reason } : {}),
      dispatchId: a.dispatchId,
      runId: a.runId,
      inputDigest: a.inputDigest,
    });
    result.className = `result ${resolved.decision}`;
    result.textContent = `${resolved.decision === 'allow' ? 'Allowed' : 'Denied'} by ${resolved.by}${
      resolved.reason ? `: ${resolved.reason}` : '.'
    }`;
    state.resolved.add(a.dispatchId);
    state.pending.delete(a.dispatchId);
    hideDecision();
  } catch (err) {
    if (failed(err)) return;
    if (err instanceof ApiError && err.code === 'already-resolved') {
      const d = err.details;
      result.className = 'result lost';
      result.textContent = `Already resolved by ${String(d.by ?? '?')}: ${String(d.decision ?? '?')}`;
      state.resolved.add(a.dispatchId);
      state.pending.delete(a.dispatchId);
      hideDecision();
    } else {
      result.className = 'result error';
      result.textContent = `Not resolved: ${errorText(err)}`;
    }
  } finally {
    state.resolving.delete(a.dispatchId);
    syncDecisionButtons();
  }
  renderPendingList();
  // The decision's outcome takes the focus (it can: tabindex -1), so a keyboard user hears it and
  // goes on from the review, instead of from the top of the page.
  result.focus();
}

// --- history ---------------------------------------------------------------------------------

/** The history's search fields: [query parameter, label, kind]. */
const HISTORY_FIELDS = /** @type {const} */ ([
  ['runId', 'Run', 'text'],
  ['tool', 'Tool', 'text'],
  ['resolvedBy', 'Approver', 'text'],
  ['decision', 'Decision', ['', 'allow', 'deny']],
  ['outcome', 'Outcome', ['', 'ok', 'error', 'denied']],
  ['since', 'From', 'datetime-local'],
  ['until', 'To', 'datetime-local'],
]);

function renderHistoryView() {
  const f = state.history.filters;
  replace(
    byId('view'),
    h(
      'div',
      { class: 'view-head' },
      h('h2', {}, 'Resolved approvals'),
      h('button', { type: 'button', class: 'quiet', onclick: () => void loadHistory() }, 'Refresh'),
    ),
    h(
      'form',
      {
        id: 'history-search',
        class: 'filters',
        role: 'search',
        'aria-label': 'Search the history',
        onsubmit: (/** @type {Event} */ e) => {
          e.preventDefault();
          const form = /** @type {HTMLFormElement} */ (e.target);
          /** @type {Record<string, string>} */
          const next = {};
          for (const [name] of HISTORY_FIELDS) {
            const el = /** @type {HTMLInputElement} */ (form.elements.namedItem(name));
            if (el?.value.trim()) next[name] = el.value.trim();
          }
          state.history.filters = next;
          void loadHistory();
        },
      },
      HISTORY_FIELDS.map(([name, label, kind]) => [
        h('label', { for: `h-${name}` }, label),
        Array.isArray(kind)
          ? h(
              'select',
              { id: `h-${name}`, name },
              kind.map((v) =>
                h('option', { value: v, selected: (f[name] ?? '') === v }, v || 'any'),
              ),
            )
          : h('input', {
              id: `h-${name}`,
              name,
              type: kind === 'text' ? 'search' : kind,
              value: f[name] ?? '',
              autocomplete: 'off',
            }),
      ]),
      h('button', { type: 'submit', class: 'primary' }, 'Search'),
      h(
        'span',
        { class: 'export' },
        'Export: ',
        h(
          'button',
          { type: 'button', class: 'quiet', onclick: () => void exportHistory('jsonl') },
          'JSON Lines',
        ),
        ' ',
        h(
          'button',
          { type: 'button', class: 'quiet', onclick: () => void exportHistory('csv') },
          'CSV',
        ),
      ),
    ),
    h('div', { id: 'history-list', class: 'list' }, h('p', { class: 'empty' }, 'Loading…')),
  );
  void loadHistory();
  state.poll = window.setInterval(() => void loadHistory({ quiet: true }), POLL_MS);
}

/**
 * The history's query: its search, with instants from the local-time fields as ISO instants.
 * @returns {Record<string, string>}
 */
function historyQuery() {
  /** @type {Record<string, string>} */
  const q = { status: 'resolved', order: 'newest' };
  for (const [k, v] of Object.entries(state.history.filters)) {
    if (k === 'since' || k === 'until') {
      const d = new Date(v);
      if (!Number.isNaN(d.getTime())) q[k] = d.toISOString();
    } else q[k] = v;
  }
  return q;
}

/**
 * The first page of the history (again); `more` adds the next page to what is shown. A refresh
 * while later pages are shown keeps them (it reads as many as are shown).
 * @param {{ more?: boolean, quiet?: boolean }} [options]
 */
async function loadHistory({ more = false, quiet = false } = {}) {
  if (!state.api) return;
  const shown = state.history.rows.length;
  /** @type {ListedApproval[]} */
  let rows = more ? [...state.history.rows] : [];
  /** @type {string | null} */
  let next = more ? state.history.next : null;
  try {
    do {
      const page = await state.api.get('approvals', {
        ...historyQuery(),
        limit: 100,
        ...(next ? { cursor: next } : {}),
      });
      rows.push(...page.approvals);
      next = page.nextCursor ?? null;
    } while (!more && quiet && next && rows.length < shown);
  } catch (err) {
    if (failed(err)) return;
    const list = document.getElementById('history-list');
    if (list)
      replace(
        list,
        h('p', { class: 'error', role: 'alert' }, `Cannot load the history: ${errorText(err)}`),
      );
    return;
  }
  state.history.rows = rows;
  state.history.next = next;
  renderHistory();
}

function renderHistory() {
  const list = document.getElementById('history-list');
  if (!list) return;
  const { rows, next } = state.history;
  if (rows.length === 0)
    return replace(list, h('p', { class: 'empty' }, 'Nothing resolved matches.'));
  replace(
    list,
    h(
      'table',
      { class: 'history' },
      h('caption', {}, `${rows.length} resolutions${next ? ' (more below)' : ''}, newest first`),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['Resolved', 'Tool', 'Run', 'Decision', 'By', 'Reason', 'Outcome'].map((c) =>
            h('th', { scope: 'col' }, c),
          ),
        ),
      ),
      h(
        'tbody',
        {},
        rows.map((a) =>
          h(
            'tr',
            { 'data-dispatch': a.dispatchId },
            h('td', {}, time(a.resolvedAt)),
            h('td', {}, a.toolName ?? '?'),
            h(
              'td',
              {},
              h('a', { href: `#/runs/${encodeURIComponent(a.runId)}` }, a.runId),
              traceAnchor(a.traceId, a.dispatchId),
            ),
            h('td', {}, h('span', { class: `decision ${a.decision}` }, a.decision ?? '?')),
            h(
              'td',
              {},
              a.resolvedBy ?? '?',
              a.source && a.source !== 'human' ? ` (${a.source})` : '',
            ),
            h('td', { class: 'reason' }, ...revealed(a.reason ?? '')),
            h(
              'td',
              {},
              h(
                'span',
                { class: `outcome ${a.settled?.outcome ?? 'open'}` },
                outcomeText(a.settled),
              ),
            ),
          ),
        ),
      ),
    ),
    next
      ? h(
          'button',
          {
            type: 'button',
            id: 'history-more',
            class: 'quiet',
            onclick: () => void loadHistory({ more: true }),
          },
          'Show more',
        )
      : null,
  );
}

/** The columns of an export: who approved what input, when, under which policy revision. */
const EXPORT_COLUMNS = [
  'resolvedAt',
  'decision',
  'resolvedBy',
  'source',
  'reason',
  'toolName',
  'runId',
  'dispatchId',
  'approvalKey',
  'inputDigest',
  'policyRevision',
  'suspendedAt',
  'outcome',
  'errorCode',
];

/**
 * Downloads every resolution the search matches (all pages) as JSON Lines or CSV.
 * @param {'jsonl' | 'csv'} format
 */
async function exportHistory(format) {
  if (!state.api) return;
  /** @type {Record<string, unknown>[]} */
  const records = [];
  try {
    /** @type {string | undefined} */
    let cursor;
    do {
      const page = await state.api.get('approvals', { ...historyQuery(), limit: 1000, cursor });
      for (const a of /** @type {ListedApproval[]} */ (page.approvals)) {
        records.push({
          resolvedAt: a.resolvedAt,
          decision: a.decision,
          resolvedBy: a.resolvedBy,
          source: a.source,
          reason: a.reason,
          toolName: a.toolName,
          runId: a.runId,
          dispatchId: a.dispatchId,
          approvalKey: a.approvalKey,
          inputDigest: a.inputDigest,
          policyRevision: a.policyRevision,
          suspendedAt: a.suspendedAt,
          outcome: a.settled?.outcome ?? null,
          errorCode: a.settled?.errorCode ?? null,
        });
      }
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
  } catch (err) {
    if (!failed(err)) announce(`Cannot export the history: ${errorText(err)}`);
    return;
  }
  const text =
    format === 'jsonl'
      ? records.map((r) => JSON.stringify(r)).join('\n') + (records.length ? '\n' : '')
      : [EXPORT_COLUMNS, ...records.map((r) => EXPORT_COLUMNS.map((c) => r[c]))]
          .map((row) => row.map(csvCell).join(','))
          .join('\r\n') + '\r\n';
  const blob = new Blob([text], {
    type: format === 'jsonl' ? 'application/x-ndjson' : 'text/csv;charset=utf-8',
  });
  const link = h('a', {
    href: URL.createObjectURL(blob),
    download: `approvals-${new Date().toISOString().slice(0, 19).replace(/:/g, '')}.${format}`,
    hidden: true,
  });
  document.body.append(link);
  /** @type {HTMLAnchorElement} */ (link).click();
  link.remove();
  announce(
    `Exported ${records.length} resolutions as ${format === 'jsonl' ? 'JSON Lines' : 'CSV'}.`,
  );
}

/**
 * One CSV cell (RFC 4180), with a cell a spreadsheet would run as a formula (`=`, `+`, `-`, `@`)
 * prefixed by a quote.
 * @param {unknown} value
 */
function csvCell(value) {
  if (value === null || value === undefined) return '';
  let text = String(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

// --- runs ------------------------------------------------------------------------------------

/** @param {string} runId */
function renderRunsView(runId) {
  const input = h('input', { id: 'run-id', type: 'text', value: runId, autocomplete: 'off' });
  replace(
    byId('view'),
    h('h2', {}, 'Run'),
    h(
      'form',
      {
        class: 'filters',
        onsubmit: (/** @type {Event} */ e) => {
          e.preventDefault();
          const id = /** @type {HTMLInputElement} */ (input).value.trim();
          if (id) location.hash = `#/runs/${encodeURIComponent(id)}`;
        },
      },
      h('label', { for: 'run-id' }, 'Run id'),
      input,
      h('button', { type: 'submit', class: 'primary' }, 'Open'),
    ),
    h('div', { id: 'run-view', class: 'list' }),
  );
  if (!runId) return;
  void loadRun(runId);
  state.poll = window.setInterval(() => void loadRun(runId), POLL_MS);
}

/** @param {string} runId */
async function loadRun(runId) {
  if (!state.api) return;
  const out = document.getElementById('run-view');
  if (!out) return;
  if (!TOKEN_PATTERN.test(runId)) return replace(out, h('p', { class: 'error' }, 'Not a run id.'));
  /** @type {any} */
  let run;
  try {
    // Its dispatches come a page at a time (a page is bounded): the first pages, up to RUN_ROWS.
    run = await state.api.get(`runs/${encodeURIComponent(runId)}`);
    while (run.nextCursor && run.dispatches.length < RUN_ROWS) {
      const page = await state.api.get(`runs/${encodeURIComponent(runId)}`, {
        cursor: run.nextCursor,
      });
      run = { ...page, dispatches: [...run.dispatches, ...page.dispatches] };
    }
  } catch (err) {
    if (failed(err)) return;
    return replace(
      out,
      h(
        'p',
        { class: 'error' },
        err instanceof ApiError && err.code === 'not-found' ? `No run ${runId}.` : errorText(err),
      ),
    );
  }
  replace(
    out,
    h(
      'h3',
      { id: 'run-title' },
      `Run ${run.runId}: `,
      h('span', { class: `run-status ${run.status}` }, run.status),
    ),
    h(
      'table',
      { class: 'dispatches' },
      h(
        'caption',
        {},
        run.dispatches.length < run.dispatchCount
          ? `The first ${run.dispatches.length} of ${run.dispatchCount} dispatches, in the order they were requested`
          : `${run.dispatches.length} dispatches in the order they were requested`,
      ),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['#', 'Requested', 'Call', 'Tool', 'Verdict', 'Decided by', 'Approval', 'Outcome'].map(
            (c) => h('th', { scope: 'col' }, c),
          ),
        ),
      ),
      h(
        'tbody',
        {},
        run.dispatches.map((/** @type {any} */ d, /** @type {number} */ i) =>
          h(
            'tr',
            { 'data-dispatch': d.dispatchId },
            h('td', { class: 'num' }, String(i + 1)),
            h('td', {}, time(d.requestedAt)),
            h('td', { class: 'mono' }, d.callId ?? '—', traceAnchor(d.traceId, d.dispatchId)),
            h('td', {}, d.toolName ?? '?'),
            h('td', {}, h('span', { class: `verdict ${d.verdict ?? 'none'}` }, d.verdict ?? '—')),
            h('td', {}, d.decidedBy ?? '—'),
            h(
              'td',
              {},
              d.verdict !== 'ask'
                ? '—'
                : d.decision
                  ? `${d.decision} by ${d.resolvedBy ?? '?'}`
                  : 'pending',
            ),
            h(
              'td',
              {},
              h(
                'span',
                { class: `outcome ${d.outcome ?? 'open'}` },
                d.outcome ? outcomeText(d) : d.status,
              ),
            ),
          ),
        ),
      ),
    ),
  );
}

void start();
