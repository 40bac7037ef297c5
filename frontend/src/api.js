// The admin API as the page uses it: JSON in and out, the CSRF token on every change, a
// 401 sends the browser to / (the login page), every other refusal becomes an ApiError
// carrying the API's message and the field it blames.

let csrfToken = null;

/** A refusal from the admin API: `status`, the API's `message` and `field` (or null). */
export class ApiError extends Error {
  constructor(status, message, field) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

/** The text of an error for a person: the API's message with its status. */
export function describe(error) {
  if (error instanceof ApiError) {
    const where = error.field ? ` (${error.field})` : '';
    return `${error.status}: ${error.message}${where}`;
  }
  return String(error && error.message ? error.message : error);
}

function loginExpired() {
  window.location.assign('/');
}

/** Send one request; resolve to the decoded JSON body (null when empty). */
export async function request(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD' && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      credentials: 'same-origin',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    throw new ApiError(0, `the broker cannot be reached: ${error.message}`, null);
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (response.status === 401) {
    loginExpired();
    throw new ApiError(401, (data && data.error) || 'login expired', (data && data.field) || null);
  }
  if (!response.ok) {
    const message = data && typeof data === 'object' && data.error ? data.error : `HTTP ${response.status}`;
    throw new ApiError(response.status, message, (data && data.field) || null);
  }
  return data;
}

export const get = (path) => request('GET', path);
export const post = (path, body) => request('POST', path, body);
export const put = (path, body) => request('PUT', path, body);
export const del = (path) => request('DELETE', path);

/** A query string of the non-empty values of `params` ('' when none). */
export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}

/** Who is logged in: {username, role, csrf_token}; keeps the token for later changes. */
export async function loadMe() {
  const me = await get('/api/v1/me');
  csrfToken = me.csrf_token || null;
  return me;
}

/** Log out (the server clears the session cookie) and go to the login page. */
export async function logout() {
  try {
    await fetch('/logout', {
      method: 'POST',
      credentials: 'same-origin',
      headers: csrfToken ? { 'X-CSRF-Token': csrfToken } : {},
    });
  } finally {
    loginExpired();
  }
}
