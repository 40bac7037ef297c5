// Node limits: this node's quota and its TCP connection rate, changed live (not written to
// broker.toml).
import { useEffect, useState } from 'preact/hooks';
import { get, put } from '../api.js';
import { ErrorBox, Field, Notice, html, useLoad } from '../ui.js';
import { QUOTA_FIELDS, quotaBody } from './quota.js';

const FIELDS = [...QUOTA_FIELDS, ['max_tcp_connection_rate', 'Max new TCP connections (/s)', 'any']];

export function Limits() {
  const limits = useLoad(() => get('/api/v1/limits'), []);
  const [form, setForm] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  useEffect(() => {
    if (limits.data) setForm(Object.fromEntries(FIELDS.map(([k]) => [k, String(limits.data.node[k] ?? '')])));
  }, [limits.data]);

  const save = async (e) => {
    e.preventDefault();
    setError(null);
    setNotice('');
    try {
      const answer = await put('/api/v1/limits', quotaBody(form, FIELDS.map(([k]) => k)));
      setForm(Object.fromEntries(FIELDS.map(([k]) => [k, String(answer.node[k] ?? '')])));
      setNotice('node limits applied');
    } catch (err) {
      setError(err);
    }
  };
  const set = (key) => (value) => setForm({ ...form, [key]: value });

  return html`<section>
    <h1>Node limits</h1>
    <p class="muted">Applied at once to this node; not written to broker.toml (a restart or SIGHUP reads the file again).</p>
    <${ErrorBox} error=${limits.error} />
    <${Notice} text=${notice} />
    ${form && html`<form class="card form" data-testid="limits-form" onSubmit=${save} novalidate>
      <${ErrorBox} error=${error} testid="form-error" />
      ${FIELDS.map(([key, label, step]) => html`<${Field} name=${key} label=${label} type="number" step=${step}
        value=${form[key]} onInput=${set(key)} error=${error} />`)}
      <div class="actions"><button type="submit" class="primary" data-testid="limits-save">Apply</button></div>
    </form>`}
  </section>`;
}
