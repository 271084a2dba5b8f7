// The admin's tool-call page: the full result's content items rendered (images, audio, links,
// embedded resources, annotations) above its JSON, by the same code as the other pages.
import { renderContentText } from "./rich-content.js";

const pre = document.getElementById("full-json");
const box = document.getElementById("full-rendered");
if (pre && box) renderContentText(box, pre.textContent, { serverId: Number(box.dataset.serverId) || null });
