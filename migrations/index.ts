import type { Migration } from 'kysely';
import * as authTables from './0001_auth_tables.js';
import * as rbac from './0002_rbac.js';
import * as auditLogs from './0003_audit_logs.js';
import * as apiKeys from './0004_api_keys.js';
import * as sessionStateNotify from './0005_session_state_notify.js';
import * as tenantRoles from './0006_tenant_roles.js';
import * as multiFactor from './0007_multi_factor.js';
import * as webhooks from './0008_webhooks.js';
import * as stepUp from './0009_step_up.js';
import * as webhookFairness from './0010_webhook_fairness.js';
import * as sso from './0011_sso.js';
import * as scim from './0012_scim.js';

/**
 * Every migration, in order. Listed statically (not read from the file system)
 * so the same list works under Node, the test runner and a bundler.
 * Each file is frozen once merged: history is changed by adding a file.
 */
export const migrations: Record<string, Migration> = {
  '0001_auth_tables': authTables,
  '0002_rbac': rbac,
  '0003_audit_logs': auditLogs,
  '0004_api_keys': apiKeys,
  '0005_session_state_notify': sessionStateNotify,
  '0006_tenant_roles': tenantRoles,
  '0007_multi_factor': multiFactor,
  '0008_webhooks': webhooks,
  '0009_step_up': stepUp,
  '0010_webhook_fairness': webhookFairness,
  '0011_sso': sso,
  '0012_scim': scim,
};
