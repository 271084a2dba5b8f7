// Runs before the ext-apps bundle (a classic script, so before any module): zod, inside that
// bundle, would probe `new Function("")` to decide whether to compile its parsers, which the
// page's Content-Security-Policy (no 'unsafe-eval') refuses and reports. The bundled zod reads
// this global config when it loads; jitless parsing gives the same results without eval.
globalThis.__zod_globalConfig = Object.assign(globalThis.__zod_globalConfig || {}, { jitless: true });
