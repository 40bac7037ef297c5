// Overview: live charts from /api/v1/history (refreshed every sample interval), per node
// or for the cluster, and the numbers a glance reads: version, uptime, mode, listeners,
// the node's limits and the tenants' quotas with their usage.
import { useState } from 'preact/hooks';
import { get, query } from '../api.js';
import { Chart } from '../chart.js';
import { ErrorBox, duration, html, num, useLoad } from '../ui.js';

const RANGES = [[300, '5 min'], [900, '15 min'], [3600, '1 hour']];

function last(values) {
  if (!values) return null;
  for (let i = values.length - 1; i >= 0; i -= 1) {
    if (values[i] !== null && values[i] !== undefined) return values[i];
  }
  return null;
}

function Stat({ label, value, testid }) {
  return html`<div class="stat" data-testid=${testid}>
    <div class="stat-label">${label}</div>
    <div class="stat-value" data-testid=${`${testid}-value`}>${value}</div>
  </div>`;
}

async function optional(path) {
  try {
    return await get(path);
  } catch (error) {
    if (error.status === 404 || error.status === 503) return null;
    throw error;
  }
}

async function loadInfo() {
  const [health, cluster, limits, tenants, node] = await Promise.all([
    get('/health'),
    optional('/api/v1/cluster'),
    get('/api/v1/limits'),
    get('/api/v1/tenants'),
    optional('/api/v1/node'),
  ]);
  return { health, cluster, limits, tenants, node };
}

function Charts({ series }) {
  const t = series.t;
  const reasons = Object.entries(series.dropped_by_reason || {});
  const dropped = reasons.length
    ? reasons.map(([reason, values]) => ({ label: reason, values }))
    : [{ label: 'dropped', values: series.dropped }];
  const charts = [
    ['connections', 'Connections', [{ label: 'connections', values: series.connections }], ''],
    ['messages', 'Messages per second', [
      { label: 'in', values: series.messages_in },
      { label: 'out', values: series.messages_out },
    ], '/s'],
    ['dropped', 'Dropped per second, by reason', dropped, '/s'],
    ['backlog', 'Persistent backlog and publish inbox', [
      { label: 'backlog', values: series.backlog },
      { label: 'inbox', values: series.inbox },
    ], ''],
  ];
  if (series.kafka_produce_ms) {
    charts.push(['kafka-produce', 'Kafka produce latency', [{ label: 'produce', values: series.kafka_produce_ms }], ' ms']);
  }
  if (series.kafka_lag) {
    charts.push(['kafka-lag', 'Kafka consumer lag', [{ label: 'lag', values: series.kafka_lag }], '']);
  }
  return html`<div class="charts">
    ${charts.map(([id, title, s, unit]) => html`<${Chart} key=${id} testid=${`chart-${id}`} title=${title} t=${t} series=${s} unit=${unit} />`)}
  </div>`;
}

