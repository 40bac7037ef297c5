// Credentials: list by tenant, create, edit (password, tenant, client type, client id
// pattern, ACLs) and delete. The API's 400 blames a field: its message is shown there.
import { useState } from 'preact/hooks';
import { del, get, post, put, query } from '../api.js';
import { ErrorBox, Field, Notice, html, splitList, useConfirm, useLoad } from '../ui.js';

const BLANK = {
  username: '', password: '', tenant: 'default', client_type: 'DEVICE',
  client_id_pattern: '', publish_acl: '', subscribe_acl: '',
};

function formOf(credential) {
  return {
    username: credential.username,
    password: '',
    tenant: credential.tenant,
    client_type: credential.client_type,
    client_id_pattern: credential.client_id_pattern || '',
    publish_acl: credential.publish_acl.join('\n'),
    subscribe_acl: credential.subscribe_acl.join('\n'),
  };
}

function bodyOf(form, creating) {
  const body = {
    tenant: form.tenant,
    client_type: form.client_type,
    client_id_pattern: form.client_id_pattern === '' ? null : form.client_id_pattern,
    publish_acl: splitList(form.publish_acl),
    subscribe_acl: splitList(form.subscribe_acl),
  };
  if (creating) body.username = form.username;
  if (creating || form.password !== '') body.password = form.password;
  return body;
}

export function Credentials() {
  const [tenant, setTenant] = useState('');
  const list = useLoad(() => get(`/api/v1/credentials${query({ tenant })}`), [tenant]);
  const [form, setForm] = useState(null);
  const [editing, setEditing] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const [dialog, ask] = useConfirm();
  const items = list.data ? list.data.credentials || [] : [];

  const open = (credential) => {
    setError(null);
    setNotice('');
    setEditing(credential ? credential.username : null);
    setForm(credential ? formOf(credential) : { ...BLANK });
  };
  const save = async (e) => {
    e.preventDefault();
    setError(null);
    try {
      if (editing) await put(`/api/v1/credentials/${encodeURIComponent(editing)}`, bodyOf(form, false));
      else await post('/api/v1/credentials', bodyOf(form, true));
      setNotice(`credential ${form.username} saved`);
      setForm(null);
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const remove = (username) => ask(`Delete the credential ${username}?`, 'Delete', async () => {
    setError(null);
    try {
      await del(`/api/v1/credentials/${encodeURIComponent(username)}`);
      setNotice(`credential ${username} deleted`);
      list.reload();
    } catch (err) {
      setError(err);
    }
  });
  const set = (key) => (value) => setForm({ ...form, [key]: value });

  return html`<section>
    <h1>Credentials</h1>
    <div class="toolbar">
      <label>Tenant <input data-testid="credentials-tenant" value=${tenant} placeholder="all"
        onChange=${(e) => setTenant(e.target.value)} /></label>
      <button type="button" class="primary" data-testid="credential-new" onClick=${() => open(null)}>New credential</button>
    </div>
    <${Notice} text=${notice} />
    ${!form && html`<${ErrorBox} error=${error} />`}
    ${form && html`<form class="card form" data-testid="credential-form" onSubmit=${save} novalidate>
      <h2>${editing ? `Edit ${editing}` : 'New credential'}</h2>
      <${ErrorBox} error=${error} testid="form-error" />
      <${Field} name="username" label="User name" value=${form.username} onInput=${set('username')} error=${error} disabled=${Boolean(editing)} />
      <${Field} name="password" label=${editing ? 'New password (empty: keep)' : 'Password'} type="password" value=${form.password} onInput=${set('password')} error=${error} autocomplete="new-password" />
      <${Field} name="tenant" label="Tenant" value=${form.tenant} onInput=${set('tenant')} error=${error} />
      <${Field} name="client_type" label="Client type" error=${error}>
        <select id="f-client_type" name="client_type" data-testid="field-client_type" value=${form.client_type}
          onChange=${(e) => set('client_type')(e.target.value)}>
          <option value="DEVICE">DEVICE</option><option value="APPLICATION">APPLICATION</option>
        </select>
      <//>
      <${Field} name="client_id_pattern" label="Client id pattern (empty: any)" value=${form.client_id_pattern} onInput=${set('client_id_pattern')} error=${error} />
      <${Field} name="publish_acl" label="Publish ACL (topic filters, one a line)" error=${error}>
        <textarea id="f-publish_acl" name="publish_acl" rows="3" data-testid="field-publish_acl" value=${form.publish_acl}
          onInput=${(e) => set('publish_acl')(e.target.value)}></textarea>
      <//>
      <${Field} name="subscribe_acl" label="Subscribe ACL (topic filters, one a line)" error=${error}>
        <textarea id="f-subscribe_acl" name="subscribe_acl" rows="3" data-testid="field-subscribe_acl" value=${form.subscribe_acl}
          onInput=${(e) => set('subscribe_acl')(e.target.value)}></textarea>
      <//>
      <div class="actions">
        <button type="button" data-testid="credential-cancel" onClick=${() => setForm(null)}>Cancel</button>
        <button type="submit" class="primary" data-testid="credential-save">Save</button>
      </div>
    </form>`}
    <${ErrorBox} error=${list.error} />
    <div class="table-wrap"><table data-testid="credential-table">
      <thead><tr><th>User name</th><th>Tenant</th><th>Type</th><th>Client id pattern</th><th>Publish ACL</th><th>Subscribe ACL</th><th></th></tr></thead>
      <tbody>${items.map((c) => html`<tr data-testid=${`credential-row-${c.username}`}>
        <td>${c.username}</td><td>${c.tenant}</td><td>${c.client_type}</td><td class="mono">${c.client_id_pattern || 'any'}</td>
        <td class="mono">${c.publish_acl.join(' ') || 'all'}</td><td class="mono">${c.subscribe_acl.join(' ') || 'all'}</td>
        <td class="row-actions"><button type="button" data-testid="credential-edit" onClick=${() => open(c)}>Edit</button>
          <button type="button" class="danger" data-testid="credential-delete" onClick=${() => remove(c.username)}>Delete</button></td>
      </tr>`)}</tbody>
    </table></div>
    ${!list.loading && !list.error && items.length === 0 ? html`<p class="muted" data-testid="no-credentials">No credentials${tenant ? ` in tenant ${tenant}` : ''}.</p>` : null}
    ${dialog}
  </section>`;
}
