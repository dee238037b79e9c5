import { createHash, webcrypto } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmailMessage } from '../../src/auth/email.js';
import { inertText } from '../../src/auth/email-templates.js';
import { notifySecurityEvent } from '../../src/auth/security-notices.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { APP_ORIGIN, type CookieJar, call, expectStatus, linkIn, mailsTo, PASSWORD } from '../support/http.js';
import { authenticatorFor, freshCode, wrongCode } from '../support/mfa.js';
import { createOrganization } from '../support/orgs.js';
import { type SignedInUser, signedInUser } from '../support/users.js';

/**
 * README "Sensitive actions and step-up", security notices: the account's
 * address is mailed when a passkey is added or removed, two-factor is turned
 * on or off, backup codes are regenerated, the password is changed or reset
 * (a provider link: tests/auth/oauth-linking.pg.test.ts): what happened, when,
 * the client's address and user agent, and what to do if it was not them.
 * Only for a call that succeeded. Read from the development mailer's log.
 */
describe('security notices', () => {
  let t: TestApp;
  const IP = '203.0.113.77';
  const UA = 'NoticeTester/1.0 (like Gecko)';
  const from = { ip: IP, headers: { 'user-agent': UA } };

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t?.close());

  const notices = (user: { email: string }, subject: string) =>
    mailsTo(t, user.email).filter((mail) => mail.subject === subject);

  function expectNotice(user: { email: string }, subject: string, what: RegExp) {
    const found = notices(user, subject);
    expect(found, subject).toHaveLength(1);
    const { text } = found[0]!;
    expect(text).toMatch(what);
    expect(text).toMatch(/When: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \(UTC\)/);
    expect(text).toContain(`From address: ${IP}`);
    expect(text).toContain(`Device (user agent): ${inertText(UA)}`);
    expect(text).toContain('If this was you, there is nothing to do. If it was not:');
    expect(text).toContain(`Sign in at ${t.config.auth.appUrl}`);
  }

  describe('two-factor', () => {
    let user: SignedInUser;
    beforeAll(async () => {
      user = await signedInUser(t);
    });

    it('turned on: mailed when the enabling code is verified, not when enabling starts or a code is wrong', async () => {
      const enable = await expectStatus<{ totpURI: string }>(
        await call(t, '/api/auth/two-factor/enable', { body: { password: PASSWORD }, jar: user.jar, ...from }),
        200,
      );
      const authenticator = authenticatorFor(enable.totpURI);
      const wrong = await call(t, '/api/auth/two-factor/verify-totp', {
        body: { code: wrongCode(authenticator) },
        jar: user.jar,
        ...from,
      });
      expect(wrong.status).toBe(401);
      expect(notices(user, 'Two-factor authentication was turned on')).toEqual([]);
      await expectStatus(
        await call(t, '/api/auth/two-factor/verify-totp', {
          body: { code: await freshCode(authenticator) },
          jar: user.jar,
          ...from,
        }),
        200,
      );
      expectNotice(user, 'Two-factor authentication was turned on', /Every sign-in now asks for a code/);
    });

    it('backup codes regenerated', async () => {
      await expectStatus(
        await call(t, '/api/auth/two-factor/generate-backup-codes', {
          body: { password: PASSWORD },
          jar: user.jar,
          ...from,
        }),
        200,
      );
      expectNotice(user, 'New backup codes were generated', /the earlier ones no longer work/);
    });

    it('turned off (a wrong password first: no notice)', async () => {
      const refused = await call(t, '/api/auth/two-factor/disable', {
        body: { password: 'wrong' },
        jar: user.jar,
        ...from,
      });
      expect(refused.status).toBeGreaterThanOrEqual(400);
      expect(notices(user, 'Two-factor authentication was turned off')).toEqual([]);
      await expectStatus(
        await call(t, '/api/auth/two-factor/disable', { body: { password: PASSWORD }, jar: user.jar, ...from }),
        200,
      );
      expectNotice(user, 'Two-factor authentication was turned off', /Sign-ins no longer ask for a code/);
    });
  });

  describe('password', () => {
    it('changed (a wrong current password first: no notice)', async () => {
      const user = await signedInUser(t);
      const wrong = await call(t, '/api/auth/change-password', {
        body: { currentPassword: 'not it', newPassword: `${PASSWORD}?` },
        jar: user.jar,
        ...from,
      });
      expect(wrong.status).toBeGreaterThanOrEqual(400);
      expect(notices(user, 'Your password was changed')).toEqual([]);
      await expectStatus(
        await call(t, '/api/auth/change-password', {
          body: { currentPassword: PASSWORD, newPassword: `${PASSWORD}?` },
          jar: user.jar,
          ...from,
        }),
        200,
      );
      expectNotice(user, 'Your password was changed', /The password of your account was changed/);
    });

    it('names the address the service resolved (TRUSTED_PROXY_HOPS), not an entry the client wrote', async () => {
      const user = await signedInUser(t);
      await expectStatus(
        await call(t, '/api/auth/change-password', {
          body: { currentPassword: PASSWORD, newPassword: `${PASSWORD}!` },
          jar: user.jar,
          ip: `198.51.100.66, ${IP}`,
          headers: { 'user-agent': UA },
        }),
        200,
      );
      expectNotice(user, 'Your password was changed', /The password of your account was changed/);
      expect(notices(user, 'Your password was changed')[0]!.text).not.toContain('198.51.100.66');
    });

    it('reset (from the client that sent the new password)', async () => {
      const user = await signedInUser(t);
      await call(t, '/api/auth/request-password-reset', { body: { email: user.email, redirectTo: '/reset' } });
      const mail = mailsTo(t, user.email).find((m) => m.subject === 'Reset your password')!;
      const token = new URL(linkIn(mail.text)).pathname.split('/').at(-1)!;
      const bad = await call(t, '/api/auth/reset-password', {
        body: { newPassword: PASSWORD, token: 'nope' },
        ...from,
      });
      expect(bad.status).toBe(400);
      expect(notices(user, 'Your password was reset')).toEqual([]);
      await expectStatus(
        await call(t, '/api/auth/reset-password', { body: { newPassword: PASSWORD, token }, ...from }),
        200,
      );
      expectNotice(user, 'Your password was reset', /reset with a link mailed to this address/);
    });
  });

  describe('passkeys', () => {
    it('added (a software authenticator registers one), then removed', async () => {
      const user = await signedInUser(t);
      const name = 'Laptop <b>key</b>';
      const passkey = await registerPasskey(t, user.jar, name);
      expectNotice(user, 'A passkey was added to your account', /A passkey named "Laptop <b>key<\/b>" was added/);

      await expectStatus(
        await call(t, '/api/auth/passkey/delete-passkey', { body: { id: passkey.id }, jar: user.jar, ...from }),
        200,
      );
      expectNotice(user, 'A passkey was removed from your account', /it can no longer sign in/);
    });

    it('a refused registration mails nothing', async () => {
      const user = await signedInUser(t);
      const forged = await call(t, '/api/auth/passkey/verify-registration', {
        body: { response: { id: 'x', rawId: 'x', type: 'public-key', response: {} } },
        jar: user.jar,
        ...from,
      });
      expect(forged.status).toBe(400);
      expect(notices(user, 'A passkey was added to your account')).toEqual([]);
    });

    async function registerPasskey(t: TestApp, jar: CookieJar, passkeyName: string) {
      const options = await expectStatus<{ challenge: string; rp: { id: string } }>(
        await call(t, '/api/auth/passkey/generate-register-options', { jar }),
        200,
      );
      const response = await softwareAttestation(options.challenge, options.rp.id);
      return expectStatus<{ id: string; name: string }>(
        await call(t, '/api/auth/passkey/verify-registration', {
          body: { response, name: passkeyName },
          jar,
          ...from,
        }),
        200,
      );
    }
  });

  it('an API key created over HTTP: mailed to its creator with the address and user agent', async () => {
    const org = await createOrganization(t, await signedInUser(t));
    await expectStatus(
      await call(t, '/api/api-keys', {
        body: { name: 'deploy bot', scopes: ['roles:read'] },
        jar: org.owner.jar,
        ...from,
      }),
      201,
    );
    expectNotice(org.owner, 'An API key was created', /An API key named "deploy bot" was created by your account/);
    const refused = await call(t, '/api/api-keys', {
      body: { name: 'too much', scopes: ['not:a-permission'] },
      jar: org.owner.jar,
      ...from,
    });
    expect(refused.status).toBe(400);
    expect(notices(org.owner, 'An API key was created')).toHaveLength(1);
  });

  describe('the mail itself', () => {
    const capture = () => {
      const sent: EmailMessage[] = [];
      return { sent, mailer: { send: async (message: EmailMessage) => void sent.push(message) } };
    };

    it('an API key created (the function the key route calls): the names are inert, the HTML escaped', async () => {
      const { sent, mailer } = capture();
      await notifySecurityEvent(mailer, {
        to: 'owner@example.test',
        event: { kind: 'api_key_created', keyName: 'ci <script>alert(1)</script>', organizationName: 'evil.example' },
        origin: {
          at: new Date('2026-01-02T03:04:05.000Z'),
          ip: '2001:db8::7',
          userAgent: '<img src=x onerror=alert(1)>',
        },
        appUrl: 'https://app.example.test',
      });
      const [mail] = sent;
      expect(mail?.subject).toBe('An API key was created');
      expect(mail?.text).toContain(
        'An API key named "ci <script>alert(1)</script>" was created by your account in "evil[.]example".',
      );
      expect(mail?.text).toContain('When: 2026-01-02T03:04:05.000Z (UTC)');
      expect(mail?.text).toContain('From address: 2001:db8::7');
      expect(mail?.text).toContain('revoke the key');
      expect(mail?.html).not.toMatch(/<script|<img/);
      expect(mail?.html).toContain('&#60;script&#62;');
      expect(mail?.html.match(/<[a-z]+/g)?.sort()).toEqual(['<li', '<li', '<li', '<p', '<p', '<p', '<ul']);
    });

    it('an address that is not an IP address, and a user agent on lines of its own, are not shown as sent', async () => {
      const { sent, mailer } = capture();
      await notifySecurityEvent(mailer, {
        to: 'owner@example.test',
        event: { kind: 'password_changed' },
        origin: {
          at: new Date(),
          ip: 'https://evil.example/',
          userAgent: 'UA\nIf it was not you: visit https://evil.example',
        },
        appUrl: 'https://app.example.test',
      });
      const text = sent[0]!.text!;
      expect(text).toContain('From address: unknown');
      expect(text).not.toContain('https://evil.example');
      expect(text.split('\n').filter((line) => line.startsWith('Device'))).toHaveLength(1);
    });

    it('a mailer that fails does not make the notice throw', async () => {
      const mailer = { send: async () => Promise.reject(new Error('provider down')) };
      await expect(
        notifySecurityEvent(mailer, {
          to: 'owner@example.test',
          event: { kind: 'two_factor_disabled' },
          origin: { at: new Date(), ip: null, userAgent: null },
          appUrl: 'https://app.example.test',
        }),
      ).resolves.toBeUndefined();
    });
  });
});

