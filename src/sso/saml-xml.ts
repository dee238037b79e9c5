/**
 * The one way SAML text becomes a DOM here (metadata, responses, and the
 * well-formedness check samlify asks for): strict parsing with @xmldom/xmldom
 * (what samlify and xml-crypto parse with), every parser error or warning
 * fatal, and no document type declaration at all. SAML messages and metadata
 * never need one, and a DTD is how XML external entities and entity expansion
 * get in, so refusing it is simpler than trusting each parser's handling.
 */
import { DOMParser } from '@xmldom/xmldom';
import { SsoFlowError } from './errors.js';

export const NS = {
  assertion: 'urn:oasis:names:tc:SAML:2.0:assertion',
  protocol: 'urn:oasis:names:tc:SAML:2.0:protocol',
  metadata: 'urn:oasis:names:tc:SAML:2.0:metadata',
  dsig: 'http://www.w3.org/2000/09/xmldsig#',
} as const;

/** Parses `text`, or throws what `fail(reason)` makes (the caller's error type). */
export function parseStrictXml(text: string, fail: (reason: string) => Error): Document {
  if (/<!DOCTYPE|<!ENTITY/i.test(text)) throw fail('a document type declaration is not allowed');
  let problem: string | undefined;
  const record = (message: string) => {
    problem ??= String(message).split('\n')[0];
  };
  let doc: Document;
  try {
    doc = new DOMParser({
      errorHandler: { warning: record, error: record, fatalError: record },
    }).parseFromString(text, 'text/xml');
  } catch (error) {
    throw fail(`not well-formed XML (${error instanceof Error ? error.message.split('\n')[0] : 'parse error'})`);
  }
  if (problem !== undefined) throw fail(`not well-formed XML (${problem})`);
  if (!doc?.documentElement || doc.doctype) throw fail('not a well-formed XML document');
  return doc;
}

/** The element children of `parent` in namespace `ns` named `local` (direct children only). */
export function childElements(parent: Element, ns: string, local: string): Element[] {
  const out: Element[] = [];
  for (let node = parent.firstChild; node; node = node.nextSibling) {
    if (node.nodeType === 1 && (node as Element).namespaceURI === ns && (node as Element).localName === local) {
      out.push(node as Element);
    }
  }
  return out;
}

/** Every element in namespace `ns` named `local` under `root` (any depth, `root` excluded). */
export function descendants(root: Document | Element, ns: string, local: string): Element[] {
  return Array.from(root.getElementsByTagNameNS(ns, local));
}

/** The trimmed text of an element, '' when absent. */
export function textOf(element: Element | undefined): string {
  return (element?.textContent ?? '').trim();
}

/** A posted response refused, saying why (never quoting the response). */
export function invalidResponse(reason: string): SsoFlowError {
  return new SsoFlowError('invalid_response', `SAML response refused: ${reason}`);
}
