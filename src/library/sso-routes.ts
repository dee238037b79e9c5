import { z } from 'zod';
import { access } from '../auth/access.js';
import { ApiError, type ErrorDetail } from '../shared/errors.js';
import { email, line, slug } from './fields.js';
import type { InputRewrite, LibraryRoute } from './row.js';

/**
 * Enterprise single sign-on's sign-in (docs/sso.md "Sign-in"), served by the
 * service's own plugin of the auth library (src/auth/sso-plugin.ts): the
 * library creates the session, its cookies and its marks.
 */

const signInBody = z
  .object({
    email: email.optional(),
    organizationSlug: slug.optional(),
    callbackURL: line(2048).min(1),
    errorCallbackURL: line(2048).min(1).optional(),
  })
  .strict()
  .refine((body) => (body.email === undefined) !== (body.organizationSlug === undefined), {
    message: 'exactly one of email and organizationSlug',
    path: ['email'],
  });

/** A path of this origin (not `//host`, not `/\host`), or an absolute URL at APP_URL's origin. */
function staysWithTheApp(value: string, appUrl: string): boolean {
  if (/^\/(?![/\\])/.test(value)) return !value.includes('\\');
  if (!URL.canParse(value)) return false;
  const url = new URL(value);
  return (url.protocol === 'https:' || url.protocol === 'http:') && url.origin === new URL(appUrl).origin;
}

/** Where the browser lands after the IdP stays with the app (an open redirect otherwise): else 400. */
const checkCallbacks: InputRewrite = async function checkCallbacks(call, deps) {
  const body = call.body ?? {};
  const details: ErrorDetail[] = [];
  for (const field of ['callbackURL', 'errorCallbackURL'] as const) {
    const value = body[field];
    if (typeof value === 'string' && !staysWithTheApp(value, deps.config.auth.appUrl))
      details.push({ path: `body.${field}`, message: "must be a path, or a URL at the app's origin (APP_URL)" });
  }
  if (details.length) throw new ApiError('VALIDATION_ERROR', 'Request validation failed', { details });
  return body;
};

/** What the IdP's page posts (SAML HTTP-POST binding): bounded; the plugin says what is missing. */
const samlForm = z.looseObject({
  SAMLResponse: z
    .string()
    .max(512 * 1024)
    .regex(/^[A-Za-z0-9+/=\s]*$/, { message: 'must be base64' })
    .optional(),
  RelayState: line(1024).optional(),
});

export const SSO_ROUTES: readonly LibraryRoute[] = [
  {
    method: 'POST',
    path: '/sign-in/sso',
    summary: "Start a single sign-on: the organization's identity provider URL",
    access: access.public(),
    tier: 'auth',
    transaction: 'none',
    body: signInBody,
    rewrite: checkCallbacks,
  },
  {
    method: 'GET',
    path: '/sso/callback/:connectionId',
    summary: "An OIDC identity provider's redirect back (completes the single sign-on)",
    access: access.public(),
    tier: 'global',
    transaction: 'none',
    newSessions: 'sso',
    query: z.looseObject({
      code: line(2048).optional(),
      state: line(256).optional(),
      error: line(256).optional(),
    }),
  },
  {
    method: 'POST',
    path: '/sso/saml2/callback/:connectionId',
    summary: "A SAML identity provider's form post (completes the single sign-on)",
    access: access.public(),
    tier: 'global',
    transaction: 'none',
    newSessions: 'sso',
    foreignForm: samlForm,
  },
];
