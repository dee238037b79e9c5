import { describe, expect, it } from 'vitest';
import {
  canonicalDomain,
  isPublicMailDomain,
  newTxtRecordValue,
  PUBLIC_MAIL_DOMAINS,
  txtProves,
  txtRecordName,
  txtRecordValue,
} from '../../src/auth/sso-domains.js';

describe('canonicalDomain', () => {
  it.each([
    ['example.com', 'example.com'],
    ['  Example.COM  ', 'example.com'],
    ['example.com.', 'example.com'],
    ['mail.eu.example.co.uk', 'mail.eu.example.co.uk'],
    ['a-b.example', 'a-b.example'],
    ['Bücher.Example', 'xn--bcher-kva.example'],
    ['例え.テスト', 'xn--r8jz45g.xn--zckzah'],
    ['example。com', 'example.com'],
    ['xn--bcher-kva.example', 'xn--bcher-kva.example'],
    ['123.example.com', '123.example.com'],
  ])('%j → %j', (input, domain) => {
    expect(canonicalDomain(input)).toEqual({ domain });
  });

  it.each([
    ['', 'must not be empty'],
    ['   ', 'must not be empty'],
    ['*.example.com', 'wildcard'],
    ['someone@example.com', 'email address'],
    ['https://example.com', 'URL or path'],
    ['example.com/path', 'URL or path'],
    ['example.com?x=1', 'URL or path'],
    ['example.com:443', 'port'],
    ['192.168.0.1', 'IP address'],
    ['10.1', 'IP address'],
    ['0x7f.1', 'IP address'],
    ['example.123', 'not a valid domain'],
    ['[::1]', 'IP address'],
    ['::1', 'IP address'],
    ['localhost', 'two labels'],
    ['com.', 'two labels'],
    ['example..com', 'letters, digits'],
    ['example.com..', 'letters, digits'],
    ['-example.com', 'letters, digits'],
    ['example-.com', 'letters, digits'],
    ['ex_ample.com', 'letters, digits'],
    ['exa%41mple.com', 'escapes'],
    ['ex ample.com', 'spaces'],
    [`${'a'.repeat(64)}.com`, '63 characters'],
    [`${'a.'.repeat(126)}com`, '253 characters'],
    ['xn--zz.com', 'not a valid domain'],
  ])('%j is refused (%s)', (input, reason) => {
    const result = canonicalDomain(input);
    expect(result).toEqual({ reason: expect.stringContaining(reason) });
  });

  it('accepts a name of exactly 253 characters and labels of 63', () => {
    const name = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`;
    expect(name).toHaveLength(253);
    expect(canonicalDomain(name)).toEqual({ domain: name });
    expect(canonicalDomain(`${name}.`)).toEqual({ domain: name });
  });

  it('its output is stable and fits the stored form', () => {
    for (const input of ['Bücher.Example', 'EXAMPLE.com.', 'sub.例え.テスト']) {
      const first = canonicalDomain(input);
      if (!('domain' in first)) throw new Error(`refused ${input}`);
      expect(first.domain).toMatch(/^[a-z0-9.-]{1,253}$/);
      expect(canonicalDomain(first.domain)).toEqual(first);
    }
  });
});

describe('isPublicMailDomain', () => {
  it('every listed provider, and names under them', () => {
    expect(PUBLIC_MAIL_DOMAINS).toEqual(expect.arrayContaining(['gmail.com', 'outlook.com', 'proton.me', '163.com']));
    for (const provider of PUBLIC_MAIL_DOMAINS) {
      expect(isPublicMailDomain(provider), provider).toBe(true);
      expect(isPublicMailDomain(`eu.mx.${provider}`), provider).toBe(true);
    }
  });

  it('not a look-alike, a parent or an unrelated domain', () => {
    for (const domain of ['notgmail.com', 'gmail.com.example', 'com', 'example.com', 'mail.example.com', 'gmx.net'])
      expect(isPublicMailDomain(domain), domain).toBe(false);
  });
});

describe('the TXT record', () => {
  it('is published at _gatehouse-challenge.<domain> with gatehouse-domain-verification=<token>', () => {
    expect(txtRecordName('example.com')).toBe('_gatehouse-challenge.example.com');
    expect(txtRecordValue('abc')).toBe('gatehouse-domain-verification=abc');
  });

  it('a fresh value carries 24 random bytes in base64url, different each time', () => {
    const values = new Set(Array.from({ length: 50 }, () => newTxtRecordValue()));
    expect(values.size).toBe(50);
    for (const value of values) expect(value).toMatch(/^gatehouse-domain-verification=[A-Za-z0-9_-]{32}$/);
  });

  it('txtProves: any record equal to the value, exactly', () => {
    const expected = txtRecordValue('tok3n');
    expect(txtProves([expected], expected)).toBe(true);
    expect(txtProves(['v=spf1 -all', expected, 'other'], expected)).toBe(true);
    expect(txtProves([], expected)).toBe(false);
    expect(txtProves(['v=spf1 -all'], expected)).toBe(false);
    for (const near of [
      `${expected} `,
      ` ${expected}`,
      expected.toUpperCase(),
      `"${expected}"`,
      expected.slice(0, -1),
      `${expected}x`,
      'gatehouse-domain-verification=',
      txtRecordValue('TOK3N'),
    ])
      expect(txtProves([near], expected), near).toBe(false);
  });
});
