/**
 * A SAML 2.0 identity provider for tests: samlify's IdentityProvider with its
 * own self-signed RSA key pair (@peculiar/x509 over WebCrypto), answering our
 * AuthnRequests with signed responses, and the forgeries a service provider
 * must refuse, built from the same genuine responses.
 */
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(crypto);

export interface SigningKey {
  /** PKCS#8 PEM (what samlify and xml-crypto sign with). */
  privateKeyPem: string;
  /** Base64 DER body, as the service stores it. */
  certificate: string;
  certificatePem: string;
}

function pem(label: string, der: ArrayBuffer): string {
  const body = Buffer.from(der)
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .trimEnd();
  return `-----BEGIN ${label}-----\n${body}\n-----END ${label}-----\n`;
}

/** A fresh RSA 2048 key and a self-signed certificate for it, valid from yesterday for a year. */
export async function createSigningKey(commonName = 'Test IdP', algorithm: 'RSA' | 'EC' = 'RSA'): Promise<SigningKey> {
  const params =
    algorithm === 'RSA'
      ? {
          name: 'RSASSA-PKCS1-v1_5',
          hash: 'SHA-256',
          publicExponent: new Uint8Array([1, 0, 1]),
          modulusLength: 2048,
        }
      : { name: 'ECDSA', namedCurve: 'P-256' };
  const keys = (await crypto.subtle.generateKey(params, true, ['sign', 'verify'])) as CryptoKeyPair;
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString('hex'),
    name: `CN=${commonName}`,
    notBefore: new Date(now - 86_400_000),
    notAfter: new Date(now + 365 * 86_400_000),
    signingAlgorithm: algorithm === 'RSA' ? params : { name: 'ECDSA', hash: 'SHA-256' },
    keys,
  });
  const pkcs8 = await crypto.subtle.exportKey('pkcs8', keys.privateKey);
  return {
    privateKeyPem: pem('PRIVATE KEY', pkcs8),
    certificate: Buffer.from(cert.rawData).toString('base64'),
    certificatePem: cert.toString('pem'),
  };
}
