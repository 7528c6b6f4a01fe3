/**
 * The dashboard's script, served as `/dashboard.js`: plain browser JavaScript, no framework, no
 * build. It polls the JSON endpoints every refresh interval and rebuilds each section from text
 * nodes (`textContent`), never from markup, so nothing read from a queue can become HTML. The
 * throughput chart is inline SVG drawn here. It contains no backtick and no `${`, so it can sit
 * in this template literal as written.
 */
export const DASHBOARD_SCRIPT = String.raw`'use strict';
(function () {
  var SVG = 'http://www.w3.org/2000/svg';
  var config = null;
  var latestGroups = {};
  var chosenGroups = {};
  var noticeTimer = null;

  function el(tag, attributes, children) {
    var node = document.createElement(tag);
    setAttributes(node, attributes);
    append(node, children);
    return node;
  }

  function svg(tag, attributes, children) {
    var node = document.createElementNS(SVG, tag);
    setAttributes(node, attributes);
    append(node, children);
    return node;
  }

  function setAttributes(node, attributes) {
    if (!attributes) return;
    Object.keys(attributes).forEach(function (name) {
      var value = attributes[name];
      if (value === undefined || value === null || value === false) return;
      node.setAttribute(name, value === true ? '' : String(value));
    });
  }

  function append(node, children) {
    if (children === undefined || children === null) return;
    (Array.isArray(children) ? children : [children]).forEach(function (child) {
      if (child === undefined || child === null) return;
      node.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
    });
  }

  function replace(id, children) {
    var target = document.getElementById(id);
    target.replaceChildren();
    append(target, children);
  }

  function count(value) {
    return Number(value).toLocaleString('en-US');
  }

  function duration(ms) {
    if (ms === null || ms === undefined) return '–';
    var seconds = Math.round(ms / 1000);
    if (seconds < 60) return seconds + ' s';
    var minutes = Math.floor(seconds / 60);
    if (minutes < 60) return minutes + ' min ' + (seconds % 60) + ' s';
    var hours = Math.floor(minutes / 60);
    if (hours < 48) return hours + ' h ' + (minutes % 60) + ' min';
    return Math.floor(hours / 24) + ' d ' + (hours % 24) + ' h';
  }

  function numberCell(value, name) {
    return el('td', { class: value === 0 ? 'number zero' : 'number', 'data-count': name }, count(value));
  }

  function getJson(path) {
    return fetch(path, { headers: { accept: 'application/json' } }).then(function (response) {
      return response.json().then(function (body) {
        if (!response.ok) throw new Error(body && body.error ? body.error : path + ' answered ' + response.status);
        return body;
      });
    });
  }

  function showNotice(text) {
    var existing = document.querySelector('.notice');
    if (existing) existing.remove();
    var notice = el('div', { class: 'notice', role: 'status' }, text);
    document.body.appendChild(notice);
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(function () { notice.remove(); }, 4000);
  }

  function renderQueues(body) {
    latestGroups = {};
    var cards = body.tables.map(function (table) {
      latestGroups[table.table] = table.groups.map(function (group) { return group.group; }).filter(function (group) { return group !== null; });
      var dead = el('span', { class: 'pill', 'data-dead-count': table.deadLettered, 'data-alert': table.deadLettered > 0 },
        'dead letters ' + count(table.deadLettered));
      var head = el('div', { class: 'card-head' }, [el('h3', null, table.table), table.deadLetter ? dead : null,
        table.error ? el('span', { class: 'error' }, table.error) : null]);
      // Rows moved into a dead-letter group lose the group they came from; a dead-letter table keeps it.
      var deadPerQueue = table.deadLetter !== null && table.deadLetter.kind === 'table';
      var unread = table.readers ? table.readers.unreadGroups : [];
      var rows = table.groups.map(function (group) {
        var isUnread = group.group !== null && unread.indexOf(group.group) !== -1;
        return el('tr', { 'data-queue': group.group === null ? '' : group.group }, [
          el('td', null, [group.group === null ? '(whole table)' : group.group, isUnread ? ' ' : null,
            isUnread ? el('span', { class: 'pill', 'data-unread': true, 'data-alert': true,
              title: 'ready rows, and no running broker subscribes to this queue (' + count(table.readers.brokers) +
                (table.readers.brokers === 1 ? ' broker reads this table and reports' : ' brokers read this table and report') + ' heartbeats): check its name' },
            'unread') : null]),
          numberCell(group.ready, 'ready'),
          numberCell(group.delayed, 'delayed'),
          numberCell(group.inWork, 'inWork'),
          numberCell(group.processed, 'processed'),
          deadPerQueue ? numberCell(group.deadLettered || 0, 'dead') : null,
          el('td', { class: 'number' }, group.oldestReadyAgeSeconds === null ? '–' : duration(group.oldestReadyAgeSeconds * 1000)),
        ]);
      });
      var grid = rows.length === 0
        ? el('p', { class: 'empty' }, table.readAt === null ? 'not read yet' : 'no rows')
        : el('table', null, [
          el('thead', null, el('tr', null, [el('th', null, 'queue'), el('th', { class: 'number' }, 'ready'),
            el('th', { class: 'number' }, 'delayed'), el('th', { class: 'number' }, 'in work'),
            el('th', { class: 'number' }, 'processed'), deadPerQueue ? el('th', { class: 'number' }, 'dead') : null,
            el('th', { class: 'number' }, 'oldest ready')])),
          el('tbody', null, rows),
        ]);
      return el('div', { class: 'card', 'data-table': table.table }, [head, grid]);
    });
    replace('queues', cards.length === 0 ? el('p', { class: 'empty' }, 'no tables: start the dashboard with --table NAME') : cards);
  }

  function niceCeiling(value) {
    if (value <= 0) return 1;
    var power = Math.pow(10, Math.floor(Math.log10(value)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i += 1) {
      if (steps[i] * power >= value) return steps[i] * power;
    }
    return 10 * power;
  }

  function renderThroughput(body) {
    var points = body.points;
    var width = 760;
    var height = 220;
    var left = 52;
    var right = 52;
    var top = 12;
    var bottom = 26;
    var plotWidth = width - left - right;
    var plotHeight = height - top - bottom;
    var peakDrained = points.reduce(function (peak, point) { return Math.max(peak, point.drainedPerSecond); }, 0);
    // Depth is a count: its axis goes to 5 at least, so the five steps stay whole numbers.
    var depthMax = niceCeiling(Math.max(5, points.reduce(function (peak, point) { return Math.max(peak, point.depth); }, 0)));
    var drainedMax = niceCeiling(peakDrained);
    var last = points.length > 0 ? points[points.length - 1] : null;
    var first = points.length > 0 ? points[0] : null;
    var span = last && first && last.at > first.at ? last.at - first.at : 1;
    function x(point) { return left + (first ? ((point.at - first.at) / span) * plotWidth : 0); }
    function yDepth(value) { return top + plotHeight - (value / depthMax) * plotHeight; }
    function yDrained(value) { return top + plotHeight - (value / drainedMax) * plotHeight; }

    var children = [];
    // Five steps: every ceiling niceCeiling picks (1, 2, 2.5 or 5 times a power of ten) divides into round ones.
    for (var i = 0; i <= 5; i += 1) {
      var y = top + (plotHeight * i) / 5;
      children.push(svg('line', { class: 'grid', x1: left, x2: width - right, y1: y, y2: y }));
      children.push(svg('text', { x: left - 6, y: y + 4, 'text-anchor': 'end' }, count(Math.round(depthMax * (1 - i / 5)))));
      children.push(svg('text', { x: width - right + 6, y: y + 4 }, count(Math.round(drainedMax * (1 - i / 5) * 100) / 100)));
    }
    if (points.length > 1) {
      var depthLine = points.map(function (point) { return x(point).toFixed(1) + ',' + yDepth(point.depth).toFixed(1); }).join(' ');
      var drainedLine = points.map(function (point) { return x(point).toFixed(1) + ',' + yDrained(point.drainedPerSecond).toFixed(1); }).join(' ');
      var baseline = (top + plotHeight).toFixed(1);
      var area = left.toFixed(1) + ',' + baseline + ' ' + drainedLine + ' ' + x(last).toFixed(1) + ',' + baseline;
      children.push(svg('polygon', { class: 'drained-area', points: area }));
      children.push(svg('polyline', { class: 'drained', points: drainedLine }));
      children.push(svg('polyline', { class: 'depth', points: depthLine }));
      children.push(svg('text', { x: left, y: height - 6 }, '−' + duration(span)));
      children.push(svg('text', { x: width - right, y: height - 6, 'text-anchor': 'end' }, 'now'));
    } else {
      children.push(svg('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle' }, 'collecting samples…'));
    }
    var chart = svg('svg', {
      id: 'throughput-chart', class: 'chart', viewBox: '0 0 ' + width + ' ' + height, role: 'img',
      'aria-label': 'queue depth and rows drained per second',
      'data-points': points.length, 'data-peak-drained': peakDrained, 'data-depth': last ? last.depth : 0,
    }, children);
    replace('throughput', chart);
    replace('throughput-summary', [
      el('span', { class: 'legend' }, [el('span', { class: 'swatch depth-swatch' }), 'depth ',
        el('strong', { 'data-summary': 'depth' }, last ? count(last.depth) : '–')]),
      el('span', { class: 'legend' }, [el('span', { class: 'swatch drained-swatch' }), 'drained ',
        el('strong', { 'data-summary': 'drained' }, last ? count(last.drainedPerSecond) + '/s' : '–')]),
      el('span', { class: 'legend' }, ['peak ', el('strong', { 'data-summary': 'peak' }, count(peakDrained) + '/s')]),
      el('span', { class: 'legend muted' }, 'depth: ready, delayed and in work (left axis); drained: rows finished per second (right axis)'),
    ]);
  }

  function requeue(table, ids, toGroup) {
    var body = { table: table };
    if (ids) body.ids = ids;
    if (toGroup) body.toGroup = toGroup;
    return fetch('/api/requeue', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
    }).then(function (response) {
      return response.json().then(function (answer) {
        if (!response.ok) throw new Error(answer && answer.error ? answer.error : 'requeue answered ' + response.status);
        showNotice('moved ' + count(answer.moved) + ' dead letter' + (answer.moved === 1 ? '' : 's') + ' back');
        refresh();
      });
    }).catch(function (error) { showNotice(error.message); });
  }

  function renderDeadLetters(body) {
    var allowed = config.allowActions;
    var cards = body.tables.map(function (table) {
      if (table.location === null) {
        return el('div', { class: 'card', 'data-dead-table': table.table }, [el('div', { class: 'card-head' }, [el('h3', null, table.table)]),
          el('p', { class: 'empty' }, 'not shown: start the dashboard with --dead-letter-group or --dead-letter-table')]);
      }
      var inGroup = table.location.indexOf('group:') === 0;
      var listId = 'groups-' + table.table.replace(/[^A-Za-z0-9_-]/g, '_');
      var target = null;
      if (inGroup) {
        // Empty until the operator names a queue: a row moved into a dead-letter group no longer
        // records the group it came from, and a guess would send the rows to the wrong queue.
        var chosen = chosenGroups[table.table];
        target = el('input', { 'aria-label': 'move to queue', placeholder: 'to queue', list: listId,
          value: chosen !== undefined ? chosen : '', disabled: !allowed });
        target.addEventListener('input', function (event) { chosenGroups[table.table] = event.target.value; });
      }
      function targetGroup() { return target ? target.value.trim() : undefined; }
      // Rows of a dead-letter group go where the operator says; rows of a dead-letter table to their own queue.
      function destination() {
        var group = targetGroup();
        if (group === '') {
          showNotice('name the queue to move the dead letters into');
          target.focus();
          return null;
        }
        return { group: group, text: group === undefined ? 'their own queues' : 'queue "' + group + '"' };
      }
      var total = table.deadLettered;
      var all = el('button', { type: 'button', 'data-action': 'requeue-all', disabled: !allowed || table.rows.length === 0,
        title: allowed ? 'move every dead letter back' : 'read-only: start the dashboard with --allow-actions' }, 'requeue all');
      all.addEventListener('click', function () {
        var to = destination();
        if (to === null) return;
        var question = 'Move all ' + count(total) + ' dead letter' + (total === 1 ? '' : 's') + ' of ' + table.table + ' to ' + to.text + '?';
        if (window.confirm(question)) requeue(table.table, undefined, to.group);
      });
      var rows = table.rows.map(function (row) {
        var button = el('button', { type: 'button', 'data-action': 'requeue', disabled: !allowed,
          title: allowed ? 'move this row back to its queue' : 'read-only: start the dashboard with --allow-actions' }, 'requeue');
        button.addEventListener('click', function () {
          var to = destination();
          if (to !== null) requeue(table.table, [row.id], to.group);
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
      var head = el('div', { class: 'card-head' }, [
        el('h3', null, table.table),
        el('span', { class: 'pill' }, table.location.replace(':', ' ')),
        el('span', { class: 'spacer' }),
        target ? el('span', { class: 'muted' }, 'requeue into') : null,
        target,
        inGroup ? el('datalist', { id: listId }, (latestGroups[table.table] || []).map(function (group) { return el('option', { value: group }); })) : null,
        all,
      ]);
      var content = table.error ? el('p', { class: 'error' }, table.error)
        : rows.length === 0 ? el('p', { class: 'empty' }, 'no dead letters')
          : el('table', null, [
            el('thead', null, el('tr', null, [el('th', null, 'id'), inGroup ? null : el('th', null, 'queue'), el('th', { class: 'number', title: 'deliveries the row had before it became a dead letter' }, 'attempts'),
              el('th', null, 'last error'), el('th', null, 'payload'), el('th', null, '')])),
            el('tbody', null, rows),
          ]);
      return el('div', { class: 'card', 'data-dead-table': table.table }, [head, content]);
    });
    var focused = document.activeElement;
    if (focused && focused.tagName === 'INPUT' && document.getElementById('dead-letters').contains(focused)) return;
    replace('dead-letters', cards);
  }

  function subscriptionLine(subscription) {
    var details = [subscription.form + ' form', count(subscription.workers) + (subscription.workers === 1 ? ' worker' : ' workers'),
      count(subscription.inWork) + ' in work',
      count(subscription.handled) + ' handled', count(subscription.acked) + ' acked', count(subscription.retried) + ' retried',
      count(subscription.deadLettered) + ' dead-lettered'];
    return el('li', { 'data-subscription': subscription.queue }, [el('strong', null, subscription.queue), ' ',
      el('span', { class: 'muted' }, details.join(' · '))]);
  }

  function renderBrokers(body) {
    if (body.problem) {
      replace('brokers', el('p', { class: 'empty' }, body.problem));
      return;
    }
    if (body.brokers.length === 0) {
      replace('brokers', el('p', { class: 'empty' }, 'no broker has written to ' + body.table + ' lately; brokers report with the heartbeat option'));
      return;
    }
    var rows = body.brokers.map(function (broker) {
      var subscriptions = broker.subscriptions.filter(function (item) { return item && typeof item === 'object'; });
      return el('tr', { 'data-broker': broker.id }, [
        el('td', null, [el('div', null, broker.host + ' · pid ' + broker.pid), el('div', { class: 'mono muted' }, broker.id)]),
        el('td', { class: 'nowrap' }, duration(broker.startedMsAgo)),
        el('td', { class: 'nowrap' }, duration(broker.seenMsAgo) + ' ago'),
        el('td', null, subscriptions.length === 0 ? el('span', { class: 'muted' }, 'none')
          : el('ul', { class: 'subscriptions' }, subscriptions.map(subscriptionLine))),
      ]);
    });
    var stale = body.staleCount > 0 ? el('p', { class: 'muted' }, count(body.staleCount) + ' older row(s) of brokers that stopped without deleting them are hidden') : null;
    replace('brokers', [el('div', { class: 'card' }, el('table', null, [
      el('thead', null, el('tr', null, [el('th', null, 'broker'), el('th', { class: 'nowrap' }, 'up'), el('th', { class: 'nowrap' }, 'last seen'), el('th', null, 'subscriptions')])),
      el('tbody', null, rows),
    ])), stale]);
  }

  function setStatus(state, text) {
    var status = document.getElementById('status');
    status.setAttribute('data-state', state);
    status.textContent = text;
  }

  var refreshing = false;
  function refresh() {
    if (refreshing) return Promise.resolve();
    refreshing = true;
    return Promise.all([getJson('/api/queues'), getJson('/api/throughput'), getJson('/api/dead-letters'), getJson('/api/brokers')])
      .then(function (bodies) {
        renderQueues(bodies[0]);
        renderThroughput(bodies[1]);
        renderDeadLetters(bodies[2]);
        renderBrokers(bodies[3]);
        setStatus('live', 'updated ' + new Date().toLocaleTimeString());
      })
      .catch(function (error) { setStatus('failed', error.message); })
      .then(function () { refreshing = false; });
  }

  function poll() {
    refresh().then(function () { setTimeout(poll, config.refreshMs); });
  }

  getJson('/api/config').then(function (loaded) {
    config = loaded;
    document.getElementById('database').textContent = config.database;
    var mode = document.getElementById('mode');
    mode.textContent = config.allowActions ? 'actions allowed' : 'read-only';
    mode.setAttribute('data-mode', config.allowActions ? 'actions' : 'read-only');
    document.getElementById('action-note').textContent = config.allowActions
      ? 'requeue moves dead letters back to their queue with the attempt count reset'
      : 'read-only: start the dashboard with --allow-actions to requeue dead letters';
    poll();
  }).catch(function (error) { setStatus('failed', error.message); });
})();
`;