export function Overview() {
  const [seconds, setSeconds] = useState(900);
  const [scope, setScope] = useState('cluster');
  const [every, setEvery] = useState(5000);
  const history = useLoad(async () => {
    const data = await get(`/api/v1/history${query({ seconds })}`);
    const wanted = Math.min(5000, Math.max(1000, (data.interval_s || 5) * 1000));
    if (wanted !== every) setEvery(wanted);
    return data;
  }, [seconds], every);
  const info = useLoad(loadInfo, [], 15000);

  const data = history.data;
  const nodes = data ? Object.keys(data.nodes || {}).sort() : [];
  const series = data ? (scope === 'cluster' ? data.cluster : data.nodes[scope]) || data.cluster : null;
  const health = info.data && info.data.health;
  const cluster = info.data && info.data.cluster;
  const node = info.data && info.data.node;
  const distributed = Boolean((cluster && cluster.distributed) || (node && node.mode === 'distributed'));

  return html`<section>
    <h1>Overview</h1>
    <${ErrorBox} error=${history.error || info.error} />
    <div class="stats">
      <${Stat} testid="stat-version" label="Version" value=${health ? health.version : '–'} />
      <${Stat} testid="stat-uptime" label="Uptime" value=${health ? duration(health.uptime_seconds) : '–'} />
      ${node && node.node_id ? html`<${Stat} testid="stat-node" label="Node" value=${node.node_id} />` : null}
      <${Stat} testid="stat-mode" label="Mode" value=${info.data ? (distributed ? 'distributed' : 'embedded') : '–'} />
      <${Stat} testid="stat-connections" label="Connections" value=${num(series && last(series.connections))} />
      <${Stat} testid="stat-messages-in" label="Messages in/s" value=${num(series && last(series.messages_in))} />
      <${Stat} testid="stat-messages-out" label="Messages out/s" value=${num(series && last(series.messages_out))} />
      <${Stat} testid="stat-dropped" label="Dropped/s" value=${num(series && last(series.dropped))} />
      <${Stat} testid="stat-backlog" label="Backlog" value=${num(series && last(series.backlog))} />
    </div>
    <div class="toolbar">
      <label>Scope <select data-testid="scope" value=${scope} onChange=${(e) => setScope(e.target.value)}>
        <option value="cluster">${distributed ? 'Whole cluster' : 'This broker'}</option>
        ${nodes.length > 1 || distributed ? nodes.map((n) => html`<option value=${n}>node ${n}</option>`) : null}
      </select></label>
      <label>Range <select data-testid="range" value=${seconds} onChange=${(e) => setSeconds(Number(e.target.value))}>
        ${RANGES.map(([s, label]) => html`<option value=${s}>${label}</option>`)}
      </select></label>
      <span class="muted small">${data ? `one sample every ${data.interval_s} s` : 'loading history…'}</span>
    </div>
    ${series ? html`<${Charts} series=${series} />` : null}
    <${Details} info=${info.data} />
  </section>`;
}

const USAGE_OF = { max_connections_per_node: 'connections', max_sessions: 'sessions', max_topics: 'topics' };

function Details({ info }) {
  if (!info) return null;
  const { health, limits, tenants, node } = info;
  const nodeLimits = (node && node.limits && node.limits.node) || (limits && limits.node) || {};
  const usage = (node && node.limits && node.limits.usage) || {};
  const listeners = node && Array.isArray(node.listeners)
    ? node.listeners
    : health && health.mqtt_port ? [{ name: 'tcp', port: health.mqtt_port, connections: null }] : [];
  return html`<div class="grid-2">
    <div class="card">
      <h2>Listeners${node && node.node_id ? html` <span class="muted small">on node ${node.node_id}</span>` : null}</h2>
      <table data-testid="listeners"><thead><tr><th>Listener</th><th>Port</th><th>Clients</th></tr></thead>
        <tbody>${listeners.map((l) => html`<tr><td>${l.name}</td><td>${l.port}</td><td>${num(l.connections)}</td></tr>`)}</tbody></table>
    </div>
    <div class="card">
      <h2>Node limits</h2>
      <table data-testid="node-limits"><thead><tr><th>Limit</th><th>Value</th><th>In use</th></tr></thead>
        <tbody>${Object.entries(nodeLimits).map(([key, value]) => html`<tr><td>${key}</td><td>${num(value)}</td>
          <td>${USAGE_OF[key] && usage[USAGE_OF[key]] !== undefined ? num(usage[USAGE_OF[key]]) : ''}</td></tr>`)}</tbody></table>
    </div>
    <div class="card wide">
      <h2>Tenants</h2>
      <div class="table-wrap"><table data-testid="tenant-usage"><thead><tr><th>Tenant</th><th>Connections</th><th>Sessions</th><th>Topics</th><th>Max connections / node</th><th>Max sessions</th><th>Max topics</th></tr></thead>
        <tbody>${(tenants ? tenants.tenants : []).map((t) => html`<tr>
          <td>${t.name}</td><td>${num(t.usage.connections)}</td><td>${num(t.usage.sessions)}</td><td>${num(t.usage.topics)}</td>
          <td>${num(t.quota.max_connections_per_node)}</td><td>${num(t.quota.max_sessions)}</td><td>${num(t.quota.max_topics)}</td></tr>`)}</tbody></table></div>
    </div>
  </div>`;
}
