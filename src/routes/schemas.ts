import { z } from '@hono/zod-openapi';
import { PERMISSION_PATTERN } from '../auth/permissions.js';

/** Spec §4 rule 1: path ids are UUID version 4. */
export const IdParams = z.object({ id: z.uuidv4().openapi({ param: { name: 'id', in: 'path' } }) });

/** A permission string in `resource:action` form (spec §2). */
export const PermissionString = z.string().regex(PERMISSION_PATTERN, { message: 'must be <resource>:<action> with a known resource and action' });

/** A list of distinct permission strings. */
export const PermissionList = z
  .array(PermissionString)
  .max(17)
  .refine((list) => new Set(list).size === list.length, { message: 'must not repeat a permission' });

export const RoleSchema = z
  .object({
    id: z.uuid(),
    name: z.string(),
    slug: z.string(),
    description: z.string(),
    permissions: z.array(z.string()),
    isDefault: z.boolean(),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .openapi('Role');

export type RoleRecord = z.infer<typeof RoleSchema>;

export function toRoleRecord(role: {
  id: string;
  name: string;
  slug: string;
  description: string;
  permissions: string[];
  is_default: boolean;
  created_at: Date;
  updated_at: Date;
}): RoleRecord {
  return {
    id: role.id,
    name: role.name,
    slug: role.slug,
    description: role.description,
    permissions: [...role.permissions].sort(),
    isDefault: role.is_default,
    createdAt: new Date(role.created_at).toISOString(),
    updatedAt: new Date(role.updated_at).toISOString(),
  };
}
