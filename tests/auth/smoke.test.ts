import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call } from '../support/http.js';
import { signedUpUser } from '../support/users.js';

describe('smoke', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('signs up, verifies, signs in, creates an organization, reads the session with permissions', async () => {
    const user = await signedUpUser(t);
    const created = await call(t, '/api/auth/organization/create', {
      body: { name: 'Acme', slug: `acme-${crypto.randomUUID().slice(0, 8)}` },
      jar: user.jar,
    });
    const org = await created.json();
    expect(created.status, JSON.stringify(org)).toBe(200);
    const res = await call(t, '/api/session', { jar: user.jar });
    const body = await res.json();
    expect(body.session.activeOrganizationId).toBe(org.id);
    expect(body.permissions).toHaveLength(17);
  });
});
