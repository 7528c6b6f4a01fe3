/**
 * The dashboard's page: static text served as it is. Every value the page shows is put in by
 * the page script (`browser/dashboard-script.ts`) as text nodes, never as markup. The script is
 * a module, so it runs once the document is parsed, in strict mode and in a scope of its own.
 */
export const DASHBOARD_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tablequeue dashboard</title>
<link rel="stylesheet" href="/dashboard.css">
<script type="module" src="/dashboard.js"></script>
</head>
<body>
<header class="top">
  <h1>tablequeue</h1>
  <span id="database" class="muted"></span>
  <span id="mode" class="badge"></span>
  <span class="spacer"></span>
  <span id="status" class="status" data-state="loading">loading…</span>
</header>
<main>
  <section aria-labelledby="queues-title">
    <h2 id="queues-title">Queues</h2>
    <div id="queues"></div>
  </section>
  <section aria-labelledby="throughput-title">
    <h2 id="throughput-title">Throughput</h2>
    <p id="throughput-summary" class="summary"></p>
    <div id="throughput"></div>
  </section>
  <section aria-labelledby="dead-letters-title">
    <h2 id="dead-letters-title">Dead letters</h2>
    <p id="action-note" class="muted"></p>
    <div id="dead-letters"></div>
  </section>
  <section aria-labelledby="brokers-title">
    <h2 id="brokers-title">Brokers</h2>
    <div id="brokers"></div>
  </section>
  <section id="schedules-section" aria-labelledby="schedules-title" hidden>
    <h2 id="schedules-title">Schedules</h2>
    <div id="schedules"></div>
  </section>
</main>
</body>
</html>
`;
