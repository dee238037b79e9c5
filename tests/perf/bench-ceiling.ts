import { serve } from '@hono/node-server';
import { Hono } from 'hono';

/** The ceiling: a bare Hono app with one JSON route on the same adapter, in its own process like the service. */
const app = new Hono();
app.get('/json', (c) => c.json({ status: 'ok' }));
serve({ fetch: app.fetch, port: Number(process.argv[2] ?? 4100), hostname: '127.0.0.1' }, (info) => {
  console.log(JSON.stringify({ event: 'server.listening', port: info.port }));
});
