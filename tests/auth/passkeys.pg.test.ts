import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectError, expectStatus } from '../support/http.js';
import { accountAuditRows } from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/**
 * README "Multi-factor authentication", passkeys: the ceremonies' options (RP id: the host of APP_URL)
 * name the configured relying party and require user verification; what
 * would weaken them is refused. Registering and signing in with a real
 * authenticator happens in the browser suite (Chromium's virtual authenticator).
 */
describe('passkeys', () => {
  let t: TestApp;
  let user: Awaited<ReturnType<typeof signedInUser>>;
  beforeAll(async () => {
    t = await createTestApp({
      env: { PASSKEY_RP_NAME: 'Acme' },
    });
    user = await signedInUser(t);
  });
  afterAll(() => t?.close());

  it('registration options name PASSKEY_RP_ID and PASSKEY_RP_NAME and require user verification', async () => {
    const options = await expectStatus<{
      rp: { id: string; name: string };
      user: { name: string };
      challenge: string;
      authenticatorSelection: { userVerification: string };
    }>(await call(t, '/api/auth/passkey/generate-register-options', { jar: user.jar }), 200);
    expect(options.rp).toEqual({ id: 'localhost', name: 'Acme' });
    expect(options.user.name).toBe(user.email);
    expect(options.challenge.length).toBeGreaterThan(20);
    expect(options.authenticatorSelection.userVerification).toBe('required');
  });

  it('needs a session to register; sign-in options are public and name the RP', async () => {
    expect((await call(t, '/api/auth/passkey/generate-register-options')).status).toBe(401);
    const options = await expectStatus<{ rpId: string }>(
      await call(t, '/api/auth/passkey/generate-authenticate-options'),
      200,
    );
    expect(options.rpId).toBe('localhost');
  });

  it('refuses a passkey-created session, extra WebAuthn context and forged credentials, never with a 500', async () => {
    await expectError(
      await call(t, '/api/auth/passkey/verify-registration', {
        body: { response: { id: 'x' }, createSession: true },
        jar: user.jar,
      }),
      400,
      'VALIDATION_ERROR',
    );
    await expectError(
      await call(t, '/api/auth/passkey/generate-register-options?context=evil', { jar: user.jar }),
      400,
      'VALIDATION_ERROR',
    );
    const forged = await call(t, '/api/auth/passkey/verify-registration', {
      body: { response: { id: 'x', rawId: 'x', type: 'public-key', response: {} } },
      jar: user.jar,
    });
    await expectError(forged, 400, 'FAILED_TO_VERIFY_REGISTRATION');
    const signIn = await call(t, '/api/auth/passkey/verify-authentication', {
      body: { response: { id: 'nobody', rawId: 'nobody', type: 'public-key', response: {} } },
    });
    expect(signIn.status).toBeGreaterThanOrEqual(400);
    expect(signIn.status).toBeLessThan(500);
    expect(signIn.headers.getSetCookie().some((c) => /session_token=[^;]/.test(c))).toBe(false);
  });

  it("lists, renames and deletes only the caller's own passkeys (deletion audited)", async () => {
    const other = await signedInUser(t);
    const [mine, theirs] = await t.database.withOwner((owner) =>
      Promise.all(
        [user.id, other.id].map((userId) =>
          owner
            .insertInto('passkeys')
            .values({
              user_id: userId,
              name: 'Key',
              public_key: 'cHVibGlj',
              credential_id: `credential-${crypto.randomUUID()}`,
              counter: 0,
              device_type: 'singleDevice',
              backed_up: false,
            })
            .returning('id')
            .executeTakeFirstOrThrow(),
        ),
      ),
    );
    const listed = await expectStatus<{ id: string }[]>(
      await call(t, '/api/auth/passkey/list-user-passkeys', { jar: user.jar }),
      200,
    );
    expect(listed.map((p) => p.id)).toEqual([mine!.id]);
    const rename = await call(t, '/api/auth/passkey/update-passkey', {
      body: { id: mine!.id, name: 'Work laptop' },
      jar: user.jar,
    });
    expect(rename.status).toBe(200);
    // Another user's passkey answers as an unknown one does (docs/api.md "Errors": 404, never revealing it exists).
    const stranger = await call(t, '/api/auth/passkey/delete-passkey', { body: { id: theirs!.id }, jar: user.jar });
    const unknown = await call(t, '/api/auth/passkey/delete-passkey', {
      body: { id: crypto.randomUUID() },
      jar: user.jar,
    });
    for (const refused of [stranger, unknown]) {
      expect(await expectStatus(refused, 404)).toEqual({ code: 'NOT_FOUND', message: 'Passkey not found' });
    }
    const kept = await t.database.withOwner((owner) =>
      owner.selectFrom('passkeys').select('id').where('id', '=', theirs!.id).execute(),
    );
    expect(kept).toEqual([{ id: theirs!.id }]);
    expect((await call(t, '/api/auth/passkey/delete-passkey', { body: { id: mine!.id }, jar: user.jar })).status).toBe(
      200,
    );
    const audit = (await accountAuditRows(t, user.id, 'user.passkey_removed')).map(({ metadata, tenant_id }) => ({
      tenant_id,
      metadata,
    }));
    expect(audit).toEqual([
      {
        tenant_id: null,
        metadata: { userId: user.id, passkeyId: mine!.id, name: 'Work laptop', deviceType: 'singleDevice' },
      },
    ]);
  });
});
