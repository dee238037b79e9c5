/**
 * Workers bundle only (wrangler.toml `alias`): stands in for `node-rsa`,
 * which samlify imports to sign and verify HTTP-Redirect messages. The
 * service sends its AuthnRequests unsigned and takes responses by HTTP-POST
 * only, whose XML signatures xml-crypto checks, so samlify never calls it
 * here. Node never sees this file.
 */
export default class NodeRsa {
  constructor() {
    throw new Error('node-rsa is not bundled in the Worker (src/platform/worker-shims/node-rsa.ts)');
  }
}
