import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import {
  chromium,
  type Browser,
  type BrowserContext,
  type Locator,
  type Page,
  type Route,
} from 'playwright-core';
import type { ApprovalView } from '@toolgate/contracts';
import { runCli } from '@toolgate/cli';
import { LIST_REPLY_BUDGET_BYTES } from '@toolgate/contracts';
import { createClient } from '@toolgate/sdk';
import { eventually, NATS_URL } from '@toolgate/testing';
import {
  countingTool,
  journalOf,
  park,
  unique,
  type CountingTool,
} from '../approvals/approval-helpers';
import { settled } from '../support/dispatch-probes';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

// Page-side code is passed as strings (`page.evaluate('document.title')`): this project compiles
// without the DOM's types.

/**
 * The approvals console in a real browser: Debian's Chromium (no browser is downloaded), driven by
 * playwright-core, against the whole stack. Every wait is on a condition the page shows.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** Set to a path (docs/console.png) to write the README's screenshot from this run. */
const SCREENSHOT = process.env.TOOLGATE_CONSOLE_SCREENSHOT;
/** The trace UI this stack links dispatches to (GATEWAY_TRACE_UI_URL). */
const TRACE_UI = 'https://traces.example/explore?left={"query":"{traceId}"}&from=now-1h';

describe('the approvals console in Chromium', () => {
  let stack: TestStack;
  let gated: CountingTool;
  let browser: Browser;
  /**
   * The browser profile every tab opens in. A tab is a page of its own — its own session storage,
   * which is all the console keeps (no cookie, no local storage) — so tabs need no profile each: a
   * BrowserContext per tab cost Chromium about 1.5 CPU-seconds more per tab than a page.
   */
  let tabs: BrowserContext;
  /** The open tabs of the test running. */
  const pages: Page[] = [];
  /** Every console error a page logged (a CSP or Trusted Types violation would land here). */
  const pageErrors: string[] = [];
  /** Every URL any page requested, to show the token is never in one. */
  const requested: string[] = [];

  beforeAll(async () => {
    stack = await startTestStack('console', {
      JOURNAL_SWEEP_INTERVAL_MS: '3600000',
      GATEWAY_TRACE_UI_URL: TRACE_UI,
    });
    gated = await countingTool(stack, 'gated');
    const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: {
        engine: {
          ask: [
            { id: 'gate-it', tool: 'gated', reason: 'gated calls need a person' },
            { id: 'no-rm', tool: 'shell', argv: 'rm **' },
            { id: 'echo', tool: 'shell', argv: 'echo **' },
          ],
        },
      },
    });
    expect(put.status).toBe(200);
    if (!existsSync(CHROMIUM)) {
      throw new Error(
        `no Chromium at ${CHROMIUM}: install Debian's (apt-get install chromium) or set CHROMIUM_PATH`,
      );
    }
    // launch() starts Chromium on a fresh temporary profile of its own and removes it on close.
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--headless',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    tabs = await browser.newContext();
  });

  afterAll(async () => {
    await tabs?.close().catch(() => undefined);
    await browser?.close();
    gated?.stop();
    await stack?.stop();
  });

  afterEach(async () => {
    // A test's tabs close with it: an open tab keeps its event stream and its refreshes going,
    // work for Chromium and the gateway through every later test.
    for (const page of pages.splice(0)) await page.close();
    expect(pageErrors).toEqual([]);
  });

  /** A new tab (its own session storage) of `viewport`'s size. */
  async function newTab(viewport: { width: number; height: number }): Promise<Page> {
    const page = await tabs.newPage();
    pages.push(page);
    await page.setViewportSize(viewport);
    return page;
  }

  /**
   * A tab of its own (its own session storage), signed in with `token`; `prepare` runs on the page
   * before it loads (to route its requests).
   */
  async function signedIn(
    token: string,
    viewport = { width: 1440, height: 900 },
    prepare?: (page: Page) => Promise<void>,
  ): Promise<Page> {
    const page = await newTab(viewport);
    await prepare?.(page);
    page.setDefaultTimeout(15_000);
    page.on('console', (msg) => {
      // A refused API call (the lost race's 409) is logged as a failed resource: expected. Every
      // other error is not, a CSP or Trusted Types violation above all.
      if (msg.type() === 'error' && !msg.text().startsWith('Failed to load resource'))
        pageErrors.push(msg.text());
    });
    page.on('response', (res) => {
      if (!new URL(res.url()).pathname.startsWith('/v1/') && res.status() >= 400)
        pageErrors.push(`${res.status()} ${res.url()}`);
    });
    page.on('pageerror', (err) => pageErrors.push(String(err)));
    page.on('request', (req) => requested.push(req.url()));
    await page.goto(`${stack.all.gateway.url}/console/`);
    await page.getByLabel('Bearer token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#identity').waitFor();
    return page;
  }

  /** The pending row of a dispatch. */
  const row = (page: Page, dispatchId: string) => page.locator(`tr[data-row="${dispatchId}"]`);

  /**
   * Waits until `locator` shows `text` (a substring, or a pattern over its whole text). Playwright
   * waits in the page; playwright-core has no test runner's assertions, so these helpers wait on
   * conditions and jest asserts what they found.
   */
  async function shows(locator: Locator, text: string | RegExp): Promise<void> {
    await locator.filter({ hasText: text }).first().waitFor();
  }

  /** Waits until `locator` matches exactly `n` elements. */
  async function counted(locator: Locator, n: number): Promise<void> {
    await eventually(async () => ((await locator.count()) === n ? true : undefined), {
      what: `${n} of ${String(locator)}`,
    });
  }

  /** The exact text pattern of `text`. */
  const exactly = (text: string) => new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);

  /** Opens the review of a pending approval from its row. */
  async function review(page: Page, dispatchId: string): Promise<void> {
    await row(page, dispatchId).getByRole('button').click();
    await page.locator('#detail-title').waitFor();
  }

  /** Parks a shell call the policy asks about, without waiting for anything else. */
  async function parkShell(command: string, runId = unique('run-shell')) {
    const res = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
      runId,
      callId: unique('call'),
      agent: { agentType: 'coder', label: 'refactor-bot' },
      tool: 'shell',
      input: { command },
      wait: 10_000,
    });
    expect(res.body.state).toBe('suspended');
    return { dispatchId: res.body.dispatchId as string, runId };
  }

  it('serves the page from the gateway under a strict Content-Security-Policy, nothing else', async () => {
    const res = await fetch(`${stack.all.gateway.url}/console/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const csp = res.headers.get('content-security-policy') ?? '';
    for (const directive of [
      "default-src 'none'",
      "script-src 'self'",
      "connect-src 'self'",
      "require-trusted-types-for 'script'",
      "trusted-types 'none'",
      "frame-ancestors 'none'",
    ])
      expect(csp).toContain(directive);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const redirect = await fetch(`${stack.all.gateway.url}/console`, { redirect: 'manual' });
    expect(redirect.status).toBe(301);
    expect(redirect.headers.get('location')).toBe('console/');
    for (const probe of ['/console/..%2Fpackage.json', '/console/nope.js', '/console/%2e%2e']) {
      const miss = await fetch(`${stack.all.gateway.url}${probe}`);
      expect(miss.status).toBe(404);
    }
  });

  it('signs in with a token kept in session storage, never in a URL, and shows pending approvals live with a count in the title', async () => {
    const first = await park(stack, 'gated', { runId: unique('run-a') });
    const page = await signedIn(TOKENS.acmeApprover);
    await shows(page.locator('#who-text'), 'tenant acme · acme-approver · approve');
    await row(page, first.dispatchId).waitFor();
    await page.waitForFunction(`document.title === '(1) Toolgate approvals'`);
    const firstRow = await row(page, first.dispatchId).innerText();
    expect(firstRow).toContain('gated');
    expect(firstRow).toContain(first.runId);
    expect(firstRow).toContain('coder (approvals)');
    expect(firstRow).toContain('"gate-it"');
    expect(firstRow).toContain(`rev ${first.approval.policyRevision}`);
    expect(firstRow).toMatch(/in 23h/);

    // A call parked while the page is open (and live) appears without a reload.
    await shows(page.locator('#live'), exactly('Live'));
    await page.evaluate('window.marker = 42');
    const second = await park(stack, 'gated', { runId: unique('run-b') });
    await row(page, second.dispatchId).waitFor();
    await page.waitForFunction(`document.title === '(2) Toolgate approvals'`);
    expect(await page.evaluate('window.marker')).toBe(42);

    // Filters: by run, by tool, by age.
    await page.getByLabel('Run', { exact: true }).fill(second.runId);
    await counted(page.locator('tbody tr'), 1);
    await page.getByLabel('Run', { exact: true }).fill('');
    await counted(page.locator('tbody tr'), 2);
    await page.getByLabel('Waiting at least').selectOption({ label: '1 hour' });
    await page.getByText('No pending approval matches the filters.').waitFor();
    await page.getByLabel('Waiting at least').selectOption({ label: 'any time' });
    await page.getByLabel('Tool').selectOption('gated');
    await counted(page.locator('tbody tr'), 2);

    expect(await page.evaluate(`sessionStorage.getItem('toolgate.console.token')`)).toBe(
      TOKENS.acmeApprover,
    );
    expect(page.url()).not.toContain(TOKENS.acmeApprover);
    // Signing out forgets the token.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Bearer token').waitFor();
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
    expect(await page.title()).toBe('Toolgate approvals');
  });

  it('reviews a shell call (exact input, digest, the segment that asked), denies it with a reason, and shows the history and the run', async () => {
    const page = await signedIn(TOKENS.acmeApprover);
    await shows(page.locator('#live'), exactly('Live'));
    const shell = await parkShell('git status && rm -rf build | tee removed.txt');
    await row(page, shell.dispatchId).waitFor();
    await review(page, shell.dispatchId);
    // The page read it from the journal; the listing (the projection) may lag it a moment.
    const listed = await eventually(
      async () =>
        (await stack.http('GET', `/v1/approvals?runId=${shell.runId}`, TOKENS.acmeApprover)).body
          .approvals[0] as ApprovalView | undefined,
      { what: 'the shell call listed' },
    );

    const detail = page.locator('#detail');
    await shows(detail.locator('#detail-title'), exactly(`shell in run ${shell.runId}`));
    expect(await detail.locator('.digest').innerText()).toBe(listed.inputDigest);
    expect(await detail.locator('pre.json').textContent()).toBe(
      JSON.stringify({ command: 'git status && rm -rf build | tee removed.txt' }, null, 2),
    );
    expect(await detail.locator('.segments li').count()).toBe(3);
    expect(await detail.locator('.segments li.asked').count()).toBe(1);
    expect(await detail.locator('.segments li.asked .argv').innerText()).toBe('rm -rf build');
    expect(await detail.locator('.segments li.asked .why').innerText()).toBe('matches rm **');
    const facts = await detail.locator('dl.facts').innerText();
    expect(facts).toContain('"no-rm"');
    expect(facts).toMatch(new RegExp(`Policy revision\\s+${listed.policyRevision}\\n`));
    expect(facts).toMatch(/Risk\s+execute\n/);
    expect(facts).toContain('coder (refactor-bot)');
    expect(await page.evaluate('document.activeElement.id')).toBe('detail-title');

    if (SCREENSHOT) await page.screenshot({ path: SCREENSHOT, fullPage: true });

    await page.getByLabel(/^Reason/).fill('not on my watch');
    await page.getByRole('button', { name: 'Deny' }).click();
    await shows(page.locator('#result'), exactly('Denied by acme-approver: not on my watch'));
    await counted(row(page, shell.dispatchId), 0);
    expect((await settled(stack, shell.dispatchId)).dispatch).toMatchObject({
      outcome: 'denied',
      resolvedBy: 'acme-approver',
    });

    await page.getByRole('link', { name: 'History' }).click();
    const history = page.locator(`table.history tr[data-dispatch="${shell.dispatchId}"]`);
    // The outcome arrives with the projection; the view looks again until it has it.
    await shows(history, /denied$/).catch(async (err: Error) => {
      throw new Error(
        `${err.message}\nhistory: ${await page.locator('#history-list').innerText()}`,
      );
    });
    const cells = await history.locator('td').allInnerTexts();
    expect(cells.slice(1)).toEqual([
      'shell',
      shell.runId,
      'deny',
      'acme-approver',
      'not on my watch',
      'denied',
    ]);
    expect(cells[0]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);

    await history.getByRole('link', { name: shell.runId }).click();
    const dispatch = page.locator(`table.dispatches tr[data-dispatch="${shell.dispatchId}"]`);
    await shows(dispatch, 'deny by acme-approver');
    expect((await dispatch.locator('td').allInnerTexts()).slice(3)).toEqual([
      'shell',
      'ask',
      'ask-rule',
      'deny by acme-approver',
      'denied',
    ]);
    await shows(page.locator('#run-title'), exactly(`Run ${shell.runId}: settled`));
  });

  it('lets two tabs race to resolve one approval: one wins, the other says who already resolved it', async () => {
    const raced = await park(stack, 'gated', { runId: unique('run-race') });
    const approver = await signedIn(TOKENS.acmeApprover);
    const admin = await signedIn(TOKENS.acmeAdmin);
    await review(approver, raced.dispatchId);
    await review(admin, raced.dispatchId);

    // The approver's allow leaves its tab first and is held on the way; the admin's deny reaches
    // the gateway while it is in flight. Both were clicked on a pending approval.
    let held: Route | undefined;
    await approver.route('**/resolve', (route) => {
      held = route;
    });
    await approver.getByRole('button', { name: 'Allow' }).click();
    await eventually(() => held, { what: "the approver's resolve request in flight" });
    await admin.getByRole('button', { name: 'Deny' }).click();
    await shows(admin.locator('#result'), exactly('Denied by acme-admin.'));
    await held!.continue();
    await shows(approver.locator('#result'), exactly('Already resolved by acme-admin: deny'));
    await approver.getByRole('button', { name: 'Allow' }).waitFor({ state: 'hidden' });

    expect((await settled(stack, raced.dispatchId)).dispatch.outcome).toBe('denied');
    expect((await journalOf(stack, raced)).resolved).toBe(1);
    expect(gated.runsOf(raced.input.n)).toBe(0);
  });

  it('shows a token without the approve scope a read-only view', async () => {
    const parked = await park(stack, 'gated', { runId: unique('run-ro') });
    const agent = await signedIn(TOKENS.acmeAgent);
    await shows(agent.locator('#who-text'), 'read-only');
    await review(agent, parked.dispatchId);
    await agent.locator('.readonly-note').waitFor();
    expect(await agent.getByRole('button', { name: 'Allow' }).count()).toBe(0);
    expect(await agent.getByRole('button', { name: 'Deny' }).count()).toBe(0);
    expect(await agent.locator('#detail').innerText()).toContain('gated calls need a person');
    // Escape closes the review and gives focus back to the row it came from.
    await agent.keyboard.press('Escape');
    await agent.waitForFunction(
      `document.activeElement?.getAttribute('data-dispatch') === ${JSON.stringify(parked.dispatchId)}`,
    );
    expect((await journalOf(stack, parked)).resolved).toBeUndefined();
  });

  it('shows attacker-controlled input as text: no script runs, no element is made from it', async () => {
    const payload = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">';
    const long = `${'A'.repeat(300)}<img src=y onerror="window.pwned=3">`;
    const runId = unique('run-xss');
    const res = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
      runId,
      callId: unique('call'),
      agent: { agentType: 'coder', label: payload },
      tool: 'gated',
      input: { n: payload, [payload]: long },
      wait: 10_000,
    });
    expect(res.body.state).toBe('suspended');
    const dispatchId = res.body.dispatchId as string;
    await eventually(
      async () =>
        (await stack.http('GET', `/v1/approvals?runId=${runId}`, TOKENS.acmeApprover)).body
          .approvals[0],
      { what: 'the call listed' },
    );
    const page = await signedIn(TOKENS.acmeApprover);
    await row(page, dispatchId).waitFor();
    expect(await row(page, dispatchId).innerText()).toContain(`coder (${payload})`);
    await review(page, dispatchId);
    const json = page.locator('pre.json');
    expect(await json.textContent()).toContain(JSON.stringify(payload));
    // The long string is folded; one press shows all of it.
    expect(await json.textContent()).not.toContain('window.pwned=3');
    await json.getByRole('button', { name: /show \d+ more characters/ }).click();
    await shows(json, JSON.stringify(long));
    expect(await page.locator('img, script:not([src])').count()).toBe(0);
    expect(await page.evaluate('typeof window.pwned')).toBe('undefined');
    await page.getByRole('button', { name: 'Deny' }).click();
    await shows(page.locator('#result'), exactly('Denied by acme-approver.'));
  });

  /**
   * Where each of `chars` (in order, the first occurrence of each after the previous) is drawn on
   * screen inside `selector`: the left edge of its glyph, measured with a DOM Range.
   */
  async function drawnAt(page: Page, selector: string, text: string, chars: string[]) {
    return (await page.evaluate(`(() => {
      const root = document.querySelector(${JSON.stringify(selector)});
      const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
      let all = '';
      const nodes = [];
      for (let n = walker.nextNode(); n; n = walker.nextNode()) { nodes.push([n, all.length]); all += n.data; }
      const start = all.indexOf(${JSON.stringify(text)});
      if (start < 0) return null;
      let from = start;
      return ${JSON.stringify(chars)}.map((c) => {
        const at = all.indexOf(c, from);
        from = at + 1;
        const [node, offset] = nodes.filter(([, o]) => o <= at).pop();
        const range = document.createRange();
        range.setStart(node, at - offset);
        range.setEnd(node, at - offset + 1);
        return range.getBoundingClientRect().left;
      });
    })()`)) as number[] | null;
  }

  it('shows a right-to-left override escaped and marked, in the order the text runs, with a warning, in the list and the review', async () => {
    const shell = await parkShell('echo ok # \u202E; rm -rf ~');
    const invoice = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
      runId: unique('run-rlo'),
      callId: unique('call'),
      agent: { agentType: 'coder' },
      tool: 'gated',
      input: { n: unique('n'), path: 'invoice\u202Egpj.exe' },
      wait: 10_000,
    });
    expect(invoice.body.state).toBe('suspended');
    const page = await signedIn(TOKENS.acmeApprover);
    await row(page, shell.dispatchId).waitFor();
    await row(page, invoice.body.dispatchId).waitFor();

    // The list's command/path column: escaped, marked, flagged.
    const shellCell = row(page, shell.dispatchId).locator('td.input');
    expect(await shellCell.innerText()).toBe('⚠ echo ok # \\u202E; rm -rf ~');
    expect(await shellCell.locator('mark.hidden-char').getAttribute('title')).toBe(
      'U+202E right-to-left override',
    );
    const invoiceCell = row(page, invoice.body.dispatchId).locator('td.input');
    expect(await invoiceCell.innerText()).toBe('⚠ invoice\\u202Egpj.exe');
    // What a person sees, glyph by glyph: `gpj` drawn before `.exe`, left to right (an override
    // would have drawn `exe.jpg`).
    const [g, x] = (await drawnAt(
      page,
      `tr[data-row="${invoice.body.dispatchId}"] td.input`,
      'gpj.exe',
      ['g', 'x'],
    ))!;
    expect(g).toBeLessThan(x!);

    // The review: a warning first, the command and its JSON escaped, nothing reordered.
    await review(page, shell.dispatchId);
    const detail = page.locator('#detail');
    await shows(detail.locator('#hidden-warning'), 'U+202E right-to-left override');
    expect(await detail.locator('pre.command').innerText()).toBe('echo ok # \\u202E; rm -rf ~');
    expect(await detail.locator('pre.json').innerText()).toContain(
      '"command": "echo ok # \\u202E; rm -rf ~"',
    );
    expect(await detail.innerText()).not.toMatch(/[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]/);
    const [r, m, tilde] = (await drawnAt(page, '#detail pre.command', 'rm -rf ~', [
      'r',
      'm',
      '~',
    ]))!;
    expect(r).toBeLessThan(m!);
    expect(m).toBeLessThan(tilde!);
  }, 180_000);

  it('lists every pending call however large the inputs (fifty of 95 KB over HTTP, one of 1 MB over the bus): HTTP pages, the CLI and the console show them all', async () => {
    const runId = unique('run-big');
    const dispatchIds: string[] = [];
    for (let batch = 0; batch < 10; batch++) {
      const parked = await Promise.all(
        Array.from({ length: 5 }, async (_, i) => {
          const res = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
            runId,
            callId: `big-${batch}-${i}`,
            agent: { agentType: 'coder' },
            tool: 'gated',
            input: { n: `${unique('n')}-${'x'.repeat(95_000)}` },
          });
          // Parked once the evaluator has decided it (listed below): under load that may take a
          // while after this answer.
          expect(res.status).toBe(202);
          return res.body.dispatchId as string;
        }),
      );
      dispatchIds.push(...parked);
    }
    const client = await createClient({
      servers: NATS_URL,
      prefix: stack.nats.prefix,
      token: TOKENS.acmeAgent,
      tenant: 'acme',
    });
    const hugeInput = { n: `${unique('n')}-${'y'.repeat(1_000_000)}` };
    let hugeId = '';
    try {
      const huge = await client.dispatch({
        runId,
        callId: 'huge',
        agent: { agentType: 'coder' },
        tool: 'gated',
        input: hugeInput,
      });
      hugeId = huge.dispatchId;
      dispatchIds.push(huge.dispatchId);
    } finally {
      await client.close();
    }

    // HTTP, twenty at a time: every page answers, within the budget, and together they hold all.
    const listed = await eventually(
      async () => {
        const seen: string[] = [];
        let cursor: string | undefined;
        do {
          const res = await fetch(
            `${stack.all.gateway.url}/v1/approvals?runId=${runId}&limit=20${cursor ? `&cursor=${cursor}` : ''}`,
            { headers: { authorization: `Bearer ${TOKENS.acmeApprover}` } },
          );
          const text = await res.text();
          expect(res.status).toBe(200);
          expect(Buffer.byteLength(text)).toBeLessThan(LIST_REPLY_BUDGET_BYTES + 4096);
          const page = JSON.parse(text) as {
            approvals: {
              dispatchId: string;
              inputPreview: { truncated: boolean; bytes: number };
            }[];
            nextCursor: string | null;
          };
          expect(page.approvals.length).toBeLessThanOrEqual(20);
          for (const a of page.approvals) expect(a.inputPreview.truncated).toBe(true);
          seen.push(...page.approvals.map((a) => a.dispatchId));
          cursor = page.nextCursor ?? undefined;
        } while (cursor);
        return seen.length === dispatchIds.length ? seen : undefined;
      },
      { timeoutMs: 120_000, what: 'all 51 big calls listed' },
    );
    expect([...listed].sort()).toEqual([...dispatchIds].sort());
    // The run view too: its pending approvals as previews, all of them counted.
    const run = await stack.http('GET', `/v1/runs/${runId}`, TOKENS.acmeApprover);
    expect(run.status).toBe(200);
    expect(run.body.pendingCount).toBe(51);
    // The whole input is one read away.
    const one = await stack.http(
      'GET',
      `/v1/approvals/${(await stack.http('GET', `/v1/approvals?runId=${runId}&limit=1`, TOKENS.acmeApprover)).body.approvals[0].approvalKey}?dispatchId=${listed[0]}&runId=${runId}`,
      TOKENS.acmeApprover,
    );
    expect(one.status).toBe(200);
    expect(JSON.stringify(one.body.approval.input).length).toBeGreaterThan(95_000);

    // The CLI.
    let out = '';
    const code = await runCli(['approvals', 'list', '--run', runId, '--all', '--json'], {
      env: { TOOLGATE_URL: stack.all.gateway.url, TOOLGATE_TOKEN: TOKENS.acmeApprover },
      stdout: { write: (t: string) => (out += t) },
      stderr: { write: () => undefined },
    });
    expect(code).toBe(0);
    expect((JSON.parse(out) as { dispatchId: string }[]).map((a) => a.dispatchId).sort()).toEqual(
      [...dispatchIds].sort(),
    );

    // The console.
    const page = await signedIn(TOKENS.acmeApprover);
    await page.getByLabel('Run', { exact: true }).fill(runId);
    await counted(page.locator('tbody tr'), 51);
    for (const id of dispatchIds) expect(await row(page, id).count()).toBe(1);
    expect(Number(await page.locator('#pending-count').innerText())).toBeGreaterThanOrEqual(51);
    // Its review holds the whole 1 MB input (the approval's reply carries a preview; the console
    // reads the rest in chunks): the folded string has every character behind its button.
    await review(page, hugeId);
    const json = page.locator('pre.json');
    await json
      .getByRole('button', { name: `show ${hugeInput.n.length - 120} more characters` })
      .waitFor();
  }, 240_000);

  it('says so when the pending list cannot be read, never that nothing is waiting', async () => {
    const page = await signedIn(TOKENS.acmeApprover);
    await shows(page.locator('#live'), exactly('Live'));
    await page.route('**/v1/approvals?*', (route) =>
      route.fulfill({
        status: 503,
        contentType: 'application/json',
        body: JSON.stringify({
          error: { code: 'unavailable', message: 'the journal does not answer' },
        }),
      }),
    );
    // The console reads the list when its stream opens (a reload), on reconnect and every 30 s.
    await page.reload();
    await shows(page.locator('.list-error'), 'The pending approvals cannot be read.');
    expect(await page.locator('.list-error').innerText()).toContain('the journal does not answer');
    expect(await page.locator('#pending-count').innerText()).toBe('?');
    expect(await page.getByText('Nothing is waiting for approval.').count()).toBe(0);
  }, 180_000);

  it('says the server is restarting and keeps Allow/Deny disabled until live again; a keyboard decision keeps the focus', async () => {
    const parked = await park(stack, 'gated', { runId: unique('run-restart') });
    const page = await newTab({ width: 1280, height: 900 });
    page.setDefaultTimeout(15_000);
    page.on('pageerror', (err) => pageErrors.push(String(err)));
    // The first stream is the gateway saying it restarts; the reconnect is held until released.
    let streams = 0;
    let held: Route | undefined;
    await page.route('**/v1/approvals/events', async (route) => {
      streams++;
      if (streams === 1)
        return route.fulfill({
          status: 200,
          contentType: 'text/event-stream',
          body: ': connected\n\nevent: server:restarting\ndata: {"message":"server restarting — reconnecting"}\n\n',
        });
      if (streams === 2) {
        held = route;
        return;
      }
      return route.continue();
    });
    await page.goto(`${stack.all.gateway.url}/console/`);
    await page.getByLabel('Bearer token').fill(TOKENS.acmeApprover);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await shows(page.locator('#live'), exactly('Server restarting — reconnecting…'));
    await eventually(() => held, { what: 'the reconnect in flight' });
    await review(page, parked.dispatchId);
    const allow = page.getByRole('button', { name: 'Allow' });
    const deny = page.getByRole('button', { name: 'Deny' });
    expect(await allow.isDisabled()).toBe(true);
    expect(await deny.isDisabled()).toBe(true);
    expect(await page.locator('#offline-note').isVisible()).toBe(true);

    await held!.continue();
    await shows(page.locator('#live'), exactly('Live'));
    await page.waitForFunction(`!document.querySelector('#decide button.deny').disabled`);
    expect(await page.locator('#offline-note').isVisible()).toBe(false);

    // A decision by keyboard: the result takes the focus, not the page.
    await deny.focus();
    await page.keyboard.press('Enter');
    await shows(page.locator('#result'), exactly('Denied by acme-approver.'));
    await page.waitForFunction(`document.activeElement?.id === 'result'`);
  }, 180_000);

  it('shows every column at 1280 px and the review on screen at 390 px', async () => {
    const parked = await parkShell('echo layout check');
    const wide = await signedIn(TOKENS.acmeApprover, { width: 1280, height: 800 });
    await row(wide, parked.dispatchId).waitFor();
    const clipped = (await wide.evaluate(`(() => {
      const list = document.getElementById('pending-list');
      return list.scrollWidth - list.clientWidth;
    })()`)) as number;
    expect(clipped).toBeLessThanOrEqual(0);
    expect(await row(wide, parked.dispatchId).locator('td.input').innerText()).toBe(
      'echo layout check',
    );

    const phone = await signedIn(TOKENS.acmeApprover, { width: 390, height: 844 });
    await row(phone, parked.dispatchId).waitFor();
    await review(phone, parked.dispatchId);
    const box = (await phone.locator('#detail').boundingBox())!;
    expect(box.x).toBeGreaterThanOrEqual(0);
    expect(box.x + box.width).toBeLessThanOrEqual(390);
    expect(box.y).toBeLessThan(844);
    expect(await phone.evaluate('document.scrollingElement.scrollWidth <= window.innerWidth')).toBe(
      true,
    );
    await phone.getByRole('button', { name: 'Deny' }).click();
    await shows(phone.locator('#result'), exactly('Denied by acme-approver.'));
  }, 180_000);

  it('searches the history by approver and decision, and exports it as JSON Lines and CSV with the digest and policy revision', async () => {
    const parked = await park(stack, 'gated', { runId: unique('run-export') });
    const denied = await stack.http(
      'POST',
      `/v1/approvals/${parked.approval.approvalKey}/resolve`,
      TOKENS.acmeAdmin,
      {
        decision: 'deny',
        reason: '=HYPERLINK("http://evil")',
        dispatchId: parked.dispatchId,
        runId: parked.runId,
      },
    );
    expect(denied.status).toBe(200);
    const page = await signedIn(TOKENS.acmeApprover);
    await page.getByRole('link', { name: 'History' }).click();
    await page.getByLabel('Approver').fill('acme-admin');
    await page.getByLabel('Decision').selectOption('deny');
    await page.getByLabel('Run', { exact: true }).fill(parked.runId);
    await page.getByRole('button', { name: 'Search' }).click();
    const rowOf = page.locator(`table.history tr[data-dispatch="${parked.dispatchId}"]`);
    await rowOf.waitFor();
    await counted(page.locator('table.history tbody tr'), 1);

    const read = async (name: string) => {
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.getByRole('button', { name }).click(),
      ]);
      const chunks: Buffer[] = [];
      for await (const c of (await download.createReadStream())!) chunks.push(c as Buffer);
      return Buffer.concat(chunks).toString('utf8');
    };
    const jsonl = (await read('JSON Lines')).trimEnd().split('\n');
    expect(jsonl).toHaveLength(1);
    expect(JSON.parse(jsonl[0]!)).toMatchObject({
      dispatchId: parked.dispatchId,
      runId: parked.runId,
      decision: 'deny',
      resolvedBy: 'acme-admin',
      inputDigest: parked.approval.inputDigest,
      policyRevision: parked.approval.policyRevision,
      reason: '=HYPERLINK("http://evil")',
    });
    const csv = (await read('CSV')).trimEnd().split('\r\n');
    expect(csv[0]).toBe(
      'resolvedAt,decision,resolvedBy,source,reason,toolName,runId,dispatchId,approvalKey,inputDigest,policyRevision,suspendedAt,outcome,errorCode',
    );
    expect(csv).toHaveLength(2);
    // A formula is not run by a spreadsheet: quoted and prefixed.
    expect(csv[1]).toContain(`,deny,acme-admin,human,"'=HYPERLINK(""http://evil"")",gated,`);
    expect(csv[1]).toContain(`,${parked.approval.inputDigest},${parked.approval.policyRevision},`);
  }, 180_000);

  it('links each dispatch to the trace its caller sent, on the pending row, the review, the history, the run and in the CLI, only when a trace UI is configured; a malformed traceparent links nothing', async () => {
    const runId = unique('run-trace');
    const traceId = randomBytes(16).toString('hex');
    const submit = (callId: string, traceparent: string) =>
      stack.http(
        'POST',
        '/v1/dispatches',
        TOKENS.acmeAgent,
        {
          runId,
          callId,
          agent: { agentType: 'coder' },
          tool: 'gated',
          input: { n: unique('n') },
          wait: 10_000,
        },
        { traceparent },
      );
    const traced = await submit('traced', `00-${traceId}-${randomBytes(8).toString('hex')}-01`);
    const malformed = await submit('malformed', `00-${traceId.slice(2)}"><b>x-zz-01`);
    // A traceparent that does not parse is no error: the call is parked like any other.
    expect([traced.body.state, malformed.body.state]).toEqual(['suspended', 'suspended']);
    const tracedId = traced.body.dispatchId as string;
    const malformedId = malformed.body.dispatchId as string;

    // Recorded: the trace the client sent, on `requested` and in the dispatch's projection.
    const folded = (id: string) =>
      eventually(
        async () => {
          const got = await stack.http('GET', `/v1/dispatches/${id}`, TOKENS.acmeApprover);
          return got.body.dispatch?.status === 'suspended' ? got.body : undefined;
        },
        { what: `dispatch ${id} folded` },
      );
    const recorded = await folded(tracedId);
    expect(recorded.dispatch.traceId).toBe(traceId);
    expect(recorded.events[0].event).toMatchObject({ type: 'requested', traceId });
    const unlinked = await folded(malformedId);
    expect(unlinked.dispatch.traceId).toBeNull();
    expect(unlinked.events[0].event.traceId).toBeUndefined();

    const href = TRACE_UI.replace('{traceId}', traceId);
    const page = await signedIn(TOKENS.acmeApprover);
    await page.getByLabel('Run', { exact: true }).fill(runId);
    await row(page, tracedId).waitFor();
    await row(page, malformedId).waitFor();
    const link = row(page, tracedId).locator('a.trace');
    expect(await link.getAttribute('href')).toBe(href);
    expect(await link.getAttribute('rel')).toBe('noopener noreferrer');
    expect(await row(page, malformedId).locator('a.trace').count()).toBe(0);

    // The review of each.
    await review(page, tracedId);
    expect(await page.locator('#detail dl.facts a.trace').getAttribute('href')).toBe(href);
    await review(page, malformedId);
    await shows(page.locator('#detail dl.facts'), malformedId);
    expect(await page.locator('#detail dl.facts a.trace').count()).toBe(0);

    // The CLI prints it with the approval.
    const cli = async (args: string[]) => {
      let out = '';
      const code = await runCli(args, {
        env: { TOOLGATE_URL: stack.all.gateway.url, TOOLGATE_TOKEN: TOKENS.acmeApprover },
        stdout: { write: (t: string) => (out += t) },
        stderr: { write: () => undefined },
      });
      expect(code).toBe(0);
      return out;
    };
    const tracedKey = recorded.dispatch.approvalKey as string;
    expect(await cli(['approvals', 'show', tracedKey])).toMatch(
      new RegExp(`\ntrace: +${href.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\n`),
    );
    const malformedKey = unlinked.dispatch.approvalKey as string;
    expect(await cli(['approvals', 'show', malformedKey])).not.toMatch(/\ntrace:/);

    // Resolved: the history's row and the run's row link it too.
    for (const [id, key] of [
      [tracedId, tracedKey],
      [malformedId, malformedKey],
    ]) {
      const allowed = await stack.http('POST', `/v1/approvals/${key}/resolve`, TOKENS.acmeAdmin, {
        decision: 'deny',
        dispatchId: id,
        runId,
      });
      expect(allowed.status).toBe(200);
    }
    await page.getByRole('link', { name: 'History' }).click();
    await page.getByLabel('Run', { exact: true }).fill(runId);
    await page.getByRole('button', { name: 'Search' }).click();
    const historyRow = (id: string) => page.locator(`table.history tr[data-dispatch="${id}"]`);
    await historyRow(tracedId).waitFor();
    await historyRow(malformedId).waitFor();
    expect(await historyRow(tracedId).locator('a.trace').getAttribute('href')).toBe(href);
    expect(await historyRow(malformedId).locator('a.trace').count()).toBe(0);
    await historyRow(tracedId).getByRole('link', { name: runId }).click();
    const runRow = (id: string) => page.locator(`table.dispatches tr[data-dispatch="${id}"]`);
    await runRow(tracedId).waitFor();
    expect(await runRow(tracedId).locator('a.trace').getAttribute('href')).toBe(href);
    expect(await runRow(malformedId).locator('a.trace').count()).toBe(0);

    // A gateway that names no trace UI: the same dispatches, no link anywhere.
    const unconfigured = await signedIn(TOKENS.acmeApprover, undefined, async (p) => {
      await p.route('**/v1/whoami', async (route) => {
        const res = await route.fetch();
        const who = (await res.json()) as Record<string, unknown>;
        expect(who.traceUrlTemplate).toBe(TRACE_UI);
        await route.fulfill({ response: res, json: { ...who, traceUrlTemplate: null } });
      });
    });
    await unconfigured.goto(`${stack.all.gateway.url}/console/#/runs/${runId}`);
    await unconfigured.locator(`table.dispatches tr[data-dispatch="${tracedId}"]`).waitFor();
    expect(await unconfigured.locator('a.trace').count()).toBe(0);
  }, 120_000);

  it('never put a token in a URL', () => {
    expect(requested.length).toBeGreaterThan(0);
    for (const token of Object.values(TOKENS))
      expect(requested.filter((url) => url.includes(token))).toEqual([]);
  });
});
