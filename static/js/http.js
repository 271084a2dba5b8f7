// Small helpers for the JSON API and WebSockets, shared by the pages.

export function csrfToken() {
  const m = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
  return m ? decodeURIComponent(m[1]) : "";
}

export async function apiFetch(path, { method = "GET", body } = {}) {
  const res = await fetch(path, {
    method,
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await res.json(); } catch { data = null; }
  if (!res.ok) {
    const msg = (data && (data.error + (data.details ? `: ${data.details.join(" ")}` : ""))) || `${res.status} ${res.statusText}`;
    const err = new Error(msg);
    err.status = res.status; err.data = data;
    throw err;
  }
  return data;
}

export function wsUrl(path) {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  return `${proto}//${location.host}${path}`;
}

// A WebSocket that reconnects with backoff; `onOpen` runs on every (re)connection so the
// page can catch up from the database.
export function liveSocket(path, { onEvent, onOpen, onState } = {}) {
  let ws, delay = 500, closed = false;
  function connect() {
    ws = new WebSocket(wsUrl(path));
    ws.onopen = () => { delay = 500; onState?.("live"); onOpen?.(); };
    ws.onmessage = (m) => { try { onEvent?.(JSON.parse(m.data)); } catch (e) { console.error(e); } };
    ws.onclose = (ev) => {
      onState?.(ev.code >= 4400 ? "refused" : "reconnecting");
      if (!closed && ev.code < 4400) setTimeout(connect, delay = Math.min(delay * 2, 10000));
    };
  }
  connect();
  return { close() { closed = true; ws?.close(); }, get socket() { return ws; } };
}

export function pretty(value) {
  return JSON.stringify(value, null, 2);
}
