// A resource page's Subscribe / Unsubscribe, and the updates the server sends while subscribed.
//
// Subscribe asks the server, through a worker's connection, to say when the resource changes
// (resources/subscribe on 2025-11-25, subscriptions/listen on 2026-07-28). Each
// notifications/resources/updated reaches this page over the server's socket as `resource.updated`:
// the page lists it and reads the resource again, so what is shown is what the server has now.
import { apiFetch, liveSocket } from "./http.js";

const box = document.getElementById("subscription");
const state = document.getElementById("subscription-state");
const subscribe = document.getElementById("subscribe");
const unsubscribe = document.getElementById("unsubscribe");
const updates = document.getElementById("resource-updates");
const { serverId, uri, via } = box.dataset;
const api = `/api/servers/${serverId}/subscriptions/`;

function show(subscribed, note) {
  state.className = subscribed ? "ok" : "muted";
  state.textContent = note || (subscribed ? `Subscribed (${via}): updates show below as the server sends them.` : "Not subscribed.");
  if (subscribe) subscribe.hidden = subscribed;
  if (unsubscribe) unsubscribe.hidden = !subscribed;
}

async function change(method, button) {
  button.disabled = true;
  state.className = "muted";
  state.textContent = method === "POST" ? "Subscribing…" : "Unsubscribing…";
  try {
    const answer = await apiFetch(api, { method, body: { uri } });
    show(answer.subscribed, answer.subscribed ? `Subscribed (${answer.via}): updates show below as the server sends them.` : "");
  } catch (err) {
    show(method === "DELETE", "");
    state.className = "error";
    state.textContent = err.message;
  } finally {
    button.disabled = false;
  }
}

subscribe?.addEventListener("click", () => change("POST", subscribe));
unsubscribe?.addEventListener("click", () => change("DELETE", unsubscribe));

// Read the resource again: the page's own Read section, fetched and swapped in. An update that
// arrives during a read makes one more read after it (the first may have missed the change).
let reading = null;
let again = false;
async function swapRead() {
  const res = await fetch(location.href, { credentials: "same-origin" });
  const fresh = new DOMParser().parseFromString(await res.text(), "text/html").getElementById("resource-read");
  if (fresh) document.getElementById("resource-read").replaceWith(fresh);
}

function readAgain() {
  if (reading) { again = true; return reading; }
  reading = (async () => {
    do { again = false; await swapRead(); } while (again);
  })().finally(() => { reading = null; });
  return reading;
}

function updated(event) {
  const item = document.createElement("li");
  item.className = "resource-update";
  const when = new Date(event.at);
  item.textContent = `Updated at ${when.toLocaleTimeString()}: the server sent notifications/resources/updated; read again.`;
  updates.prepend(item);
  readAgain().catch((err) => { item.textContent += ` (could not read it again: ${err.message})`; });
}

liveSocket(`/ws/servers/${serverId}/`, {
  onEvent: (event) => { if (event.type === "resource.updated" && event.uri === uri) updated(event); },
});
