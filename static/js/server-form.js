// The server form: show only the fields the chosen transport, authorization and OAuth grant use.
const transport = document.getElementById("id_transport");
const auth = document.getElementById("id_auth");
const grant = document.getElementById("id_oauth_grant");
// The OAuth fields only some grants use (tools/forms.py checks the same per grant); the others serve every grant.
const grantOnly = {
  oauth_private_key: ["client_credentials"],
  oauth_assertion: ["token_exchange", "jwt_bearer"],
  oauth_assertion_file: ["jwt_bearer"],
  oauth_idp_token_endpoint: ["token_exchange"], oauth_idp_client_id: ["token_exchange"], oauth_idp_client_secret: ["token_exchange"],
};
const stdioOnly = ["command", "args", "env", "cwd"], httpOnly = ["url", "headers", "auth"];
const oauthOnly = ["oauth_client_id", "oauth_client_secret", "oauth_scope", "oauth_grant", "oauth_client_auth", "oauth_private_key",
  "oauth_assertion", "oauth_assertion_file", "oauth_idp_token_endpoint", "oauth_idp_client_id", "oauth_idp_client_secret", "oauth_dpop"];
function sync() {
  const stdio = transport.value === "stdio";
  stdioOnly.forEach(n => document.querySelector(`.field-${n}`).hidden = !stdio);
  httpOnly.forEach(n => document.querySelector(`.field-${n}`).hidden = stdio);
  const oauth = !stdio && auth.value === "oauth";
  const chosen = grant.value || "authorization_code";
  oauthOnly.forEach(n => document.querySelector(`.field-${n}`).hidden = !oauth || (n in grantOnly && !grantOnly[n].includes(chosen)));
}
transport.addEventListener("change", sync);
auth.addEventListener("change", sync);
grant.addEventListener("change", sync);
sync();
