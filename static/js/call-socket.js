// One WebSocket per page for every tool call it watches (/ws/calls/, tools/consumers.py
// CallsConsumer): a page pays one handshake, not one per call.
//
// watchCall(id, { onEvent, onOpen }) subscribes; every event names its tool_call_id and goes
// to that call's onEvent. Nothing is missed between the POST that started a call and its
// subscription: the server sends the call's current state (its result, if it has already
// ended) once it has joined the call's events. After a reconnect every watched call is
// subscribed again, which brings its state again. A watcher's onOpen (the page's catch-up on
// what is not in that state: logs, server requests) runs on the first event after each
// subscription, not when the subscription is sent: the server joins the call's events only
// after a visibility check, and a catch-up read before the join could miss a server request
// whose live event was also sent before it.
import { liveSocket } from "./http.js";

const watchers = new Map();  // tool call id -> { onEvent, onOpen, joined }
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
      for (const w of watchers.values()) w.joined = false;
      if (watchers.size) send({ subscribe: [...watchers.keys()] });
    },
    onState(state) { if (state !== "live") open = false; },
    onEvent(ev) {
      const id = ev.tool_call_id ?? ev.server_request?.tool_call_id;
      const w = watchers.get(id);
      if (!w) return;
      if (!w.joined && ev.type !== "calls.refused") { w.joined = true; w.onOpen?.(); }
      w.onEvent?.(ev);
    },
  });
}

export function watchCall(id, { onEvent, onOpen } = {}) {
  connect();
  watchers.set(id, { onEvent, onOpen, joined: false });
  if (open) send({ subscribe: [id] });
  return {
    close() {
      if (watchers.delete(id)) send({ unsubscribe: [id] });
    },
  };
}
