/**
 * Email domains an organization claims for single sign-on: their canonical
 * form, the public mail providers nobody may claim, and the DNS TXT record
 * that proves ownership (its name, its value, and the comparison of what DNS
 * answers against it).
 */
import { randomBytes } from 'node:crypto';
import { safeEqual } from './api-key-material.js';

export type CanonicalDomain = { domain: string } | { reason: string };

/** RFC 1035 §2.3.4: 63 octets a label, 253 characters a name written without the root dot. */
const MAX_LABEL = 63;
const MAX_NAME = 253;
/** A label of letters, digits and inner hyphens (RFC 1123 §2.1); punycode labels (`xn--…`) fit it too. */
const LABEL = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;

/**
 * The form a domain is stored and compared in: trimmed, lower-case, an IDN in
 * punycode (the WHATWG URL host parser's IDNA mapping), no trailing dot, two
 * labels at least. Refuses IP addresses, ports, paths, wildcards, email
 * addresses and names over RFC 1035's limits, with a reason for the caller's
 * error details.
 */
export function canonicalDomain(input: string): CanonicalDomain {
  const text = input.trim().toLowerCase();
  if (text === '') return { reason: 'must not be empty' };
  if (text.includes('*')) return { reason: 'must not be a wildcard' };
  if (text.includes('@')) return { reason: 'must be a domain, not an email address' };
  if (/[/?#\\]/.test(text)) return { reason: 'must be a domain, not a URL or path' };
  if (text.includes(':') || text.startsWith('[')) return { reason: 'must not have a port or be an IP address' };
  if (/[\s%]/.test(text)) return { reason: 'must not contain spaces or escapes' };
  let host: string;
  try {
    host = new URL(`http://${text}`).hostname;
  } catch {
    return { reason: 'is not a valid domain name' };
  }
  if (host.endsWith('.')) host = host.slice(0, -1);
  const labels = host.split('.');
  // The URL parser reads a name ending in a number as an IPv4 address ("10.1", "0x7f.1").
  if (/^\d+(\.\d+){3}$/.test(host) || /^(0x[0-9a-f]*|\d+)$/.test(labels.at(-1) ?? ''))
    return { reason: 'must not be an IP address' };
  if (labels.length < 2) return { reason: 'must have at least two labels (example.com)' };
  if (host.length > MAX_NAME) return { reason: `must be at most ${MAX_NAME} characters` };
  if (labels.some((label) => label.length > MAX_LABEL))
    return { reason: `each label must be at most ${MAX_LABEL} characters` };
  if (!labels.every((label) => LABEL.test(label)))
    return { reason: 'labels are letters, digits and inner hyphens only' };
  return { domain: host };
}

/**
 * Mail providers whose addresses anyone can get: a claim on one would let an
 * organization sign in everybody who uses it. Subdomains count as the provider.
 */
export const PUBLIC_MAIL_DOMAINS: readonly string[] = [
  'gmail.com',
  'googlemail.com',
  'outlook.com',
  'hotmail.com',
  'live.com',
  'msn.com',
  'yahoo.com',
  'icloud.com',
  'me.com',
  'mac.com',
  'aol.com',
  'proton.me',
  'protonmail.com',
  'gmx.com',
  'gmx.de',
  'mail.com',
  'yandex.ru',
  'mail.ru',
  'qq.com',
  '163.com',
  'zoho.com',
  'fastmail.com',
  'hey.com',
  'tutanota.com',
];

const PUBLIC = new Set(PUBLIC_MAIL_DOMAINS);

/** Whether a canonical domain is a public mail provider's or under one (`eu.gmail.com` too). */
export function isPublicMailDomain(domain: string): boolean {
  const labels = domain.split('.');
  return labels.some((_, i) => i < labels.length - 1 && PUBLIC.has(labels.slice(i).join('.')));
}

/** The name the TXT record is published at. */
export function txtRecordName(domain: string): string {
  return `_gatehouse-challenge.${domain}`;
}

export const TXT_VALUE_PREFIX = 'gatehouse-domain-verification=';

/** The record's value for a token. */
export function txtRecordValue(token: string): string {
  return `${TXT_VALUE_PREFIX}${token}`;
}

/** A fresh value: 24 random bytes (192 bits) in base64url, so one domain claim cannot be guessed from another. */
export function newTxtRecordValue(): string {
  return txtRecordValue(randomBytes(24).toString('base64url'));
}

/**
 * Whether any TXT record (its character-strings already joined) equals the
 * expected value exactly. Every record is compared in constant time, and all
 * of them are, so the time taken does not tell which one came close.
 */
export function txtProves(records: readonly string[], expected: string): boolean {
  let proven = false;
  for (const record of records) proven = safeEqual(record, expected) || proven;
  return proven;
}
