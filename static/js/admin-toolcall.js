// Highlight, in the full result, the lines under keys the projection removed.
(function () {
  const removed = JSON.parse(document.getElementById("removed-paths").textContent);
  const keys = new Set(removed.map(p => p.split(".").pop().replace(/\[\d+\]$/, "")).filter(k => k && k !== "text"));
  const pre = document.getElementById("full-json");
  if (!pre || !keys.size) return;
  const lines = pre.textContent.split("\n");
  pre.textContent = "";
  let depth = -1;
  for (const line of lines) {
    const indent = line.length - line.trimStart().length;
    const m = line.trim().match(/^"([^"]+)":/);
    if (depth >= 0 && indent <= depth && !/^[\]}]/.test(line.trim())) depth = -1;
    if (depth < 0 && m && keys.has(m[1])) depth = indent;
    const span = document.createElement("span");
    span.textContent = line + "\n";
    if (depth >= 0) span.className = "hl";
    if (depth >= 0 && indent === depth && /^[\]}]/.test(line.trim())) depth = -1;
    pre.append(span);
  }
})();
