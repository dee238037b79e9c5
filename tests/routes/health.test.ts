import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';

describe('GET /api/health', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('answers 200 { status: "ok" } while the database answers', async () => {
    const res = await t.app.request('/api/health');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });

  it('answers 503 in the contract shape when the database does not answer', async () => {
    const broken = await createTestApp();
    await broken.database.close();
    const res = await broken.app.request('/api/health');
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ code: 'SERVICE_UNAVAILABLE', message: 'Database unavailable' });
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});
