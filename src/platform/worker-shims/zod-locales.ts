/**
 * Workers bundle only (wrangler.toml `alias`): stands in for zod's
 * `v4/locales/index.js`, the module behind `z.locales` / `core.locales`.
 * zod itself imports English directly (`config(en())`) and nothing here
 * switches locale, yet the namespace object `@hono/zod-openapi` hands to
 * `extendZodWithOpenApi(z)` keeps all ~65 locales in the bundle (~40 KiB
 * gzipped). Only `en` remains; `z.locales.fr` and the like are undefined on
 * Workers. Node (tsx, vitest) never sees this file.
 */
export { default as en } from 'zod/v4/locales/en.js';
