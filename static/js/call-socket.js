// One WebSocket per page for every tool call it watches (/ws/calls/, tools/consumers.py
// CallsConsumer): a page pays one handshake, not one per call.
//
// watchCall(id, { onEvent, onOpen }) subscribes; every event names its tool_call_id and goes
// to that call's onEvent. Nothing is missed between the POST that started a call and its
// subscription: the server sends the call's current state (its result, if it has already
// ended) once it has joined the call's events. After a reconnect every watched call is
// subscribed again, which brings its state again, and each watcher's onOpen runs so the page
// can catch up on what is not in that state (logs, server requests).
import { liveSocket } from "./http.js";

const watchers = new Map();  // tool call id -> { onEvent, onOpen }
let sock = null;
let open = false;

function send(message) {
  const ws = sock?.socket;
  if (open && ws?.readyState === WebSocket.OPEN) ws.send(JSON.stringify(message));
}

function connect() {
  if (sock) return;
  sock = liveSocket("/ws/calls/", {
    onOpen() {
      open = true;
      if (watchers.size) send({ subscribe: [...watchers.keys()] });
      for (const w of watchers.values()) w.onOpen?.();
    },
    onState(state) { if (state !== "live") open = false; },
    onEvent(ev) {
      const id = ev.tool_call_id ?? ev.server_request?.tool_call_id;
      watchers.get(id)?.onEvent?.(ev);
    },
  });
}

export function watchCall(id, { onEvent, onOpen } = {}) {
  connect();
  watchers.set(id, { onEvent, onOpen });
  if (open) { send({ subscribe: [id] }); onOpen?.(); }
  return {
    close() {
      if (watchers.delete(id)) send({ unsubscribe: [id] });
    },
  };
}
