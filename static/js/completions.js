// Suggestions while typing a prompt argument or a resource-template variable: the server's
// `completion/complete` (POST /api/servers/{id}/complete/), debounced, shown as a <datalist>
// under the field. The arguments already filled in the same form go along as context. A server
// that does not offer completions answers `supported: false` and the form stops asking, quietly.
import { apiFetch } from "./http.js";

const DEBOUNCE_MS = 250;
let lists = 0;

function suggest(form, input, argument, ref, fieldsOf) {
  const list = document.createElement("datalist");
  list.id = `completions-${++lists}`;
  input.setAttribute("list", list.id);
  input.setAttribute("autocomplete", "off");
  input.after(list);
  let timer = null, asked = 0;
  const ask = async () => {
    if (form.dataset.completions === "off") return;
    const mine = ++asked;
    const context = {};
    for (const [name, field] of fieldsOf()) if (field !== input && field.value) context[name] = field.value;
    let answer;
    try {
      answer = await apiFetch(`/api/servers/${form.dataset.server}/complete/`, {
        method: "POST", body: { ref, argument, value: input.value, context },
      });
    } catch (err) {
      console.warn("completion/complete failed:", err.message);
      return;
    }
    if (mine !== asked) return; // a newer keystroke asked again meanwhile
    if (!answer.supported) { form.dataset.completions = "off"; return; }
    list.replaceChildren(...answer.values.map(v => Object.assign(document.createElement("option"), { value: v })));
    input.dataset.suggestions = String(answer.values.length);
  };
  const later = () => { clearTimeout(timer); timer = setTimeout(ask, DEBOUNCE_MS); };
  input.addEventListener("input", later);
  input.addEventListener("focus", later);
}

for (const form of document.querySelectorAll("form.prompt-form[data-server]")) {
  const fields = () => [...form.querySelectorAll("input[name^='arg_']")].map(i => [i.name.slice(4), i]);
  for (const [name, input] of fields()) {
    suggest(form, input, name, { type: "ref/prompt", name: form.dataset.prompt }, fields);
  }
}

for (const form of document.querySelectorAll("form.template-form[data-server]")) {
  const fields = () => [...form.querySelectorAll("input[data-var]")].map(i => [i.dataset.var, i]);
  for (const [name, input] of fields()) {
    suggest(form, input, name, { type: "ref/resource", uri: form.dataset.template }, fields);
  }
}
