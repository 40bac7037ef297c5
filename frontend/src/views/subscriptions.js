// Subscriptions: every subscription, searched by topic filter, tenant and client id.
import { useState } from 'preact/hooks';
import { get, query } from '../api.js';
import { ErrorBox, html, useLoad } from '../ui.js';

const EMPTY = { filter: '', match: 'prefix', tenant: '', client_id: '' };

/** The API's parameters: the filter as `filter_prefix` or, matched exactly, `topic_filter`. */
function params({ filter, match, ...rest }) {
  return { ...rest, [match === 'exact' ? 'topic_filter' : 'filter_prefix']: filter };
}

export function Subscriptions() {
  const [draft, setDraft] = useState(EMPTY);
  const [filters, setFilters] = useState(EMPTY);
  const list = useLoad(() => get(`/api/v1/subscriptions${query({ ...params(filters), limit: 500 })}`), [filters]);
  const items = list.data ? list.data.items || list.data.subscriptions || [] : [];
  const input = (key, label) => html`<label>${label}
    <input name=${key} data-testid=${`subs-${key}`} value=${draft[key]}
      onInput=${(e) => setDraft({ ...draft, [key]: e.target.value })} /></label>`;
  return html`<section>
    <h1>Subscriptions</h1>
    <form class="filters" onSubmit=${(e) => { e.preventDefault(); setFilters({ ...draft }); }}>
      ${input('filter', 'Topic filter')}
      <label>Match <select data-testid="subs-match" value=${draft.match}
        onChange=${(e) => setDraft({ ...draft, match: e.target.value })}>
        <option value="prefix">starts with</option><option value="exact">exactly</option>
      </select></label>
      ${input('tenant', 'Tenant')}${input('client_id', 'Client id')}
      <button type="submit" class="primary" data-testid="subs-submit">Search</button>
    </form>
    <${ErrorBox} error=${list.error} />
    <div class="table-wrap"><table data-testid="subscription-table">
      <thead><tr><th>Filter</th><th>Client id</th><th>Tenant</th><th>QoS</th><th>No local</th><th>Retain as published</th><th>Retain handling</th><th>Id</th></tr></thead>
      <tbody>${items.map((s) => html`<tr>
        <td>${s.topic_filter}</td>
        <td><a href=${`#/sessions/${encodeURIComponent(s.client_id)}`}>${s.client_id}</a></td>
        <td>${s.tenant}</td><td>${s.qos}</td><td>${s.no_local ? 'yes' : 'no'}</td>
        <td>${s.retain_as_published ? 'yes' : 'no'}</td><td>${s.retain_handling}</td>
        <td>${s.subscription_identifier ?? ''}</td></tr>`)}</tbody>
    </table></div>
    ${!list.loading && items.length === 0 ? html`<p class="muted">No subscription matches.</p>` : null}
  </section>`;
}
