// The server form: show only the fields the chosen transport uses.
const transport = document.getElementById("id_transport");
const stdioOnly = ["command", "args", "env", "cwd"], httpOnly = ["url", "headers"];
function sync() {
  const stdio = transport.value === "stdio";
  stdioOnly.forEach(n => document.querySelector(`.field-${n}`).hidden = !stdio);
  httpOnly.forEach(n => document.querySelector(`.field-${n}`).hidden = stdio);
}
transport.addEventListener("change", sync); sync();
