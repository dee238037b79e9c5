import { Hono } from 'hono';

/** The Workers ceiling: a bare Hono app with one JSON route, run by the same wrangler dev / workerd as the service. */
const app = new Hono();
app.get('/json', (c) => c.json({ status: 'ok' }));

export default { fetch: app.fetch };
