// Sessions: search (client id prefix, user, tenant, address, state) with server-side
// paging (the API's cursor), a session's detail, disconnect and remove with a confirmation.
import { useState } from 'preact/hooks';
import { del, get, post, query } from '../api.js';
import { ErrorBox, Notice, html, num, useConfirm, useLoad, when } from '../ui.js';

const PAGE = 50;
const EMPTY = { prefix: '', user: '', tenant: '', address: '', state: '' };

export function Sessions({ arg, readOnly }) {
  if (arg) return html`<${SessionDetail} clientId=${arg} readOnly=${readOnly} />`;
  return html`<${SessionList} />`;
}

function SessionList() {
  const [draft, setDraft] = useState(EMPTY);
  const [filters, setFilters] = useState(EMPTY);
  const [cursors, setCursors] = useState([null]);
  const cursor = cursors[cursors.length - 1];
  const page = useLoad(
    () => get(`/api/v1/sessions${query({ ...filters, limit: PAGE, cursor })}`),
    [filters, cursor],
  );
  const data = page.data;
  const items = data ? data.items || data.sessions || [] : [];
  const search = (e) => {
    e.preventDefault();
    setFilters({ ...draft });
    setCursors([null]);
  };
  const input = (key, label, placeholder) => html`<label>${label}
    <input name=${key} data-testid=${`search-${key}`} value=${draft[key]} placeholder=${placeholder}
      onInput=${(e) => setDraft({ ...draft, [key]: e.target.value })} /></label>`;

  return html`<section>
    <h1>Sessions</h1>
    <form class="filters" onSubmit=${search} data-testid="session-search">
      ${input('prefix', 'Client id prefix', 'sensor-')}
      ${input('user', 'User', 'user name')}
      ${input('tenant', 'Tenant', 'default')}
      ${input('address', 'Address', '127.0.0.1')}
      <label>State <select name="state" data-testid="search-state" value=${draft.state}
        onChange=${(e) => setDraft({ ...draft, state: e.target.value })}>
        <option value="">any</option><option value="connected">connected</option><option value="offline">offline</option>
      </select></label>
      <button type="submit" class="primary" data-testid="search-submit">Search</button>
    </form>
    <${ErrorBox} error=${page.error} />
    <p class="muted" data-testid="session-total">${data && data.total !== undefined ? `${num(data.total)} sessions` : ''}</p>
    <div class="table-wrap"><table data-testid="session-table">
      <thead><tr><th>Client id</th><th>Tenant</th><th>User</th><th>State</th><th>Protocol</th><th>Address</th><th>Subs</th><th>Queued</th><th>In flight</th></tr></thead>
      <tbody>${items.map((s) => html`<tr data-testid=${`session-row-${s.client_id}`}>
        <td><a href=${`#/sessions/${encodeURIComponent(s.client_id)}`} data-testid="session-link">${s.client_id}</a></td>
        <td>${s.tenant}</td><td>${s.username ?? s.user ?? ''}</td>
        <td><span class=${`badge ${s.connected ? 'ok' : ''}`}>${s.connected ? 'connected' : 'offline'}</span></td>
        <td>${s.protocol_level ?? s.protocol_version ?? ''}</td><td>${s.address ?? s.peer ?? ''}</td>
        <td>${num(typeof s.subscriptions === 'number' ? s.subscriptions : (s.subscriptions || []).length)}</td>
        <td>${num(s.queued)}</td><td>${num(s.inflight)}</td></tr>`)}</tbody>
    </table></div>
    ${!page.loading && items.length === 0 ? html`<p class="muted" data-testid="no-sessions">No session matches.</p>` : null}
    <div class="pager">
      <button type="button" data-testid="page-prev" disabled=${cursors.length < 2}
        onClick=${() => setCursors(cursors.slice(0, -1))}>← Previous</button>
      <span class="muted">page ${cursors.length}</span>
      <button type="button" data-testid="page-next" disabled=${!data || !data.next_cursor}
        onClick=${() => setCursors([...cursors, data.next_cursor])}>Next →</button>
    </div>
  </section>`;
}

