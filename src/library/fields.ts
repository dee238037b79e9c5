import { z } from 'zod';
import { canonicalEmail, keepsItsCase } from '../auth/email-address.js';

export type { LibraryRoute } from './row.js';

/** The zod fields the library's bodies and queries are checked with (bounded, no control characters). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is its purpose
export const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

/** One line of human text: no control characters (CR/LF included). */
export const text = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((value) => !CONTROL.test(value), 'must not contain control characters')
    .refine((value) => value.trim() !== '', 'must not be blank');

export const line = (max: number) =>
  z
    .string()
    .max(max)
    .refine((value) => !CONTROL.test(value), 'must not contain control characters');
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
export const orgName = text(100);
export const userName = text(100);
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
