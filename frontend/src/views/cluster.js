// Cluster nodes (distributed mode): state, heartbeat, clients, sessions and lag per node,
// as the node registry in Redis shows them.
import { get } from '../api.js';
import { ErrorBox, duration, html, num, useLoad, when } from '../ui.js';

export function Cluster() {
  const status = useLoad(() => get('/api/v1/cluster'), [], 5000);
  const data = status.data;
  if (data && !data.distributed) {
    return html`<section><h1>Cluster</h1>
      <p class="muted" data-testid="cluster-embedded">This broker runs in embedded mode: one node, no cluster.</p></section>`;
  }
  const nodes = data ? data.nodes || [] : [];
  return html`<section>
    <h1>Cluster</h1>
    <${ErrorBox} error=${status.error} />
    ${data && html`<p data-testid="cluster-summary">${num(data.alive)} alive · ${num(data.stale)} stale · ${num(data.gone)} gone</p>`}
    <div class="table-wrap"><table data-testid="cluster-table">
      <thead><tr><th>Node</th><th>State</th><th>Host</th><th>Ports</th><th>Heartbeat</th><th>Connections</th><th>Sessions</th><th>Log lag</th><th>App lag</th><th>Started</th></tr></thead>
      <tbody>${nodes.map((n) => html`<tr data-testid=${`node-row-${n.node_id}`}>
        <td>${n.node_id}</td><td><span class=${`badge ${n.state === 'alive' ? 'ok' : 'warn'}`}>${n.state}</span></td>
        <td>${n.host ?? ''}</td><td class="mono">${n.ports ? Object.entries(n.ports).map(([k, v]) => `${k} ${v}`).join(', ') : ''}</td>
        <td>${n.heartbeat_age_s !== undefined ? `${duration(n.heartbeat_age_s)} ago` : ''}</td>
        <td>${num(n.connections)}</td><td>${num(n.sessions)}</td><td>${num(n.log_consumer_lag)}</td><td>${num(n.app_consumer_lag)}</td>
        <td>${n.started_at ? when(n.started_at) : ''}</td></tr>`)}</tbody>
    </table></div>
  </section>`;
}
