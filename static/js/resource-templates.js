// Template forms: one input per {variable}; the URI is filled in on submit (RFC 6570 level 1).
document.querySelectorAll(".template-form").forEach(form => {
  const tpl = form.dataset.template;
  const names = [...tpl.matchAll(/\{([^}]+)\}/g)].map(m => m[1]);
  const box = form.querySelector(".template-vars");
  names.forEach(n => { const l = document.createElement("label"); l.textContent = n; const i = document.createElement("input"); i.dataset.var = n; i.required = true; l.append(i); box.append(l); });
  form.addEventListener("submit", () => {
    let uri = tpl;
    form.querySelectorAll("[data-var]").forEach(i => { uri = uri.replace(`{${i.dataset.var}}`, encodeURIComponent(i.value)); });
    form.querySelector("input[name=uri]").value = uri;
    form.querySelectorAll("[data-var]").forEach(i => i.removeAttribute("name"));
  });
});