function SessionDetail({ clientId, readOnly }) {
  const path = `/api/v1/sessions/${encodeURIComponent(clientId)}`;
  const session = useLoad(() => get(path), [clientId], 5000);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const [dialog, ask] = useConfirm();
  const s = session.data;

  const run = (action) => async () => {
    setError(null);
    setNotice('');
    try {
      if (action === 'disconnect') {
        const answer = await post(`${path}/disconnect`);
        setNotice(answer && answer.disconnected ? `${clientId} disconnected` : `${clientId} was not connected`);
        session.reload();
      } else {
        await del(path);
        setNotice(`session ${clientId} removed`);
        window.location.hash = '#/sessions';
      }
    } catch (e) {
      setError(e);
    }
  };

  const fields = s ? [
    ['State', s.connected ? 'connected' : 'offline'],
    ['Tenant', s.tenant],
    ['User', s.username ?? s.user],
    ['Client type', s.client_type],
    ['Protocol version', s.protocol_version ?? s.protocol_level],
    ['Listener', s.listener],
    ['Address', s.address ?? s.peer],
    ['Keep-alive', s.keep_alive !== undefined && s.keep_alive !== null ? `${s.keep_alive} s` : null],
    ['Persistent', s.persistent ? 'yes' : 'no'],
    ['Session expiry', s.expiry_interval !== undefined ? `${s.expiry_interval} s` : null],
    ['Queued', num(s.queued)],
    ['In flight', num(s.inflight)],
    ['Write buffer', s.write_buffer_bytes !== undefined && s.write_buffer_bytes !== null ? `${num(s.write_buffer_bytes)} B` : null],
    ['Stored messages', s.stored_messages !== undefined ? num(s.stored_messages) : null],
    ['APPLICATION topic', s.application_topic ?? (s.application && s.application.topic)],
    ['APPLICATION lag', s.application_lag ?? (s.application && s.application.lag)],
    ['Disconnected at', s.disconnected_at ? when(s.disconnected_at) : null],
  ].filter(([, v]) => v !== undefined && v !== null && v !== '') : [];
  const subs = s && Array.isArray(s.subscriptions) ? s.subscriptions : [];

  return html`<section>
    <p><a href="#/sessions" data-testid="back-to-sessions">← Sessions</a></p>
    <h1 data-testid="session-title">Session ${clientId}</h1>
    <${ErrorBox} error=${error || session.error} />
    <${Notice} text=${notice} />
    ${readOnly && html`<p class="muted small" data-testid="read-only">Your role is read only: the broker refuses changes.</p>`}
    ${s && html`<div class="actions">
      <button type="button" data-testid="session-disconnect"
        onClick=${() => ask(`Disconnect ${clientId}? The session stays.`, 'Disconnect', run('disconnect'))}>Disconnect</button>
      <button type="button" class="danger" data-testid="session-remove"
        onClick=${() => ask(`Remove the session ${clientId} and its queued messages?`, 'Remove', run('remove'))}>Remove</button>
    </div>`}
    ${s && html`<dl class="detail" data-testid="session-detail">
      ${fields.map(([k, v]) => html`<dt>${k}</dt><dd data-testid=${`detail-${k.toLowerCase().replace(/[^a-z]+/g, '-')}`}>${v}</dd>`)}
    </dl>`}
    ${s && html`<h2>Subscriptions</h2>
      <div class="table-wrap"><table data-testid="session-subscriptions"><thead><tr><th>Filter</th><th>QoS</th><th>No local</th><th>Retain as published</th><th>Retain handling</th></tr></thead>
      <tbody>${subs.map((sub) => html`<tr><td>${sub.topic_filter}</td><td>${sub.qos}</td><td>${sub.no_local ? 'yes' : 'no'}</td>
        <td>${sub.retain_as_published ? 'yes' : 'no'}</td><td>${sub.retain_handling}</td></tr>`)}</tbody></table></div>`}
    ${dialog}
  </section>`;
}
