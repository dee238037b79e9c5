import { z } from 'zod';
import { canonicalEmail, keepsItsCase } from '../auth/email-address.js';
import { line, NAME_MAX, text } from '../shared/text.js';

/*
 * The zod fields the library's bodies and queries are checked with (bounded,
 * no control characters): text and line fields are the service's own
 * (src/shared/text.ts), one rule for both doors.
 */
export { line, text } from '../shared/text.js';
export type { LibraryRoute } from './row.js';

export const httpUrl = z
  .string()
  .max(2048)
  .refine((value) => /^https?:\/\/[^\s]+$/i.test(value) && URL.canParse(value), 'must be an http(s) URL');
/** Where the library redirects after a flow: a path, or a URL it checks against the trusted origins. */
export const callback = line(2048).optional();
/**
 * An address as the library gets it: in its canonical form (trimmed, ASCII
 * letters lower-cased), and refused when the library's own lower-casing would
 * fold it onto another address (src/auth/email-address.ts).
 */
export const email = line(254)
  .transform(canonicalEmail)
  .refine(keepsItsCase, 'must not contain upper-case letters outside ASCII');
/** Where an email names someone to act on (an invitee, a member), it must be one. */
export const address = z.email().max(254).transform(canonicalEmail);
/** A UUID version 4; `pattern` states the version in the OpenAPI document (`format: uuid` alone admits any). */
export const uuid = z.uuid({ version: 'v4' }).meta({ pattern: z.regexes.uuid(4).source });
export const slug = z
  .string()
  .max(64)
  .regex(/^[a-z0-9]+(?:-[a-z0-9]+)*$/, 'lower-case letters, digits and single hyphens');
export const metadata = z
  .record(z.string().max(64), z.unknown())
  .refine((value) => JSON.stringify(value).length <= 4096, 'must be at most 4096 bytes of JSON');
export const orgName = text(NAME_MAX);
export const userName = text(NAME_MAX);
export const image = z.union([httpUrl, z.null()]);
export const providerId = z.string().regex(/^[a-z0-9-]{1,32}$/);
export const pageNumber = (max: number) =>
  z
    .union([
      z.number(),
      z
        .string()
        .regex(/^\d{1,9}$/, 'must be a whole number')
        .transform(Number),
    ])
    .pipe(z.number().int().min(0).max(max));

export const organizationRef = { organizationId: uuid.optional(), organizationSlug: slug.optional() };
