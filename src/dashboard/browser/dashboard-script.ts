/**
 * The dashboard's page script, served as `/dashboard.js`: browser code, no framework. This folder
 * compiles on its own (its tsconfig.json: the DOM library and no Node types); `npm run build`
 * writes the script to dist/, and from the sources `dashboard-script-loader.ts` compiles it. Its
 * imports are types only, so the browser loads this one file.
 *
 * It polls the JSON endpoints every refresh interval and rebuilds each section from text nodes,
 * never from markup, so nothing read from a queue can become HTML. The throughput chart is inline
 * SVG drawn here.
 */
import type {
  BrokersBody,
  DashboardConfig,
  DeadLettersBody,
  ErrorAnswer,
  PauseAnswer,
  PauseRequest,
  QueuesBody,
  QueueTableView,
  RelayView,
  RequeueAnswer,
  RequeueRequest,
  SchedulesBody,
  ThroughputBody,
  ThroughputPoint,
} from '../dashboard-api.js';

const SVG_NAMESPACE = 'http://www.w3.org/2000/svg';

/** Left out when undefined, null or false; an empty attribute when true. */
type AttributeValue = string | number | boolean | null | undefined;
type Attributes = Readonly<Record<string, AttributeValue>> | null;
/** Strings and numbers become text nodes; null and undefined are left out. */
type Child = Node | string | number | null | undefined;
type Children = Child | readonly Child[];

/** A subscription of a heartbeat row, as a broker's `stats()` writes it. */
interface ReportedSubscription {
  readonly queue: string;
  readonly form: string;
  readonly workers: number;
  readonly inWork: number;
  readonly handled: number;
  readonly acked: number;
  readonly retried: number;
  readonly deadLettered: number;
  /** Messages cancelled while in work; brokers older than cancel do not report it. */
  readonly cancelled?: unknown;
  /** Handlers given up on past their timeoutMs; brokers older than timeouts do not report it. */
  readonly timedOut?: unknown;
  /** Whether the subscription last read its queue as paused. */
  readonly paused?: unknown;
  /** The subscription's `concurrency` limits across brokers, when it declares any. */
  readonly concurrency?: unknown;
  /** The subscription's `rate` limit across brokers, when it declares one. */
  readonly rate?: unknown;
}

/** Per table, the groups of the latest read: the requeue target's suggestions. */
const latestGroups = new Map<string, readonly string[]>();
/** Per table, what the operator typed as the requeue target, kept across refreshes. */
const chosenGroups = new Map<string, string>();
let noticeTimer: number | undefined;
let refreshing = false;
/** Per section of the page, what it was last drawn from (as JSON). */
const drawnFrom = new Map<string, string>();

function el<Tag extends keyof HTMLElementTagNameMap>(tag: Tag, attributes: Attributes = null, children?: Children): HTMLElementTagNameMap[Tag] {
  const node = document.createElement(tag);
  setAttributes(node, attributes);
  append(node, children);
  return node;
}

function svg<Tag extends keyof SVGElementTagNameMap>(tag: Tag, attributes: Attributes = null, children?: Children): SVGElementTagNameMap[Tag] {
  const node = document.createElementNS(SVG_NAMESPACE, tag);
  setAttributes(node, attributes);
  append(node, children);
  return node;
}

function setAttributes(node: Element, attributes: Attributes): void {
  if (attributes === null) return;
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    node.setAttribute(name, value === true ? '' : String(value));
  }
}

