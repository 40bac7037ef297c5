// Retained messages by topic prefix: the payload as text, JSON or hex, and delete (with a
// confirmation).
import { useState } from 'preact/hooks';
import { del, get, query } from '../api.js';
import { ErrorBox, Notice, fromBase64, html, num, showPayload, useConfirm, useLoad, when } from '../ui.js';

export function Retained() {
  const [draft, setDraft] = useState({ prefix: '', tenant: '' });
  const [filters, setFilters] = useState({ prefix: '', tenant: '' });
  const [mode, setMode] = useState('text');
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const [dialog, ask] = useConfirm();
  const list = useLoad(() => get(`/api/v1/retained${query({ ...filters, limit: 500 })}`), [filters]);
  const items = list.data ? list.data.items || list.data.retained || [] : [];

  const remove = (message) => ask(`Delete the retained message on ${message.topic}?`, 'Delete', async () => {
    setError(null);
    setNotice('');
    try {
      await del(`/api/v1/retained${query({ tenant: message.tenant, topic: message.topic })}`);
      setNotice(`retained message on ${message.topic} deleted`);
      list.reload();
    } catch (e) {
      setError(e);
    }
  });

  return html`<section>
    <h1>Retained messages</h1>
    <form class="filters" onSubmit=${(e) => { e.preventDefault(); setFilters({ ...draft }); }}>
      <label>Topic prefix <input name="prefix" data-testid="retained-prefix" value=${draft.prefix}
        onInput=${(e) => setDraft({ ...draft, prefix: e.target.value })} /></label>
      <label>Tenant <input name="tenant" data-testid="retained-tenant" value=${draft.tenant}
        onInput=${(e) => setDraft({ ...draft, tenant: e.target.value })} /></label>
      <button type="submit" class="primary" data-testid="retained-submit">Search</button>
      <fieldset class="segmented" data-testid="payload-mode"><legend>Payload as</legend>
        ${['text', 'json', 'hex'].map((m) => html`<label><input type="radio" name="mode" value=${m}
          checked=${mode === m} data-testid=${`payload-mode-${m}`} onChange=${() => setMode(m)} /> ${m.toUpperCase()}</label>`)}
      </fieldset>
    </form>
    <${ErrorBox} error=${error || list.error} />
    <${Notice} text=${notice} />
    <div class="table-wrap"><table data-testid="retained-table">
      <thead><tr><th>Topic</th><th>Tenant</th><th>QoS</th><th>Size</th><th>Payload</th><th>Stored</th><th></th></tr></thead>
      <tbody>${items.map((m) => {
        const shown = showPayload(fromBase64(m.payload), mode);
        return html`<tr data-testid=${`retained-row-${m.topic}`}>
          <td class="mono">${m.topic}</td><td>${m.tenant}</td><td>${m.qos}</td><td>${num(m.payload_size)} B</td>
          <td><pre class="payload" data-testid="retained-payload">${shown === null ? html`<span class="muted">(not ${mode === 'json' ? 'JSON' : 'UTF-8 text'}; try HEX)</span>` : shown}</pre></td>
          <td>${when(m.created_at)}</td>
          <td><button type="button" class="danger" data-testid="retained-delete" onClick=${() => remove(m)}>Delete</button></td>
        </tr>`;
      })}</tbody>
    </table></div>
    ${!list.loading && items.length === 0 ? html`<p class="muted" data-testid="no-retained">No retained message matches.</p>` : null}
    ${dialog}
  </section>`;
}
