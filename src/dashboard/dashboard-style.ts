/** The dashboard's style sheet, served as `/dashboard.css`. */
export const DASHBOARD_STYLE = `:root {
  --ink: #1d2430;
  --muted: #647084;
  --line: #dfe3ea;
  --panel: #ffffff;
  --ground: #f4f6f9;
  --accent: #2f6fde;
  --good: #1f9d6b;
  --warn: #c27c0e;
  --bad: #c8413b;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--ink);
  background: var(--ground);
}
* { box-sizing: border-box; }
body { margin: 0; }
.top {
  display: flex; align-items: center; gap: 14px;
  padding: 12px 24px; background: var(--panel); border-bottom: 1px solid var(--line);
}
.top h1 { font-size: 18px; margin: 0; letter-spacing: 0.2px; }
.spacer { flex: 1; }
.muted { color: var(--muted); }
.badge { font-size: 12px; padding: 2px 8px; border-radius: 10px; background: #e8edf7; color: var(--accent); }
.badge[data-mode="actions"] { background: #fbeaea; color: var(--bad); }
.status { font-size: 12px; color: var(--muted); }
.status::before { content: ""; display: inline-block; width: 8px; height: 8px; margin-right: 6px; border-radius: 50%; background: var(--muted); }
.status[data-state="live"]::before { background: var(--good); }
.status[data-state="failed"]::before { background: var(--bad); }
main { max-width: 1120px; margin: 0 auto; padding: 8px 24px 40px; }
section { margin-top: 22px; }
h2 { font-size: 15px; margin: 0 0 10px; }
h3 { font-size: 14px; margin: 0; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; margin-bottom: 12px; }
.card-head { display: flex; align-items: center; gap: 12px; margin-bottom: 8px; flex-wrap: wrap; }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; font-weight: 600; color: var(--muted); }
tr:last-child td { border-bottom: none; }
td.number, th.number { text-align: right; font-variant-numeric: tabular-nums; }
td.zero { color: #b3bac6; }
.pill { font-size: 12px; padding: 1px 8px; border-radius: 10px; background: #eef1f5; color: var(--muted); }
.pill[data-alert] { background: #fbeaea; color: var(--bad); }
.pill[data-paused] { background: #fdf3dc; color: #8a5a00; }
.error { color: var(--bad); }
.advice { margin: 8px 0 0; padding: 6px 10px; border-radius: 6px; background: #fdf3dc; color: #5c3d00; font-size: 13px; }
.nowrap { white-space: nowrap; }
.mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; word-break: break-all; }
.payload { max-width: 320px; }
.summary { margin: 0 0 8px; color: var(--muted); }
.summary strong { color: var(--ink); font-variant-numeric: tabular-nums; }
.legend { display: inline-flex; align-items: center; gap: 6px; margin-right: 14px; }
.swatch { width: 12px; height: 3px; border-radius: 2px; display: inline-block; }
.depth-swatch { background: var(--accent); }
.drained-swatch { background: var(--good); }
svg.chart { width: 100%; height: auto; display: block; }
svg.chart text { font-size: 11px; fill: var(--muted); }
svg.chart .grid { stroke: var(--line); stroke-width: 1; }
svg.chart .depth { fill: none; stroke: var(--accent); stroke-width: 2; }
svg.chart .drained { fill: none; stroke: var(--good); stroke-width: 2; }
svg.chart .drained-area { fill: var(--good); opacity: 0.12; }
button {
  font: inherit; font-size: 12px; padding: 3px 10px; border-radius: 6px;
  border: 1px solid var(--line); background: var(--panel); color: var(--ink); cursor: pointer;
}
button:hover:not(:disabled) { border-color: var(--accent); color: var(--accent); }
button:disabled { cursor: not-allowed; color: #aab1bd; }
input { font: inherit; font-size: 12px; padding: 2px 6px; border: 1px solid var(--line); border-radius: 6px; width: 140px; }
.empty { color: var(--muted); font-style: italic; }
.subscriptions { margin: 0; padding: 0; list-style: none; }
.subscriptions li + li { margin-top: 2px; }
.subscriptions .subscriptions { margin: 2px 0 0 14px; }
.notice { position: fixed; right: 20px; bottom: 20px; padding: 8px 14px; border-radius: 6px; background: var(--ink); color: #fff; font-size: 13px; }
`;
