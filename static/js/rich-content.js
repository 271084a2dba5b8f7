// A tool result's content items as a person reads them: text, images and audio played from
// their data, resource links as links to the server's resource page, embedded resources with
// their MIME type, annotations as badges. Only for display: what the model was sent is the
// projection, untouched. Everything is built with DOM calls (no HTML strings), and media only
// from base64 `data:` URLs of image/ and audio/ types, which the page's CSP allows.

const SAFE_IMAGE = /^image\/(png|jpeg|gif|webp|bmp|svg\+xml|avif)$/i;
const SAFE_AUDIO = /^audio\/(wav|x-wav|wave|mpeg|mp3|ogg|webm|flac|aac|mp4)$/i;
const BASE64 = /^[A-Za-z0-9+/=\s]*$/;
const TEXT_SHOWN = 20_000;

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function bytesOf(base64) {
  return Math.floor((base64 || "").replace(/\s|=/g, "").length * 3 / 4);
}

function size(n) {
  return n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KB` : `${(n / 1024 / 1024).toFixed(1)} MB`;
}

function badges(annotations) {
  const out = [];
  if (!annotations || typeof annotations !== "object") return out;
  if (Array.isArray(annotations.audience)) out.push(el("span", "badge rc-audience", `audience: ${annotations.audience.join(", ")}`));
  if (typeof annotations.priority === "number") out.push(el("span", "badge rc-priority", `priority ${annotations.priority}`));
  if (typeof annotations.lastModified === "string") out.push(el("span", "badge", `modified ${annotations.lastModified}`));
  return out;
}

function media(kind, mime, data, label) {
  const ok = kind === "image" ? SAFE_IMAGE.test(mime || "") : SAFE_AUDIO.test(mime || "");
  if (!ok || typeof data !== "string" || !BASE64.test(data)) {
    return el("p", "muted", `${label}: ${mime || "no MIME type"}, ${size(bytesOf(data))} (not shown: not a ${kind} type this page plays)`);
  }
  const node = document.createElement(kind === "image" ? "img" : "audio");
  node.src = `data:${mime};base64,${data.replace(/\s/g, "")}`;
  if (kind === "image") { node.alt = label; node.className = "rc-image"; }
  else { node.controls = true; node.className = "rc-audio"; }
  return node;
}

function textBlock(text, mime) {
  let shown = String(text ?? "");
  if (/json/i.test(mime || "")) { try { shown = JSON.stringify(JSON.parse(shown), null, 2); } catch { /* as sent */ } }
  const pre = el("pre", "rc-text", shown.length > TEXT_SHOWN ? `${shown.slice(0, TEXT_SHOWN)}\n… (${size(shown.length)} in all: see the JSON)` : shown);
  return pre;
}

/** The link to a resource on its server's resource page (read there through a worker). */
function resourceHref(serverId, uri) {
  return serverId ? `/servers/${serverId}/resources/?uri=${encodeURIComponent(uri)}` : null;
}

function item(block, serverId) {
  const box = el("div", "rc-item");
  const head = el("div", "rc-head");
  const type = typeof block?.type === "string" ? block.type : "unknown";
  head.append(el("span", "badge rc-type", type), ...badges(block?.annotations));
  box.append(head);
  if (type === "text") {
    box.append(textBlock(block.text));
  } else if (type === "image" || type === "audio") {
    head.append(el("span", "muted", ` ${block.mimeType || ""} · ${size(bytesOf(block.data))}`));
    box.append(media(type, block.mimeType, block.data, type));
  } else if (type === "resource_link") {
    const href = resourceHref(serverId, block.uri);
    const link = el(href ? "a" : "code", "rc-link", block.title || block.name || block.uri);
    if (href) link.href = href;
    head.append(link);
    const about = [block.uri, block.mimeType, typeof block.size === "number" ? size(block.size) : null].filter(Boolean).join(" · ");
    box.append(el("div", "muted", about));
    if (block.description) box.append(el("div", "help", block.description));
  } else if (type === "resource" && block.resource && typeof block.resource === "object") {
    const r = block.resource;
    const href = resourceHref(serverId, r.uri);
    const link = el(href ? "a" : "code", "rc-link", r.uri || "(no uri)");
    if (href) link.href = href;
    head.append(link, el("span", "badge rc-mime", r.mimeType || "no MIME type"));
    if (typeof r.text === "string") box.append(textBlock(r.text, r.mimeType));
    else if (typeof r.blob === "string") {
      const kind = /^image\//i.test(r.mimeType || "") ? "image" : /^audio\//i.test(r.mimeType || "") ? "audio" : null;
      box.append(kind ? media(kind, r.mimeType, r.blob, r.uri || kind) : el("p", "muted", `binary, ${size(bytesOf(r.blob))}`));
    }
  } else {
    box.append(textBlock(JSON.stringify(block, null, 2)));
  }
  return box;
}

/** Render `result.content` into `container` (replacing what was there); false when there is none. */
export function renderContent(container, result, { serverId } = {}) {
  const items = Array.isArray(result?.content) ? result.content : [];
  container.replaceChildren(...items.map((block) => item(block, serverId)));
  container.hidden = items.length === 0;
  return items.length > 0;
}

// Above this, a result's JSON is not parsed again just to draw its items (tens of MB would
// stall the page); the JSON itself is still shown or offered for download.
const RENDER_LIMIT = 8 * 1024 * 1024;

/** Same, from the stored JSON text of a CallToolResult (as GET …/result/ answers). */
export function renderContentText(container, text, options = {}) {
  if (typeof text !== "string" || text.length > RENDER_LIMIT) { container.hidden = true; return false; }
  let result;
  try { result = JSON.parse(text); } catch { container.hidden = true; return false; }
  return renderContent(container, result, options);
}
