// A form generated from a tool's input JSON Schema: strings, numbers, integers, booleans,
// enums, arrays, nested objects, required fields and defaults. Anything it cannot model as
// inputs (unions, nested arrays of objects) falls back to a JSON textarea for that field.

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v === true ? "" : v);
  }
  children.flat().forEach(c => c && node.append(c));
  return node;
}

function typeOf(schema) {
  if (!schema || typeof schema !== "object") return "json";
  if (Array.isArray(schema.enum)) return "enum";
  let t = schema.type;
  if (Array.isArray(t)) t = t.filter(x => x !== "null")[0];
  if (!t && schema.properties) t = "object";
  if (["string", "number", "integer", "boolean", "object", "array"].includes(t)) return t;
  return "json";
}

function field(name, schema, required, path) {
  const type = typeOf(schema);
  const id = `arg-${path.join("-")}`;
  const label = el("label", { for: id }, el("span", { text: name }), required ? el("span", { class: "required", text: " *" }) : null,
    schema.description ? el("span", { class: "help", text: ` ${schema.description}` }) : null);
  const wrap = el("div", { class: `schema-field type-${type}`, "data-name": name });
  let get, set;
  const dflt = schema.default;

  if (type === "object") {
    const inner = build(schema, path);
    const fs = el("fieldset", {}, el("legend", { text: name + (required ? " *" : "") }), inner.node);
    wrap.append(fs);
    return { node: wrap, get: (opts) => inner.getValue(opts), set: v => inner.setValue(v || {}), type };
  }
  if (type === "boolean") {
    const input = el("input", { type: "checkbox", id, name });
    input.checked = dflt === true;
    wrap.append(el("label", {}, input, ` ${name}`, schema.description ? el("span", { class: "help", text: ` ${schema.description}` }) : null));
    return { node: wrap, get: () => input.checked, set: v => { input.checked = !!v; }, type, touched: () => true };
  }
  let input;
  if (type === "enum") {
    input = el("select", { id, name }, required ? null : el("option", { value: "", text: "—" }),
      schema.enum.map(v => el("option", { value: JSON.stringify(v), text: String(v) })));
    if (dflt !== undefined) input.value = JSON.stringify(dflt);
    get = () => input.value === "" ? undefined : JSON.parse(input.value);
    set = v => { input.value = v === undefined ? "" : JSON.stringify(v); };
  } else if (type === "number" || type === "integer") {
    input = el("input", { type: "number", id, name, step: type === "integer" ? "1" : "any", min: schema.minimum, max: schema.maximum });
    if (dflt !== undefined) input.value = dflt;
    get = () => {
      if (input.value === "") return undefined;
      const n = Number(input.value);
      if (Number.isNaN(n) || (type === "integer" && !Number.isInteger(n))) throw new Error(`${name} must be ${type === "integer" ? "an integer" : "a number"}`);
      return n;
    };
    set = v => { input.value = v ?? ""; };
  } else if (type === "string") {
    const long = (schema.maxLength ?? 0) > 200 || schema.format === "textarea";
    input = long ? el("textarea", { id, name, rows: 3 }) : el("input", { type: "text", id, name, placeholder: schema.format || "" });
    if (dflt !== undefined) input.value = dflt;
    get = () => input.value === "" ? undefined : input.value;
    set = v => { input.value = v ?? ""; };
  } else if (type === "array" && ["string", "number", "integer"].includes(typeOf(schema.items || {}))) {
    const itemType = typeOf(schema.items);
    input = el("textarea", { id, name, rows: 3, placeholder: "one item per line" });
    if (Array.isArray(dflt)) input.value = dflt.join("\n");
    get = () => {
      if (input.value.trim() === "") return undefined;
      return input.value.split("\n").filter(s => s !== "").map(s => {
        if (itemType === "string") return s;
        const n = Number(s);
        if (Number.isNaN(n)) throw new Error(`${name}: ${JSON.stringify(s)} is not a number`);
        return n;
      });
    };
    set = v => { input.value = Array.isArray(v) ? v.join("\n") : ""; };
  } else {
    input = el("textarea", { id, name, rows: 3, class: "json", placeholder: "JSON" });
    if (dflt !== undefined) input.value = JSON.stringify(dflt, null, 2);
    get = () => {
      if (input.value.trim() === "") return undefined;
      try { return JSON.parse(input.value); } catch (e) { throw new Error(`${name}: ${e.message}`); }
    };
    set = v => { input.value = v === undefined ? "" : JSON.stringify(v, null, 2); };
  }
  label.append(input);
  wrap.append(label);
  return { node: wrap, get, set, type };
}

function build(schema, path = []) {
  const props = schema.properties || {};
  const required = new Set(schema.required || []);
  const node = el("div", { class: "schema-object" });
  const fields = {};
  for (const [name, sub] of Object.entries(props)) {
    const f = field(name, sub || {}, required.has(name), [...path, name]);
    fields[name] = f;
    node.append(f.node);
  }
  if (!Object.keys(props).length && path.length === 0) node.append(el("p", { class: "muted", text: "This tool takes no arguments." }));
  return {
    node,
    // lenient: skip missing required fields and unparsable values (for showing a draft as JSON).
    getValue({ lenient = false } = {}) {
      const out = {};
      for (const [name, f] of Object.entries(fields)) {
        let v;
        try { v = f.type === "object" ? f.get({ lenient }) : f.get(); }
        catch (err) { if (lenient) continue; throw err; }
        if (f.type === "object" && v && !Object.keys(v).length && !required.has(name)) continue;
        if (f.type === "boolean" && !required.has(name) && v === false && (props[name] || {}).default === undefined) continue;
        if (v === undefined) {
          if (required.has(name) && !lenient) throw new Error(`${[...path, name].join(".")} is required`);
          continue;
        }
        out[name] = v;
      }
      return out;
    },
    setValue(value) { for (const [name, f] of Object.entries(fields)) f.set(value?.[name]); },
  };
}

export function renderSchemaForm(container, schema) {
  const form = build(schema || {});
  container.replaceChildren(form.node);
  return form;
}
