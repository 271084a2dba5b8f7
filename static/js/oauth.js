// The server page's OAuth card: Sign in asks a worker to discover the authorization server and
// register a client, then sends this tab there; the authorization server sends it back to
// /oauth/callback/, which returns here with the outcome. Sign out forgets this user's tokens.
import { apiFetch } from "./http.js";

const card = document.getElementById("oauth");
const serverId = card.dataset.serverId;
const state = document.getElementById("oauth-state");

// Only the authorization code grant has a sign-in button; the grants without a person have none.
document.getElementById("oauth-sign-in")?.addEventListener("click", async (ev) => {
  ev.target.disabled = true;
  state.textContent = "finding the authorization server…";
  try {
    const answer = await apiFetch(`/api/servers/${serverId}/oauth/sign-in/`, { method: "POST" });
    state.textContent = "going to the authorization server…";
    window.location.assign(answer.authorization_url);
  } catch (err) {
    state.className = "error";
    state.textContent = `${err.message} (the steps are below after a reload)`;
    ev.target.disabled = false;
  }
});

document.getElementById("oauth-sign-out")?.addEventListener("click", async () => {
  try {
    await apiFetch(`/api/servers/${serverId}/oauth/sign-out/`, { method: "POST" });
    window.location.reload();
  } catch (err) { state.className = "error"; state.textContent = err.message; }
});
