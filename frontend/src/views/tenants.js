// Tenants with their quotas and usage: create or edit (a PUT of the quota fields), delete.
import { useState } from 'preact/hooks';
import { del, get, put } from '../api.js';
import { ErrorBox, Field, Notice, html, num, useConfirm, useLoad } from '../ui.js';
import { QUOTA_FIELDS, quotaBody } from './quota.js';

export function Tenants() {
  const list = useLoad(() => get('/api/v1/tenants'), []);
  const [form, setForm] = useState(null);
  const [editing, setEditing] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const [dialog, ask] = useConfirm();
  const tenants = list.data ? list.data.tenants : [];
  const defaults = list.data ? list.data.default_quota : {};

  const open = (tenant) => {
    setError(null);
    setNotice('');
    setEditing(tenant ? tenant.name : null);
    const quota = tenant ? tenant.quota : defaults;
    setForm({ name: tenant ? tenant.name : '', ...Object.fromEntries(QUOTA_FIELDS.map(([k]) => [k, String(quota[k] ?? '')])) });
  };
  const save = async (e) => {
    e.preventDefault();
    setError(null);
    try {
      const name = editing || form.name;
      if (!name) throw Object.assign(new Error('required'), { status: 400, field: 'name' });
      await put(`/api/v1/tenants/${encodeURIComponent(name)}`, quotaBody(form, QUOTA_FIELDS.map(([k]) => k)));
      setNotice(`tenant ${name} saved`);
      setForm(null);
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const remove = (name) => ask(`Delete the tenant ${name}? Its clients fall back to the default quota.`, 'Delete', async () => {
    setError(null);
    try {
      await del(`/api/v1/tenants/${encodeURIComponent(name)}`);
      setNotice(`tenant ${name} deleted`);
      list.reload();
    } catch (err) {
      setError(err);
    }
  });
  const set = (key) => (value) => setForm({ ...form, [key]: value });

  return html`<section>
    <h1>Tenants</h1>
    <div class="toolbar">
      <button type="button" class="primary" data-testid="tenant-new" onClick=${() => open(null)}>New tenant</button>
    </div>
    <${Notice} text=${notice} />
    ${!form && html`<${ErrorBox} error=${error} />`}
    ${form && html`<form class="card form" data-testid="tenant-form" onSubmit=${save} novalidate>
      <h2>${editing ? `Edit ${editing}` : 'New tenant'}</h2>
      <${ErrorBox} error=${error} testid="form-error" />
      <${Field} name="name" label="Name" value=${form.name} onInput=${set('name')} error=${error} disabled=${Boolean(editing)} />
      ${QUOTA_FIELDS.map(([key, label, step]) => html`<${Field} name=${key} label=${label} type="number" step=${step}
        value=${form[key]} onInput=${set(key)} error=${error} />`)}
      <div class="actions">
        <button type="button" data-testid="tenant-cancel" onClick=${() => setForm(null)}>Cancel</button>
        <button type="submit" class="primary" data-testid="tenant-save">Save</button>
      </div>
    </form>`}
    <${ErrorBox} error=${list.error} />
    <div class="table-wrap"><table data-testid="tenant-table">
      <thead><tr><th>Tenant</th>${QUOTA_FIELDS.map(([, label]) => html`<th>${label}</th>`)}<th>Connections</th><th>Sessions</th><th>Topics</th><th></th></tr></thead>
      <tbody>${tenants.map((t) => html`<tr data-testid=${`tenant-row-${t.name}`}>
        <td>${t.name}</td>${QUOTA_FIELDS.map(([key]) => html`<td>${num(t.quota[key])}</td>`)}
        <td>${num(t.usage.connections)}</td><td>${num(t.usage.sessions)}</td><td>${num(t.usage.topics)}</td>
        <td class="row-actions"><button type="button" data-testid="tenant-edit" onClick=${() => open(t)}>Edit</button>
          <button type="button" class="danger" data-testid="tenant-delete" onClick=${() => remove(t.name)}>Delete</button></td>
      </tr>`)}</tbody>
    </table></div>
    <p class="muted small">Tenants without a row of their own have the default quota: ${QUOTA_FIELDS.map(([k]) => `${k} ${num(defaults[k])}`).join(', ')}.</p>
    ${dialog}
  </section>`;
}
