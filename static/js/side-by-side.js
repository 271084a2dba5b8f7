// Side by side: each column follows its conversation live over the chat's WebSocket (the same
// events the chat page gets) and redraws from the API (the database) on every event, so a column
// that reconnects catches up. Answers are the chat's sanitised Markdown (remote images behind a
// click, markdown-images.js); tool calls are one line each: open the chat for their cards and views.
import { apiFetch, liveSocket } from "./http.js";
import { renderChatMarkdown } from "./markdown-images.js";

const page = JSON.parse(document.getElementById("page-data").textContent);

function render(column, data) {
  column.querySelector('[data-role="status"]').textContent = data.status;
  column.querySelector('[data-role="status"]').className = `status ${data.status}`;
  const box = column.querySelector('[data-role="messages"]');
  const calls = new Map((data.tool_calls || []).map((c) => [c.id, c]));
  box.replaceChildren(...data.messages.map((m) => {
    const row = document.createElement("div");
    row.className = `message ${m.role}`;
    const role = document.createElement("span");
    role.className = "role";
    role.textContent = m.role;
    row.append(role);
    let text = m.text || "";
    if (m.role === "assistant" && m.tool_calls?.length) text += (text ? "\n" : "") + m.tool_calls.map((t) => `→ ${t.name}(${t.arguments})`).join("\n");
    if (m.role === "tool") {
      const call = calls.get(m.tool_call_id);
      text = call ? `${call.server_name}/${call.tool}: ${call.status}${call.projection?.text ? "\n" + call.projection.text : ""}` : text;
    }
    if (m.role === "assistant" && m.text) {
      const body = document.createElement("div");
      body.className = "markdown";
      body.replaceChildren(renderChatMarkdown(m.text));
      row.append(body);
      text = text.slice(m.text.length).replace(/^\n/, "");
    }
    if (text) {
      const plain = document.createElement("div");
      plain.className = "plain";
      plain.textContent = text;
      row.append(plain);
    }
    return row;
  }));
}

for (const id of page.conversations) {
  const column = document.querySelector(`[data-conversation="${id}"]`);
  let pending = null;
  const refresh = () => {
    if (pending) return;
    pending = setTimeout(async () => {
      pending = null;
      try { render(column, await apiFetch(`/api/conversations/${id}/`)); } catch (e) { console.error(e); }
    }, 150);
  };
  refresh();
  liveSocket(`/ws/conversations/${id}/`, { onEvent: refresh, onOpen: refresh });
}
