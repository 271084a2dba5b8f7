// Forms with data-confirm ask before they submit (an inline onsubmit would break the CSP).
document.addEventListener("submit", (ev) => {
  const question = ev.target.dataset?.confirm;
  if (question && !window.confirm(question)) ev.preventDefault();
}, true);
