// Top-level evaluation of the Workers bundle, and the first request's app construction, timed in a fresh
// Node process (V8, as workerd; the bundle's only workerd module, cloudflare:sockets, is imported lazily).
// Usage: node tests/perf/bench-worker-eval.mjs <bundle.js>   (tests/perf/bench-worker.ts builds it)
const bundle = process.argv[2];
const t0 = performance.now();
const mod = await import(bundle);
const evaluated = performance.now() - t0;
const env = {
  NODE_ENV: 'production',
  AUTH_SECRET: 'x'.repeat(20) + crypto.randomUUID(),
  AUTH_URL: 'https://auth.example.com',
  APP_URL: 'https://app.example.com',
  CORS_ORIGIN: 'https://app.example.com',
  DATABASE_URL: 'postgres://unused:unused@127.0.0.1:1/unused',
  RATE_LIMIT_ENABLED: 'false',
  LOG_LEVEL: 'error',
};
const ctx = { waitUntil() {}, passThroughOnException() {}, props: {} };
const t1 = performance.now();
const res = await mod.default.fetch(new Request('https://auth.example.com/api/session'), env, ctx);
await res.text();
const firstRequest = performance.now() - t1;
const t2 = performance.now();
await (await mod.default.fetch(new Request('https://auth.example.com/api/session'), env, ctx)).text();
const secondRequest = performance.now() - t2;
console.log(
  JSON.stringify({
    status: res.status,
    evaluatedMs: evaluated,
    firstRequestMs: firstRequest,
    secondRequestMs: secondRequest,
  }),
);
process.exit(0);
