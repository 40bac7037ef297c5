// Kafka (distributed mode): topics, consumer groups and their lag, from the admin API.
import { get } from '../api.js';
import { ErrorBox, html, num, useLoad } from '../ui.js';

async function loadKafka() {
  try {
    return await get('/api/v1/kafka');
  } catch (error) {
    if (error.status === 404) return { distributed: false };
    throw error;
  }
}

function Table({ rows, testid }) {
  if (!rows || rows.length === 0) return html`<p class="muted">None.</p>`;
  const columns = Object.keys(rows[0]);
  const cell = (value) => (typeof value === 'number' ? num(value)
    : value !== null && typeof value === 'object' ? JSON.stringify(value) : String(value ?? ''));
  return html`<div class="table-wrap"><table data-testid=${testid}>
    <thead><tr>${columns.map((c) => html`<th>${c.replace(/_/g, ' ')}</th>`)}</tr></thead>
    <tbody>${rows.map((row) => html`<tr>${columns.map((c) => html`<td>${cell(row[c])}</td>`)}</tr>`)}</tbody>
  </table></div>`;
}

export function Kafka() {
  const kafka = useLoad(loadKafka, [], 10000);
  const data = kafka.data;
  if (data && (data.distributed === false || data.enabled === false)) {
    return html`<section><h1>Kafka</h1>
      <p class="muted" data-testid="kafka-embedded">Kafka is used in distributed mode only; this broker runs embedded.</p></section>`;
  }
  return html`<section>
    <h1>Kafka</h1>
    <${ErrorBox} error=${kafka.error} />
    ${data && html`<h2>Topics</h2><${Table} rows=${data.topics} testid="kafka-topics" />
      <h2>Consumer groups</h2><${Table} rows=${data.consumer_groups || data.groups} testid="kafka-groups" />`}
  </section>`;
}
