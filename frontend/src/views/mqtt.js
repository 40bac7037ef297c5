// An MQTT client in the page (mqtt.js over the broker's WebSocket listener): connect with
// chosen credentials, subscribe, publish with QoS, retain and MQTT 5 properties, and see
// the messages arrive. It talks MQTT to the broker like any other client.
import { useEffect, useRef, useState } from 'preact/hooks';
import mqtt from 'mqtt';
import { get } from '../api.js';
import { ErrorBox, html } from '../ui.js';

const MAX_MESSAGES = 200;

function defaultUrl(node) {
  const scheme = window.location.protocol === 'https:' ? 'wss' : 'ws';
  const listeners = node && Array.isArray(node.listeners) ? node.listeners : [];
  const found = listeners.find((l) => l.name === scheme);
  const port = found ? found.port : scheme === 'wss' ? 8084 : 8083;
  return `${scheme}://${window.location.hostname}:${port}${(found && found.path) || '/mqtt'}`;
}

function userProperties(text) {
  const props = {};
  for (const line of text.split('\n')) {
    const at = line.indexOf('=');
    if (at > 0) props[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return props;
}

export function MqttClient() {
  const client = useRef(null);
  const [conn, setConn] = useState({
    url: '', clientId: `dashboard-${Math.random().toString(16).slice(2, 10)}`,
    username: '', password: '', version: '5', clean: true,
  });
  const [state, setState] = useState('disconnected');
  const [error, setError] = useState(null);
  const [subs, setSubs] = useState([]);
  const [sub, setSub] = useState({ filter: '#', qos: '0' });
  const [pub, setPub] = useState({
    topic: 'dashboard/test', payload: '', qos: '0', retain: false,
    contentType: '', expiry: '', responseTopic: '', user: '',
  });
  const [messages, setMessages] = useState([]);

  useEffect(() => {
    get('/api/v1/node').catch(() => null).then((node) => {
      setConn((c) => (c.url ? c : { ...c, url: defaultUrl(node) }));
    });
    return () => { if (client.current) client.current.end(true); };
  }, []);

  const connect = (e) => {
    e.preventDefault();
    setError(null);
    if (client.current) client.current.end(true);
    setSubs([]);
    const options = {
      clientId: conn.clientId,
      protocolVersion: Number(conn.version),
      clean: conn.clean,
      reconnectPeriod: 0,
      connectTimeout: 30000, // MQTT.js's default: a loaded host may take seconds to answer
    };
    if (conn.username) options.username = conn.username;
    if (conn.password) options.password = conn.password;
    setState('connecting');
    const c = mqtt.connect(conn.url, options);
    client.current = c;
    c.on('connect', () => c === client.current && setState('connected'));
    c.on('close', () => c === client.current && setState('disconnected'));
    c.on('error', (err) => c === client.current && setError(err));
    c.on('disconnect', (packet) => c === client.current
      && setError(new Error(`the broker disconnected us: reason code 0x${(packet.reasonCode || 0).toString(16)}`)));
    c.on('message', (topic, payload, packet) => {
      if (c !== client.current) return;
      const text = new TextDecoder().decode(payload);
      setMessages((list) => [{ topic, text, qos: packet.qos, retain: packet.retain, at: new Date() }, ...list].slice(0, MAX_MESSAGES));
    });
  };
  const disconnect = () => {
    if (client.current) client.current.end();
    setState('disconnected');
  };
  const subscribe = (e) => {
    e.preventDefault();
    setError(null);
    client.current.subscribe(sub.filter, { qos: Number(sub.qos) }, (err, granted) => {
      if (err) { setError(err); return; }
      const codes = (granted || []).map((g) => g.qos);
      if (codes.some((q) => q >= 0x80)) { setError(new Error(`subscription to ${sub.filter} refused (0x${codes[0].toString(16)})`)); return; }
      setSubs((list) => [...list.filter((s) => s.filter !== sub.filter), { filter: sub.filter, qos: codes[0] }]);
    });
  };
  const unsubscribe = (filter) => {
    client.current.unsubscribe(filter, () => setSubs((list) => list.filter((s) => s.filter !== filter)));
  };
  const publish = (e) => {
    e.preventDefault();
    setError(null);
    const options = { qos: Number(pub.qos), retain: pub.retain };
    if (conn.version === '5') {
      const properties = {};
      if (pub.contentType) properties.contentType = pub.contentType;
      if (pub.expiry) properties.messageExpiryInterval = Number(pub.expiry);
      if (pub.responseTopic) properties.responseTopic = pub.responseTopic;
      const user = userProperties(pub.user);
      if (Object.keys(user).length) properties.userProperties = user;
      options.properties = properties;
    }
    client.current.publish(pub.topic, pub.payload, options, (err) => {
      if (err) setError(err);
    });
  };

  const connected = state === 'connected';
  const c = (key) => (e) => setConn({ ...conn, [key]: e.target.type === 'checkbox' ? e.target.checked : e.target.value });
  const p = (key) => (e) => setPub({ ...pub, [key]: e.target.type === 'checkbox' ? e.target.checked : e.target.value });

  return html`<section>
    <h1>MQTT client</h1>
    <p class="muted">A client in this page, over the broker's WebSocket listener: it needs the credentials an MQTT client needs.</p>
    <${ErrorBox} error=${error} testid="mqtt-error" />
    <form class="card form grid-form" onSubmit=${connect} data-testid="mqtt-connect-form">
      <label class="wide">WebSocket URL <input data-testid="mqtt-url" value=${conn.url} onInput=${c('url')} /></label>
      <label>Client id <input data-testid="mqtt-client-id" value=${conn.clientId} onInput=${c('clientId')} /></label>
      <label>User name <input data-testid="mqtt-username" value=${conn.username} onInput=${c('username')} autocomplete="off" /></label>
      <label>Password <input type="password" data-testid="mqtt-password" value=${conn.password} onInput=${c('password')} autocomplete="off" /></label>
      <label>Protocol <select data-testid="mqtt-version" value=${conn.version} onChange=${c('version')}>
        <option value="5">MQTT 5.0</option><option value="4">MQTT 3.1.1</option><option value="3">MQTT 3.1</option></select></label>
      <label class="check"><input type="checkbox" checked=${conn.clean} onChange=${c('clean')} /> Clean start</label>
      <div class="actions wide">
        <span class=${`badge ${connected ? 'ok' : ''}`} data-testid="mqtt-state">${state}</span>
        <button type="submit" class="primary" data-testid="mqtt-connect">Connect</button>
        <button type="button" data-testid="mqtt-disconnect" disabled=${!client.current} onClick=${disconnect}>Disconnect</button>
      </div>
    </form>
    <div class="grid-2">
      <form class="card form" onSubmit=${subscribe} data-testid="mqtt-subscribe-form">
        <h2>Subscribe</h2>
        <label>Topic filter <input data-testid="mqtt-sub-filter" value=${sub.filter} onInput=${(e) => setSub({ ...sub, filter: e.target.value })} /></label>
        <label>QoS <select data-testid="mqtt-sub-qos" value=${sub.qos} onChange=${(e) => setSub({ ...sub, qos: e.target.value })}>
          <option>0</option><option>1</option><option>2</option></select></label>
        <button type="submit" class="primary" data-testid="mqtt-subscribe" disabled=${!connected}>Subscribe</button>
        <ul class="subs" data-testid="mqtt-subscriptions">${subs.map((s) => html`<li><span class="mono">${s.filter}</span> (QoS ${s.qos})
          <button type="button" onClick=${() => unsubscribe(s.filter)}>Unsubscribe</button></li>`)}</ul>
      </form>
      <form class="card form" onSubmit=${publish} data-testid="mqtt-publish-form">
        <h2>Publish</h2>
        <label>Topic <input data-testid="mqtt-pub-topic" value=${pub.topic} onInput=${p('topic')} /></label>
        <label>Payload <textarea rows="3" data-testid="mqtt-pub-payload" value=${pub.payload} onInput=${p('payload')}></textarea></label>
        <div class="row">
          <label>QoS <select data-testid="mqtt-pub-qos" value=${pub.qos} onChange=${p('qos')}><option>0</option><option>1</option><option>2</option></select></label>
          <label class="check"><input type="checkbox" data-testid="mqtt-pub-retain" checked=${pub.retain} onChange=${p('retain')} /> Retain</label>
        </div>
        <details><summary>MQTT 5 properties</summary>
          <label>Content type <input data-testid="mqtt-pub-content-type" value=${pub.contentType} onInput=${p('contentType')} /></label>
          <label>Message expiry (s) <input type="number" min="0" data-testid="mqtt-pub-expiry" value=${pub.expiry} onInput=${p('expiry')} /></label>
          <label>Response topic <input data-testid="mqtt-pub-response-topic" value=${pub.responseTopic} onInput=${p('responseTopic')} /></label>
          <label>User properties (key=value, one a line) <textarea rows="2" data-testid="mqtt-pub-user" value=${pub.user} onInput=${p('user')}></textarea></label>
        </details>
        <button type="submit" class="primary" data-testid="mqtt-publish" disabled=${!connected}>Publish</button>
      </form>
    </div>
    <h2>Messages <button type="button" class="small" onClick=${() => setMessages([])}>Clear</button></h2>
    <div class="table-wrap"><table data-testid="mqtt-messages">
      <thead><tr><th>Time</th><th>Topic</th><th>QoS</th><th>Retained</th><th>Payload</th></tr></thead>
      <tbody>${messages.map((m) => html`<tr data-testid="mqtt-message">
        <td>${m.at.toLocaleTimeString()}</td><td class="mono" data-testid="mqtt-message-topic">${m.topic}</td><td>${m.qos}</td>
        <td>${m.retain ? 'yes' : ''}</td><td><pre class="payload" data-testid="mqtt-message-payload">${m.text}</pre></td></tr>`)}</tbody>
    </table></div>
  </section>`;
}
