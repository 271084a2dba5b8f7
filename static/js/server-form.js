// The server form: show only the fields the chosen transport (and authorization) uses.
const transport = document.getElementById("id_transport");
const auth = document.getElementById("id_auth");
const stdioOnly = ["command", "args", "env", "cwd"], httpOnly = ["url", "headers", "auth"];
const oauthOnly = ["oauth_client_id", "oauth_client_secret", "oauth_scope", "oauth_grant", "oauth_client_auth", "oauth_private_key",
  "oauth_assertion", "oauth_assertion_file", "oauth_idp_token_endpoint", "oauth_idp_client_id", "oauth_idp_client_secret", "oauth_dpop"];
function sync() {
  const stdio = transport.value === "stdio";
  stdioOnly.forEach(n => document.querySelector(`.field-${n}`).hidden = !stdio);
  httpOnly.forEach(n => document.querySelector(`.field-${n}`).hidden = stdio);
  oauthOnly.forEach(n => document.querySelector(`.field-${n}`).hidden = stdio || auth.value !== "oauth");
}
transport.addEventListener("change", sync);
auth.addEventListener("change", sync);
sync();
