DROP TRIGGER IF EXISTS steward_audit_append_only ON steward_audit;
DROP TRIGGER IF EXISTS steward_audit_link ON steward_audit;
DROP FUNCTION IF EXISTS steward_audit_refuse_change();
DROP FUNCTION IF EXISTS steward_audit_link();
DROP FUNCTION IF EXISTS steward_audit_hash(text, text, integer, timestamptz, text, text, uuid, text, jsonb);
