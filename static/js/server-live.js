// The server page after a save: the worker's refresh runs in the background. Poll the JSON API
// until it has ended (connected after the save, or an error), then swap in the page's fresh
// overview and tools, so nobody has to reload. Gives up politely after a while.
import { apiFetch } from "./http.js";

const state = document.getElementById("refresh-state");
const since = new Date(state.dataset.since);
const deadline = Date.now() + 90_000;

function ended(server) {
  return Boolean(server.last_error) || (server.last_connected_at && new Date(server.last_connected_at) >= since);
}

async function fillIn() {
  const res = await fetch(location.pathname, { credentials: "same-origin" });
  const fresh = new DOMParser().parseFromString(await res.text(), "text/html");
  const live = fresh.getElementById("server-live");
  if (live) document.getElementById("server-live").replaceWith(live);
}

async function poll() {
  let server = null;
  try { server = await apiFetch(`/api/servers/${state.dataset.serverId}/`); } catch { /* try again */ }
  if (server && ended(server)) {
    await fillIn();
    state.className = `live-note ${server.last_error ? "error" : "ok"}`;
    state.textContent = server.last_error ? "The worker could not connect: see the error below." : "Connected: the tools below are fresh.";
    return;
  }
  if (Date.now() > deadline) {
    state.textContent = "No answer from a worker yet. Is a worker running? Press “Test connection & refresh” to try again.";
    return;
  }
  setTimeout(poll, 1000);
}

setTimeout(poll, 500);
