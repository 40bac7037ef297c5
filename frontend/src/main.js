// The dashboard: a header (who is logged in, theme toggle, log out), a navigation of hash
// routes and the view of the route. Reads only the admin API, /metrics and the history.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { loadMe, logout } from './api.js';
import { ErrorBox, html } from './ui.js';
import { Overview } from './views/overview.js';
import { Sessions } from './views/sessions.js';
import { Subscriptions } from './views/subscriptions.js';
import { Retained } from './views/retained.js';
import { Credentials } from './views/credentials.js';
import { Tenants } from './views/tenants.js';
import { Limits } from './views/limits.js';
import { Cluster } from './views/cluster.js';
import { Kafka } from './views/kafka.js';
import { MqttClient } from './views/mqtt.js';

const VIEWS = [
  ['overview', 'Overview', Overview],
  ['sessions', 'Sessions', Sessions],
  ['subscriptions', 'Subscriptions', Subscriptions],
  ['retained', 'Retained', Retained],
  ['credentials', 'Credentials', Credentials],
  ['tenants', 'Tenants', Tenants],
  ['limits', 'Node limits', Limits],
  ['cluster', 'Cluster', Cluster],
  ['kafka', 'Kafka', Kafka],
  ['mqtt', 'MQTT client', MqttClient],
];

/** The route of the location's hash: ['sessions', 'client-1'] for #/sessions/client-1. */
function currentRoute() {
  const parts = window.location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  const name = VIEWS.some(([key]) => key === parts[0]) ? parts[0] : 'overview';
  return [name, parts.slice(1).join('/')];
}

const THEME_KEY = 'mqttq-theme';

function applyTheme(theme) {
  if (theme === 'light' || theme === 'dark') document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}

function effectiveTheme() {
  const chosen = document.documentElement.dataset.theme;
  if (chosen) return chosen;
  return window.matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}

function App() {
  const [route, setRoute] = useState(currentRoute());
  const [me, setMe] = useState(null);
  const [error, setError] = useState(null);
  const [theme, setTheme] = useState(effectiveTheme());
  const [menuOpen, setMenuOpen] = useState(false);

  useEffect(() => {
    const onHash = () => { setRoute(currentRoute()); setMenuOpen(false); };
    window.addEventListener('hashchange', onHash);
    loadMe().then(setMe, setError);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);

  const toggleTheme = () => {
    const next = effectiveTheme() === 'dark' ? 'light' : 'dark';
    localStorage.setItem(THEME_KEY, next);
    applyTheme(next);
    setTheme(next);
  };

  const [name, arg] = route;
  const View = VIEWS.find(([key]) => key === name)[2];
  const readOnly = !me || me.role !== 'admin';
  return html`
    <a class="skip" href="#main">Skip to content</a>
    <header class="top">
      <button class="menu-button" aria-expanded=${menuOpen} aria-controls="nav"
        data-testid="menu-toggle" onClick=${() => setMenuOpen(!menuOpen)}>☰</button>
      <a class="brand" href="#/overview"><img src="/static/favicon.svg" alt="" width="22" height="22" /> mqttq</a>
      <span class="spacer"></span>
      ${me && html`<span class="who" data-testid="whoami">${me.username} · <span data-testid="role">${me.role}</span></span>`}
      <button type="button" data-testid="theme-toggle" aria-label="Switch to ${theme === 'dark' ? 'light' : 'dark'} theme"
        onClick=${toggleTheme}>${theme === 'dark' ? '☀ Light' : '☾ Dark'}</button>
      <button type="button" data-testid="logout" onClick=${logout}>Log out</button>
    </header>
    <div class="layout">
      <nav id="nav" class=${menuOpen ? 'open' : ''} aria-label="Views">
        <ul>
          ${VIEWS.map(([key, label]) => html`<li><a href=${`#/${key}`} data-testid=${`nav-${key}`}
            aria-current=${key === name ? 'page' : undefined}>${label}</a></li>`)}
        </ul>
      </nav>
      <main id="main" tabindex="-1" data-testid=${`view-${name}`}>
        <${ErrorBox} error=${error} />
        ${me && html`<${View} key=${name} arg=${arg} me=${me} readOnly=${readOnly} />`}
      </main>
    </div>`;
}

applyTheme(localStorage.getItem(THEME_KEY));
render(html`<${App} />`, document.getElementById('app'));