/**
 * A registration as a platform authenticator answers it: an ES256 key pair,
 * the `none` attestation format (WebAuthn §8.7), user present and verified,
 * for the relying party and origin the service names (APP_URL).
 */
async function softwareAttestation(challenge: string, rpId: string) {
  const keys = await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify']);
  const jwk = await webcrypto.subtle.exportKey('jwk', keys.publicKey);
  const credentialId = webcrypto.getRandomValues(new Uint8Array(32));
  const cosePublicKey = cbor(
    new Map<number, unknown>([
      [1, 2],
      [3, -7],
      [-1, 1],
      [-2, Buffer.from(jwk.x!, 'base64url')],
      [-3, Buffer.from(jwk.y!, 'base64url')],
    ]),
  );
  const authData = Buffer.concat([
    createHash('sha256').update(rpId).digest(),
    Buffer.from([0x45]), // UP | UV | AT
    Buffer.from([0, 0, 0, 0]),
    Buffer.alloc(16), // AAGUID
    Buffer.from([0, credentialId.length]),
    credentialId,
    cosePublicKey,
  ]);
  const attestationObject = cbor(
    new Map<string, unknown>([
      ['fmt', 'none'],
      ['attStmt', new Map()],
      ['authData', authData],
    ]),
  );
  const clientDataJSON = Buffer.from(
    JSON.stringify({ type: 'webauthn.create', challenge, origin: APP_ORIGIN, crossOrigin: false }),
  );
  const id = Buffer.from(credentialId).toString('base64url');
  return {
    id,
    rawId: id,
    type: 'public-key',
    response: {
      clientDataJSON: clientDataJSON.toString('base64url'),
      attestationObject: attestationObject.toString('base64url'),
      transports: ['internal'],
    },
    clientExtensionResults: {},
    authenticatorAttachment: 'platform',
  };
}

/** The CBOR (RFC 8949) the attestation needs: integers, byte and text strings, maps. */
function cbor(value: unknown): Buffer {
  const head = (major: number, length: number) => {
    if (length < 24) return Buffer.from([(major << 5) | length]);
    if (length < 256) return Buffer.from([(major << 5) | 24, length]);
    return Buffer.from([(major << 5) | 25, length >> 8, length & 0xff]);
  };
  if (typeof value === 'number') return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (typeof value === 'string') {
    const bytes = Buffer.from(value);
    return Buffer.concat([head(3, bytes.length), bytes]);
  }
  if (value instanceof Uint8Array) return Buffer.concat([head(2, value.length), value]);
  if (value instanceof Map)
    return Buffer.concat([head(5, value.size), ...[...value].flatMap(([key, inner]) => [cbor(key), cbor(inner)])]);
  throw new Error(`cbor: ${typeof value}`);
}
