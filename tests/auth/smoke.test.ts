import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call } from '../support/http.js';
import { signedInUser } from '../support/users.js';

describe('smoke', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('signs up, verifies, signs in, reads the session', async () => {
    const user = await signedInUser(t);
    const res = await call(t, '/api/session', { jar: user.jar });
    expect(res.status).toBe(200);
    const body = await res.json();
    console.log(JSON.stringify(body), user.jar.names());
    expect(body.user.id).toBe(user.id);
  });
});
