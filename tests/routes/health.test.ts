import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabaseProbe } from '../../src/routes/health.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { openTestDatabase } from '../support/database.js';
import { UUID_V4 } from '../support/http.js';

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
    expect(res.headers.get('x-request-id')).toMatch(UUID_V4);
  });
});

describe('database probe behind /api/health', () => {
  it('lets one successful check stand for a second, shares a check in flight, and never reuses a failure', async () => {
    const database = await openTestDatabase();
    let now = 0;
    const probe = createDatabaseProbe({ db: database.db, freshMs: 1000, now: () => now });
    const first = probe();
    expect(probe()).toBe(first); // a second check while the first is in flight waits for it
    await first;

    await database.close();
    now = 999;
    await expect(probe()).resolves.toBeUndefined(); // within a second of the success: no statement
    now = 1000;
    await expect(probe()).rejects.toThrow(); // past it: asked again, and the closed database fails
    await expect(probe()).rejects.toThrow(); // the failure was not kept as an answer either way
  });
});
