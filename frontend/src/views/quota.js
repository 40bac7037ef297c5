// The quota fields shared by tenants and node limits, as the API names them.
export const QUOTA_FIELDS = [
  ['max_connections_per_node', 'Max connections per node', '1'],
  ['max_connection_rate', 'Max connection rate (/s)', 'any'],
  ['max_topics', 'Max retained topics', '1'],
  ['max_sessions', 'Max sessions', '1'],
  ['max_publish_rate', 'Max publish rate (/s)', 'any'],
];

/** The form's text values as the API's numbers (a value that is not a number is sent as typed, for the API to name). */
export function quotaBody(form, keys) {
  const body = {};
  for (const key of keys) {
    const text = String(form[key] ?? '').trim();
    if (text === '') continue;
    const value = Number(text);
    body[key] = Number.isFinite(value) ? value : text;
  }
  return body;
}
