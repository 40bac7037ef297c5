// Shared pieces of the views: the `html` template tag (htm on preact), an error box, form
// fields that show the API's error for their own field, a confirmation dialog, a loader
// hook, and formatting of numbers, times and payloads.
import { h } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import { describe } from './api.js';

export const html = htm.bind(h);

/** The message of `error` (an ApiError or any Error) in a role=alert box; nothing when null. */
export function ErrorBox({ error, testid = 'error' }) {
  if (!error) return null;
  return html`<div class="error-box" role="alert" data-testid=${testid}>${describe(error)}</div>`;
}

/** A notice of success (role=status). */
export function Notice({ text }) {
  if (!text) return null;
  return html`<div class="notice" role="status" data-testid="notice">${text}</div>`;
}

/**
 * A labelled input; `error` is the form's last ApiError: when it blames `name`, its message
 * is shown under this input (and the input is marked invalid).
 */
export function Field({ name, label, value, onInput, error, type = 'text', hint, children, ...rest }) {
  const id = `f-${name}`;
  const mine = error && error.field === name ? error.message : '';
  const control = children
    ? children
    : html`<input id=${id} name=${name} type=${type} value=${value ?? ''}
        aria-invalid=${mine ? 'true' : 'false'} aria-describedby=${`${id}-err`}
        data-testid=${`field-${name}`}
        onInput=${(e) => onInput(type === 'checkbox' ? e.target.checked : e.target.value)} ...${rest} />`;
  return html`<div class="field">
    <label for=${id}>${label}</label>
    ${control}
    ${hint ? html`<small class="muted">${hint}</small>` : null}
    <small id=${`${id}-err`} class="field-error" data-testid=${`field-error-${name}`}>${mine}</small>
  </div>`;
}

/**
 * A modal confirmation: `message`, a confirm button labelled `action`; resolves through
 * onConfirm/onCancel. Escape cancels; focus starts on Cancel.
 */
export function Confirm({ message, action, onConfirm, onCancel }) {
  const ref = useRef(null);
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    const cancel = dialog.querySelector('[data-testid="confirm-cancel"]');
    if (cancel) cancel.focus();
  }, []);
  return html`<dialog ref=${ref} class="confirm" data-testid="confirm"
      onCancel=${(e) => { e.preventDefault(); onCancel(); }}>
    <p>${message}</p>
    <div class="actions">
      <button type="button" data-testid="confirm-cancel" onClick=${onCancel}>Cancel</button>
      <button type="button" class="danger" data-testid="confirm-ok" onClick=${onConfirm}>${action}</button>
    </div>
  </dialog>`;
}

/** State for a Confirm: ask(message, action, run) opens it; `dialog` is the element or null. */
export function useConfirm() {
  const [pending, setPending] = useState(null);
  const ask = useCallback((message, action, run) => setPending({ message, action, run }), []);
  const dialog = pending
    ? html`<${Confirm} message=${pending.message} action=${pending.action}
        onCancel=${() => setPending(null)}
        onConfirm=${() => { const run = pending.run; setPending(null); run(); }} />`
    : null;
  return [dialog, ask];
}

/**
 * Load with `fn` now and whenever `deps` change (and every `every` ms when given):
 * {data, error, loading, reload}.
 */
export function useLoad(fn, deps, every) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    fn().then(
      (data) => live && setState({ data, error: null, loading: false }),
      (error) => live && setState((s) => ({ data: s.data, error, loading: false })),
    );
    return () => { live = false; };
  }, [...deps, tick]);
  useEffect(() => {
    if (!every) return undefined;
    const timer = setInterval(() => setTick((t) => t + 1), every);
    return () => clearInterval(timer);
  }, [every]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}

const numberFormat = new Intl.NumberFormat('en');

/** A number for a person: grouped digits, up to 2 decimals; '–' for null. */
export function num(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return '–';
  return numberFormat.format(Math.round(value * 100) / 100);
}

/** Seconds as "3d 4h", "5h 12m", "42s". */
export function duration(seconds) {
  if (seconds === null || seconds === undefined) return '–';
  const s = Math.floor(seconds);
  const d = Math.floor(s / 86400), hh = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  if (d) return `${d}d ${hh}h`;
  if (hh) return `${hh}h ${m}m`;
  if (m) return `${m}m ${s % 60}s`;
  return `${s}s`;
}

/** A unix time (seconds) as a local date and time; '–' for null. */
export function when(seconds) {
  if (seconds === null || seconds === undefined) return '–';
  return new Date(seconds * 1000).toLocaleString();
}

/** Bytes of a base64 text. */
export function fromBase64(text) {
  const raw = atob(text || '');
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i += 1) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

/** Bytes as text: 'text' (UTF-8, null when not UTF-8), 'json' (pretty, null when not JSON), 'hex'. */
export function showPayload(bytes, mode) {
  if (mode === 'hex') {
    return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join(' ');
  }
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
  if (mode === 'json') {
    try {
      return JSON.stringify(JSON.parse(text), null, 2);
    } catch {
      return null;
    }
  }
  return text;
}

/** Split a text of topic filters (commas or new lines) into a list. */
export function splitList(text) {
  return String(text || '').split(/[\n,]/).map((s) => s.trim()).filter(Boolean);
}