function append(node: Node, children: Children): void {
  if (children === undefined || children === null) return;
  const list: readonly Child[] = Array.isArray(children) ? children : [children];
  for (const child of list) {
    if (child === undefined || child === null) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

function byId(id: string): HTMLElement {
  const found = document.getElementById(id);
  if (found === null) throw new Error(`the page has no element #${id}`);
  return found;
}

function replace(id: string, children: Children): void {
  const target = byId(id);
  target.replaceChildren();
  append(target, children);
}

function count(value: number): string {
  return value.toLocaleString('en-US');
}

function duration(ms: number | null): string {
  if (ms === null) return '–';
  const seconds = Math.round(ms / 1000);
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${seconds % 60} s`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h ${minutes % 60} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

function numberCell(value: number, name: string): HTMLTableCellElement {
  return el('td', { class: value === 0 ? 'number zero' : 'number', 'data-count': name }, count(value));
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The body of a 2xx answer; otherwise an error with the server's `error` text. */
async function answerOf<Body>(response: Response, fallback: string): Promise<Body> {
  const body = (await response.json()) as Body | Partial<ErrorAnswer> | null;
  if (!response.ok) {
    const error = body !== null && typeof body === 'object' && 'error' in body ? body.error : undefined;
    throw new Error(error ? error : `${fallback} answered ${response.status}`);
  }
  return body as Body;
}

async function getJson<Body>(path: string): Promise<Body> {
  return answerOf<Body>(await fetch(path, { headers: { accept: 'application/json' } }), path);
}

function showNotice(text: string): void {
  document.querySelector('.notice')?.remove();
  const notice = el('div', { class: 'notice', role: 'status' }, text);
  document.body.appendChild(notice);
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => notice.remove(), 4000);
}

function unreadPill(brokers: number): HTMLSpanElement {
  const reporting = brokers === 1 ? ' broker reads this table and reports' : ' brokers read this table and report';
  return el(
    'span',
    {
      class: 'pill',
      'data-unread': true,
      'data-alert': true,
      title: `ready rows, and no running broker subscribes to this queue (${count(brokers)}${reporting} heartbeats): check its name`,
    },
    'unread',
  );
}

function pausedPill(what: string): HTMLSpanElement {
  return el('span', { class: 'pill', 'data-paused': true, title: `${what}: no broker claims its rows until it is resumed; publishing goes on` }, 'paused');
}

/**
 * Pause or resume one group, or the whole table (`group` null). Offered only with actions allowed;
 * the server checks that again.
 */
function pauseButton(config: DashboardConfig, table: string, group: string | null, isPaused: boolean): HTMLButtonElement | null {
  if (!config.allowActions) return null;
  const what = group === null ? `every queue of ${table}` : `${table}/${group}`;
  const button = el(
    'button',
    { type: 'button', 'data-action': isPaused ? 'resume' : 'pause', title: isPaused ? `let the brokers claim ${what} again` : `stop every broker claiming ${what}` },
    `${isPaused ? 'resume' : 'pause'}${group === null ? ' all' : ''}`,
  );
  button.addEventListener('click', () => void pause(config, { table, group, paused: !isPaused }));
  return button;
}

async function pause(config: DashboardConfig, request: PauseRequest): Promise<void> {
  try {
    const response = await fetch('/api/pause', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(request),
    });
    const { paused } = await answerOf<PauseAnswer>(response, 'pause');
    const what = request.group === null ? `every queue of ${request.table}` : `${request.table}/${request.group}`;
    showNotice(`${what} ${paused ? 'paused' : 'resumed'}${!request.paused && paused ? ' (its whole table is still paused)' : ''}`);
    void refresh(config);
  } catch (error) {
    showNotice(messageOf(error));
  }
}

function queueCard(table: QueueTableView, config: DashboardConfig): HTMLDivElement {
  const dead = el('span', { class: 'pill', 'data-dead-count': table.deadLettered, 'data-alert': table.deadLettered > 0 }, `dead letters ${count(table.deadLettered)}`);
  const { paused } = table;
  const isTablePaused = paused !== null && paused.wholeTable;
  const head = el('div', { class: 'card-head' }, [
    el('h3', null, table.table),
    table.deadLetter ? dead : null,
    isTablePaused ? pausedPill(`every queue of ${table.table}`) : null,
    paused === null ? null : pauseButton(config, table.table, null, isTablePaused),
    table.error ? el('span', { class: 'error' }, table.error) : null,
  ]);
  // Rows moved into a dead-letter group lose the group they came from; a dead-letter table keeps it.
  const deadPerQueue = table.deadLetter !== null && table.deadLetter.kind === 'table';
  const { readers } = table;
  const rows = table.groups.map((group) => {
    const pill = readers !== null && group.group !== null && readers.unreadGroups.includes(group.group) ? unreadPill(readers.brokers) : null;
    const isGroupPaused = paused !== null && group.group !== null && paused.groups.includes(group.group);
    const pausedMark = isGroupPaused ? pausedPill(`${table.table}/${group.group ?? ''}`) : null;
    // A table without groups pauses as a whole, from the card's head.
    const action = paused === null || group.group === null ? null : pauseButton(config, table.table, group.group, isGroupPaused);
    return el('tr', { 'data-queue': group.group === null ? '' : group.group, 'data-paused': isGroupPaused || isTablePaused }, [
      el('td', null, [group.group === null ? '(whole table)' : group.group, pill ? ' ' : null, pill, pausedMark ? ' ' : null, pausedMark, action ? ' ' : null, action]),
      numberCell(group.ready, 'ready'),
      numberCell(group.delayed, 'delayed'),
      numberCell(group.inWork, 'inWork'),
      numberCell(group.processed, 'processed'),
      deadPerQueue ? numberCell(group.deadLettered ?? 0, 'dead') : null,
      el('td', { class: 'number' }, group.oldestReadyAgeSeconds === null ? '–' : duration(group.oldestReadyAgeSeconds * 1000)),
    ]);
  });
  const grid =
    rows.length === 0
      ? el('p', { class: 'empty' }, table.readAt === null ? 'not read yet' : 'no rows')
      : el('table', null, [
          el(
            'thead',
            null,
            el('tr', null, [
              el('th', null, 'queue'),
              el('th', { class: 'number' }, 'ready'),
              el('th', { class: 'number' }, 'delayed'),
              el('th', { class: 'number' }, 'in work'),
              el('th', { class: 'number' }, 'processed'),
              deadPerQueue ? el('th', { class: 'number' }, 'dead') : null,
              el('th', { class: 'number' }, 'oldest ready'),
            ]),
          ),
          el('tbody', null, rows),
        ]);
  return el('div', { class: 'card', 'data-table': table.table }, [head, grid, unindexedNote(table)]);
}

/** Queues whose claims count their rows in work by reading the whole table, and the index that stops it. */
function unindexedNote(table: QueueTableView): HTMLParagraphElement | null {
  const unindexed = table.unindexedRowsInWork;
  if (unindexed === null) return null;
  const names = unindexed.queues
    .map(({ group, reason }) => `${group === null ? 'the table' : group} (${reason === 'concurrency' ? 'a concurrency limit' : 'FIFO groups'})`)
    .join(', ');
  const [counts, their] = unindexed.queues.length === 1 ? ['counts', 'its'] : ['count', 'their'];
  return el('p', { class: 'advice', 'data-unindexed': true }, [
    `No in-work index: ${names} ${counts} the rows in work on every claim, as ${their} brokers report, `,
    'and each count reads the whole table. Add the index: ',
    el('span', { class: 'mono' }, unindexed.createIndexSql),
  ]);
}

function renderQueues(body: QueuesBody, config: DashboardConfig): void {
  latestGroups.clear();
  for (const table of body.tables) {
    latestGroups.set(
      table.table,
      table.groups.flatMap((group) => (group.group === null ? [] : [group.group])),
    );
  }
  const cards = body.tables.map((table) => queueCard(table, config));
  replace('queues', cards.length === 0 ? el('p', { class: 'empty' }, 'no tables: start the dashboard with --table NAME') : cards);
}

/** The smallest of 1, 2, 2.5, 5 and 10 times a power of ten that is at least `value`. */
function niceCeiling(value: number): number {
  if (value <= 0) return 1;
  const power = Math.pow(10, Math.floor(Math.log10(value)));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (step * power >= value) return step * power;
  }
  return 10 * power;
}

function renderThroughput(body: ThroughputBody): void {
  const { points } = body;
  const width = 760;
  const height = 220;
  const left = 52;
  const right = 52;
  const top = 12;
  const bottom = 26;
  const plotWidth = width - left - right;
  const plotHeight = height - top - bottom;
  const peakDrained = points.reduce((peak, point) => Math.max(peak, point.drainedPerSecond), 0);
  // Depth is a count: its axis goes to 5 at least, so the five steps stay whole numbers.
  const depthMax = niceCeiling(Math.max(5, points.reduce((peak, point) => Math.max(peak, point.depth), 0)));
  const drainedMax = niceCeiling(peakDrained);
  const first = points[0];
  const last = points.at(-1);
  const span = first !== undefined && last !== undefined && last.at > first.at ? last.at - first.at : 1;
  const x = (point: ThroughputPoint): number => left + (first === undefined ? 0 : ((point.at - first.at) / span) * plotWidth);
  const yDepth = (value: number): number => top + plotHeight - (value / depthMax) * plotHeight;
  const yDrained = (value: number): number => top + plotHeight - (value / drainedMax) * plotHeight;

  const children: SVGElement[] = [];
  // Five steps: every ceiling niceCeiling picks (1, 2, 2.5 or 5 times a power of ten) divides into round ones.
  for (let step = 0; step <= 5; step += 1) {
    const y = top + (plotHeight * step) / 5;
    children.push(svg('line', { class: 'grid', x1: left, x2: width - right, y1: y, y2: y }));
    children.push(svg('text', { x: left - 6, y: y + 4, 'text-anchor': 'end' }, count(Math.round(depthMax * (1 - step / 5)))));
    children.push(svg('text', { x: width - right + 6, y: y + 4 }, count(Math.round(drainedMax * (1 - step / 5) * 100) / 100)));
  }
  if (last !== undefined && points.length > 1) {
    const depthLine = points.map((point) => `${x(point).toFixed(1)},${yDepth(point.depth).toFixed(1)}`).join(' ');
    const drainedLine = points.map((point) => `${x(point).toFixed(1)},${yDrained(point.drainedPerSecond).toFixed(1)}`).join(' ');
    const baseline = (top + plotHeight).toFixed(1);
    const area = `${left.toFixed(1)},${baseline} ${drainedLine} ${x(last).toFixed(1)},${baseline}`;
    children.push(svg('polygon', { class: 'drained-area', points: area }));
    children.push(svg('polyline', { class: 'drained', points: drainedLine }));
    children.push(svg('polyline', { class: 'depth', points: depthLine }));
    children.push(svg('text', { x: left, y: height - 6 }, `−${duration(span)}`));
    children.push(svg('text', { x: width - right, y: height - 6, 'text-anchor': 'end' }, 'now'));
  } else {
    children.push(svg('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle' }, 'collecting samples…'));
  }
  const chart = svg(
    'svg',
    {
      id: 'throughput-chart',
      class: 'chart',
      viewBox: `0 0 ${width} ${height}`,
      role: 'img',
      'aria-label': 'queue depth and rows drained per second',
      'data-points': points.length,
      'data-peak-drained': peakDrained,
      'data-depth': last === undefined ? 0 : last.depth,
    },
    children,
  );
  replace('throughput', chart);
  replace('throughput-summary', [
    el('span', { class: 'legend' }, [
      el('span', { class: 'swatch depth-swatch' }),
      'depth ',
      el('strong', { 'data-summary': 'depth' }, last === undefined ? '–' : count(last.depth)),
    ]),
    el('span', { class: 'legend' }, [
      el('span', { class: 'swatch drained-swatch' }),
      'drained ',
      el('strong', { 'data-summary': 'drained' }, last === undefined ? '–' : `${count(last.drainedPerSecond)}/s`),
    ]),
    el('span', { class: 'legend' }, ['peak ', el('strong', { 'data-summary': 'peak' }, `${count(peakDrained)}/s`)]),
    el('span', { class: 'legend muted' }, 'depth: ready, delayed and in work (left axis); drained: rows finished per second (right axis)'),
  ]);
}

async function requeue(config: DashboardConfig, request: RequeueRequest): Promise<void> {
  try {
    const response = await fetch('/api/requeue', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(request),
    });
    const { moved } = await answerOf<RequeueAnswer>(response, 'requeue');
    showNotice(`moved ${count(moved)} dead letter${moved === 1 ? '' : 's'} back`);
    void refresh(config);
  } catch (error) {
    showNotice(messageOf(error));
  }
}

/** Where a requeue sends the rows: `group` undefined sends each back to its own queue. */
interface Destination {
  readonly group: string | undefined;
  readonly text: string;
}

/** False when the operator is typing in the section, which is then left as it is. */
function renderDeadLetters(body: DeadLettersBody, config: DashboardConfig): boolean {
  const allowed = config.allowActions;
  const readOnlyTitle = 'read-only: start the dashboard with --allow-actions';
  const cards = body.tables.map((table) => {
    const { location } = table;
    if (location === null) {
      return el('div', { class: 'card', 'data-dead-table': table.table }, [
        el('div', { class: 'card-head' }, [el('h3', null, table.table)]),
        el('p', { class: 'empty' }, 'not shown: start the dashboard with --dead-letter-group or --dead-letter-table'),
      ]);
    }
    const inGroup = location.startsWith('group:');
    const listId = `groups-${table.table.replace(/[^A-Za-z0-9_-]/g, '_')}`;
    let target: HTMLInputElement | null = null;
    if (inGroup) {
      // Empty until the operator names a queue: a row moved into a dead-letter group no longer
      // records the group it came from, and a guess would send the rows to the wrong queue.
      const input = el('input', {
        'aria-label': 'move to queue',
        placeholder: 'to queue',
        list: listId,
        value: chosenGroups.get(table.table) ?? '',
        disabled: !allowed,
      });
      input.addEventListener('input', () => chosenGroups.set(table.table, input.value));
      target = input;
    }
    // Rows of a dead-letter group go where the operator says; rows of a dead-letter table to their own queue.
    const destination = (): Destination | null => {
      if (target === null) return { group: undefined, text: 'their own queues' };
      const group = target.value.trim();
      if (group === '') {
        showNotice('name the queue to move the dead letters into');
        target.focus();
        return null;
      }
      return { group, text: `queue "${group}"` };
    };
    const requeueTo = (to: Destination, ids?: readonly string[]): void => {
      void requeue(config, { table: table.table, ...(ids ? { ids } : {}), ...(to.group ? { toGroup: to.group } : {}) });
    };
    const total = table.deadLettered;
    const all = el(
      'button',
      {
        type: 'button',
        'data-action': 'requeue-all',
        disabled: !allowed || table.rows.length === 0,
        title: allowed ? 'move every dead letter back' : readOnlyTitle,
      },
      'requeue all',
    );
    all.addEventListener('click', () => {
      const to = destination();
      if (to === null) return;
      const question = `Move all ${count(total)} dead letter${total === 1 ? '' : 's'} of ${table.table} to ${to.text}?`;
      if (window.confirm(question)) requeueTo(to);
    });
    const rows = table.rows.map((row) => {
      const button = el(
        'button',
        { type: 'button', 'data-action': 'requeue', disabled: !allowed, title: allowed ? 'move this row back to its queue' : readOnlyTitle },
        'requeue',
      );
      button.addEventListener('click', () => {
        const to = destination();
        if (to !== null) requeueTo(to, [row.id]);
      });
      return el('tr', { 'data-dead-id': row.id }, [
        el('td', { class: 'mono' }, row.id),
        inGroup ? null : el('td', null, row.group === null ? '–' : row.group),
        el('td', { class: 'number', 'data-attempts': true }, row.attemptsMade === null ? '–' : count(row.attemptsMade)),
        el('td', { class: row.lastError ? 'error' : 'muted', 'data-last-error': true }, row.lastError || 'no error recorded'),
        el('td', { class: 'mono payload' }, row.payloadPreview),
        el('td', null, button),
      ]);
    });
    const head = el('div', { class: 'card-head' }, [
      el('h3', null, table.table),
      el('span', { class: 'pill' }, location.replace(':', ' ')),
      el('span', { class: 'spacer' }),
      target ? el('span', { class: 'muted' }, 'requeue into') : null,
      target,
      inGroup ? el('datalist', { id: listId }, (latestGroups.get(table.table) ?? []).map((group) => el('option', { value: group }))) : null,
      all,
    ]);
    const content = table.error
      ? el('p', { class: 'error' }, table.error)
      : rows.length === 0
        ? el('p', { class: 'empty' }, 'no dead letters')
        : el('table', null, [
            el(
              'thead',
              null,
              el('tr', null, [
                el('th', null, 'id'),
                inGroup ? null : el('th', null, 'queue'),
                el('th', { class: 'number', title: 'deliveries the row had before it became a dead letter' }, 'attempts'),
                el('th', null, 'last error'),
                el('th', null, 'payload'),
                el('th', null, ''),
              ]),
            ),
            el('tbody', null, rows),
          ]);
    return el('div', { class: 'card', 'data-dead-table': table.table }, [head, content]);
  });
  // Rebuilding the section would take the text field from under the operator's cursor.
  const focused = document.activeElement;
  if (focused instanceof HTMLInputElement && byId('dead-letters').contains(focused)) return false;
  replace('dead-letters', cards);
  return true;
}

/** Heartbeat rows come from brokers of any version; a subscription without these fields is left out. */
function isReportedSubscription(item: unknown): item is ReportedSubscription {
  if (item === null || typeof item !== 'object') return false;
  const fields = item as Record<string, unknown>;
  return (
    typeof fields['queue'] === 'string' &&
    typeof fields['form'] === 'string' &&
    ['workers', 'inWork', 'handled', 'acked', 'retried', 'deadLettered'].every((name) => typeof fields[name] === 'number')
  );
}

/** The limits a subscription declares, as the broker reported them: `at most 3 in work`, `at most 50 per 1000 ms`. */
function limitsOf(subscription: ReportedSubscription): string[] {
  const limits: string[] = [];
  const { concurrency, rate } = subscription;
  if (typeof concurrency === 'object' && concurrency !== null) {
    const { global, perKey } = concurrency as { global?: unknown; perKey?: unknown };
    if (typeof global === 'number') limits.push(`at most ${count(global)} in work`);
    if (typeof perKey === 'number') limits.push(`at most ${count(perKey)} in work per key`);
  }
  if (typeof rate === 'object' && rate !== null) {
    const { limit, perMs, key } = rate as { limit?: unknown; perMs?: unknown; key?: unknown };
    if (typeof limit === 'number' && typeof perMs === 'number') {
      limits.push(`at most ${count(limit)} per ${count(perMs)} ms${key === true ? ' per key' : ''}`);
    }
  }
  return limits;
}

function subscriptionLine(subscription: ReportedSubscription): HTMLLIElement {
  const details = [
    `${subscription.form} form`,
    `${count(subscription.workers)}${subscription.workers === 1 ? ' worker' : ' workers'}`,
    `${count(subscription.inWork)} in work`,
    `${count(subscription.handled)} handled`,
    `${count(subscription.acked)} acked`,
    `${count(subscription.retried)} retried`,
    `${count(subscription.deadLettered)} dead-lettered`,
  ];
  if (typeof subscription.cancelled === 'number' && subscription.cancelled > 0) details.push(`${count(subscription.cancelled)} cancelled`);
  if (typeof subscription.timedOut === 'number' && subscription.timedOut > 0) details.push(`${count(subscription.timedOut)} timed out`);
  details.push(...limitsOf(subscription));
  if (subscription.paused === true) details.push('paused');
  return el('li', { 'data-subscription': subscription.queue }, [
    el('strong', null, subscription.queue),
    ' ',
    el('span', { class: 'muted' }, details.join(' · ')),
  ]);
}

/** A relay and, under it, the names it waits to send again: a name failing again and again is stuck. */
function relayLine(relay: RelayView): HTMLLIElement {
  const details = [`${count(relay.relayed)} relayed`, `${count(relay.failedSends)} failed sends`, `${count(relay.namesInWork)} names in work`];
  if (relay.namesWaitingToRetry > 0) details.push(`${count(relay.namesWaitingToRetry)} waiting to retry`);
  const waiting = relay.waitingNames.map((name) => {
    const when = name.retryInMs === 0 ? 'due again now' : `again in ${duration(name.retryInMs)}`;
    return el('li', { 'data-waiting-name': name.name }, [
      el('strong', null, name.name),
      ' ',
      el('span', { class: 'muted' }, `${count(name.failedSends)} failed ${name.failedSends === 1 ? 'send' : 'sends'} in a row · ${when}`),
      name.error === null
        ? el('div', { class: 'muted' }, 'its send could not begin (a service transaction held the SQLite handle)')
        : el('div', { class: 'mono error' }, name.error),
    ]);
  });
  return el('li', { 'data-relay': relay.outbox }, [
    el('strong', null, relay.outbox),
    ` → ${relay.destination} `,
    el('span', { class: 'muted' }, details.join(' · ')),
    waiting.length === 0 ? null : el('ul', { class: 'subscriptions' }, waiting),
  ]);
}

function renderBrokers(body: BrokersBody): void {
  if (body.problem) {
    replace('brokers', el('p', { class: 'empty' }, body.problem));
    return;
  }
  if (body.brokers.length === 0) {
    replace('brokers', el('p', { class: 'empty' }, `no broker has written to ${body.table} lately; brokers report with the heartbeat option`));
    return;
  }
  const showsRelays = body.brokers.some((broker) => broker.relays.length > 0);
  const rows = body.brokers.map((broker) => {
    const subscriptions = broker.subscriptions.filter(isReportedSubscription);
    const { relays } = broker;
    return el('tr', { 'data-broker': broker.id }, [
      el('td', null, [el('div', null, `${broker.host} · pid ${broker.pid}`), el('div', { class: 'mono muted' }, broker.id)]),
      el('td', { class: 'nowrap' }, duration(broker.startedMsAgo)),
      el('td', { class: 'nowrap' }, `${duration(broker.seenMsAgo)} ago`),
      el(
        'td',
        null,
        subscriptions.length === 0 ? el('span', { class: 'muted' }, 'none') : el('ul', { class: 'subscriptions' }, subscriptions.map(subscriptionLine)),
      ),
      showsRelays
        ? el(
            'td',
            null,
            relays.length === 0
              ? el('span', { class: 'muted' }, 'none')
              : el('ul', { class: 'subscriptions' }, relays.map(relayLine)),
          )
        : null,
    ]);
  });
  const stale =
    body.staleCount > 0 ? el('p', { class: 'muted' }, `${count(body.staleCount)} older row(s) of brokers that stopped without deleting them are hidden`) : null;
  replace('brokers', [
    el(
      'div',
      { class: 'card' },
      el('table', null, [
        el(
          'thead',
          null,
          el('tr', null, [
            el('th', null, 'broker'),
            el('th', { class: 'nowrap' }, 'up'),
            el('th', { class: 'nowrap' }, 'last seen'),
            el('th', null, 'subscriptions'),
            showsRelays ? el('th', null, 'outbox relays') : null,
          ]),
        ),
        el('tbody', null, rows),
      ]),
    ),
    stale,
  ]);
}

/** The section shows only once the schedules table can be read: a database without schedules has none. */
function renderSchedules(body: SchedulesBody): void {
  const section = byId('schedules-section');
  section.hidden = body.problem !== null;
  if (body.problem !== null) return;
  if (body.schedules.length === 0) {
    replace('schedules', el('p', { class: 'empty' }, `no schedule in ${body.table} yet; brokers declare them with broker.schedule`));
    return;
  }
  const instant = (iso: string | null) => el('td', { class: 'nowrap mono' }, iso === null ? '–' : new Date(iso).toLocaleString());
  const rows = body.schedules.map((schedule) =>
    el('tr', { 'data-schedule': schedule.name }, [
      el('td', null, el('strong', null, schedule.name)),
      el('td', null, schedule.queue),
      el('td', { class: 'nowrap mono' }, schedule.cron),
      el('td', { class: 'nowrap' }, schedule.timeZone),
      instant(schedule.lastTickAt),
      instant(schedule.nextTickAt),
      numberCell(schedule.firedCount, 'fired'),
      numberCell(schedule.missedCount, 'missed'),
      instant(schedule.declaredAt),
    ]),
  );
  replace(
    'schedules',
    el(
      'div',
      { class: 'card' },
      el('table', null, [
        el(
          'thead',
          null,
          el('tr', null, [
            el('th', null, 'schedule'),
            el('th', null, 'queue'),
            el('th', null, 'cron'),
            el('th', null, 'zone'),
            el('th', { class: 'nowrap' }, 'last tick'),
            el('th', { class: 'nowrap' }, 'next tick'),
            el('th', { class: 'number' }, 'fired'),
            el('th', { class: 'number' }, 'missed'),
            el('th', { class: 'nowrap', title: 'when a broker last declared it: an old time is a schedule no code declares any more' }, 'declared'),
          ]),
        ),
        el('tbody', null, rows),
      ]),
    ),
  );
}

function setStatus(state: 'live' | 'failed', text: string): void {
  const status = byId('status');
  status.setAttribute('data-state', state);
  status.textContent = text;
}

/** One read of every endpoint; a refresh asked for while one runs (after a requeue, say) is dropped. */
async function refresh(config: DashboardConfig): Promise<void> {
  if (refreshing) return;
  refreshing = true;
  try {
    const [queues, throughput, deadLetters, brokers, schedules] = await Promise.all([
      getJson<QueuesBody>('/api/queues'),
      getJson<ThroughputBody>('/api/throughput'),
      getJson<DeadLettersBody>('/api/dead-letters'),
      getJson<BrokersBody>('/api/brokers'),
      getJson<SchedulesBody>('/api/schedules'),
    ]);
    redrawOnChange('queues', queues, () => renderQueues(queues, config));
    redrawOnChange('throughput', throughput, () => renderThroughput(throughput));
    // The dead-letter card suggests the groups the queue read found.
    redrawOnChange('deadLetters', [deadLetters, [...latestGroups]], () => renderDeadLetters(deadLetters, config));
    redrawOnChange('brokers', brokers, () => renderBrokers(brokers));
    redrawOnChange('schedules', schedules, () => renderSchedules(schedules));
    setStatus('live', `updated ${new Date().toLocaleTimeString()}`);
  } catch (error) {
    setStatus('failed', messageOf(error));
  } finally {
    refreshing = false;
  }
}

/**
 * Draws a section again only when what it is drawn from changed. A redraw replaces its buttons
 * and inputs: a click whose press and release fell either side of one was lost (the release
 * landed on the new button, so no click reached either), and typing lost its focus. A draw that
 * answers false left the section as it was, so the next refresh tries again.
 */
function redrawOnChange(section: string, input: unknown, draw: () => boolean | void): void {
  const json = JSON.stringify(input);
  if (drawnFrom.get(section) === json) return;
  if (draw() !== false) drawnFrom.set(section, json);
}

async function poll(config: DashboardConfig): Promise<void> {
  await refresh(config);
  setTimeout(() => void poll(config), config.refreshMs);
}

async function start(): Promise<void> {
  try {
    const config = await getJson<DashboardConfig>('/api/config');
    byId('database').textContent = config.database;
    const mode = byId('mode');
    mode.textContent = config.allowActions ? 'actions allowed' : 'read-only';
    mode.setAttribute('data-mode', config.allowActions ? 'actions' : 'read-only');
    byId('action-note').textContent = config.allowActions
      ? 'requeue moves dead letters back to their queue with the attempt count reset; pause stops every broker claiming a queue until resume'
      : 'read-only: start the dashboard with --allow-actions to requeue dead letters and pause queues';
    void poll(config);
  } catch (error) {
    setStatus('failed', messageOf(error));
  }
}

void start();
